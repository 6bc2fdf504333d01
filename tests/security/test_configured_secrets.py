"""Configured secrets are registered where they enter, so nothing the process says shows them.

Each entrance (an MCP server's headers and environment, an http action's headers, the
control API token) is loaded the way the runtime loads it; afterwards the value is
scrubbed from a log line of an unrelated logger and from any text.
"""

from __future__ import annotations

import logging
import secrets
from pathlib import Path

import pytest
from agentplug.core.redaction import REDACTED, scrub


def _value() -> str:
    return secrets.token_urlsafe(18)


def _logged(caplog: pytest.LogCaptureFixture, value: str) -> str:
    with caplog.at_level(logging.INFO, logger="agentplug.tests.configured"):
        logging.getLogger("agentplug.tests.configured").info("echo: %s", value)
    return caplog.records[-1].getMessage()


def test_an_mcp_servers_credential_headers_and_env_values_are_never_shown(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from agentplug.agent.config import agent_config

    header, token, root = _value(), _value(), "/srv/" + _value()
    agent_config(
        {
            "tools": {
                "mcp_servers": {
                    "remote": {"url": "http://127.0.0.1:9/mcp", "headers": {"X-Api-Key": header}},
                    "local": {"command": "srv", "env": {"SERVICE_TOKEN": token, "ROOT": root}},
                }
            }
        }
    )
    assert _logged(caplog, f"{header} {token} {root}") == f"echo: {REDACTED} {REDACTED} {root}"


def test_an_http_actions_authorization_header_is_never_shown(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from agentplug.actions.http_handler import HttpHandlerDef

    token = _value()
    HttpHandlerDef.model_validate(
        {
            "type": "http",
            "url": "https://api.example/x",
            "headers": {"Authorization": f"Bearer {token}"},
        }
    )
    assert _logged(caplog, token) == f"echo: {REDACTED}"


def test_the_control_api_token_is_never_shown(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    pytest.importorskip("starlette", reason="the control API needs: pip install 'agentplug[api]'")
    from agentplug import PluginHost
    from agentplug.api.app import create_app

    token = _value()
    create_app(PluginHost().gateway, token=token, state_dir=tmp_path)
    assert _logged(caplog, token) == f"echo: {REDACTED}"
    assert scrub(f"Authorization: Bearer {token}") == f"Authorization: Bearer {REDACTED}"
