"""Without an integration's library, using it says which extra to install (one line)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest


def _run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120
    )


@pytest.mark.parametrize(
    ("module", "blocked", "extra"),
    [
        ("agentplug.adapters.pydantic_ai", "pydantic_ai", "pydantic-ai"),
        ("agentplug.adapters.langchain", "langchain", "langchain"),
    ],
)
def test_an_adapter_without_its_framework_names_the_extra(
    module: str, blocked: str, extra: str
) -> None:
    done = _run(
        f"""
        import sys
        sys.modules[{blocked!r}] = None  # as if the extra were not installed
        try:
            import {module}
        except ImportError as exc:
            print(exc)
        """
    )
    assert f"pip install 'agentplug[{extra}]'" in done.stdout


def test_an_mcp_server_without_the_sdk_names_the_extra() -> None:
    done = _run(
        """
        import asyncio, sys
        sys.modules["mcp"] = None
        from agentplug.agent.mcp import McpError, McpToolSource
        try:
            asyncio.run(McpToolSource("files", {"command": "x"}).start())
        except McpError as exc:
            print(exc)
        """
    )
    assert done.stdout.strip() == (
        "MCP server 'files' needs the optional 'mcp' SDK; install it with: "
        "pip install 'agentplug[mcp]'"
    )


def test_the_proxy_without_the_sdk_names_the_extra() -> None:
    done = _run(
        """
        import sys
        sys.modules["mcp"] = None
        from agentplug.cli.main import main
        sys.exit(main(["mcp-proxy"]))
        """
    )
    assert done.returncode == 1
    assert "pip install 'agentplug[mcp]'" in done.stderr
