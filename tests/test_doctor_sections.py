"""``agentplug doctor`` checks every config section with the runtime's own models.

Issue 18 item 5: doctor said OK to configs that the runtime then refused. Each problem
is reported with its key path; keys under ``security`` and ``actions`` that nothing
reads are reported too, so no section is left unchecked.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from agentplug import PluginHost
from agentplug.actions.config_check import check_config, checked_sections
from agentplug.cli.main import main
from agentplug.config.model import AgentplugConfig
from agentplug.core.errors import ConfigError


def doctor(tmp_path: Path, config: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> str:
    path = tmp_path / "agentplug.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    code = main(["doctor", "--config", str(path)])
    out = capsys.readouterr().out
    assert (code == 0) == ("doctor: OK" in out)
    return out


@pytest.mark.parametrize(
    ("config", "problem"),
    [
        ({"customActions": [{"name": 5}]}, "PROBLEM: customActions[0].name: "),
        ({"customActions": [{"name": 5}]}, "PROBLEM: customActions[0].id: Field required"),
        ({"actions": {"shell": {"enabled": "sure"}}}, "PROBLEM: actions.shell.enabled: "),
        (
            {"security": {"ssrf": {"allowHosts": "127.0.0.1"}}},
            "PROBLEM: security.ssrf.allowHosts: ",
        ),
        (
            {"security": {"install_policy": {"default": "maybe"}}},
            "PROBLEM: security.install_policy.default: ",
        ),
        ({"actions": {"restart": {"delay": 1}}}, "PROBLEM: actions.restart.delay: "),
        ({"actions": {"plugins": {"no_index": "no" * 3}}}, "PROBLEM: actions.plugins.no_index: "),
        ({"actions": {"media": {"timeoutSeconds": -1}}}, "PROBLEM: actions.media.timeoutSeconds"),
        ({"actions": {"disabled": "SHELL_COMMAND"}}, "PROBLEM: actions.disabled: "),
    ],
)
def test_doctor_reports_a_bad_section_with_its_key_path(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], config: dict[str, Any], problem: str
) -> None:
    out = doctor(tmp_path, config, capsys)
    assert problem in out
    assert "doctor: OK" not in out


@pytest.mark.parametrize(
    ("config", "problem"),
    [
        ({"actions": {"shel": {"enabled": True}}}, "actions.shel: unknown section; did you mean"),
        ({"security": {"sssrf": {}}}, "security.sssrf: unknown section; did you mean 'ssrf'?"),
    ],
)
def test_doctor_reports_a_section_nothing_reads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], config: dict[str, Any], problem: str
) -> None:
    assert f"PROBLEM: {problem}" in doctor(tmp_path, config, capsys)


def test_doctor_says_ok_to_a_config_with_every_section_valid(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = {
        "actions": {
            "disabled": ["PLAY_EMOTE"],
            "shell": {"enabled": True, "cwd": str(tmp_path), "timeoutSeconds": 5},
            "restart": {"delay_s": 0},
            "plugins": {"no_index": True},
            "media": {"timeoutSeconds": 10},
        },
        "security": {
            "ssrf": {"allowHosts": ["127.0.0.1:8731"]},
            "install_policy": {"enabled": True, "default": "block"},
        },
        "customActions": [],
    }
    assert "doctor: OK" in doctor(tmp_path, config, capsys)


def test_every_section_the_runtime_reads_has_a_check() -> None:
    assert set(checked_sections()) >= {
        "security.install_policy",
        "security.ssrf",
        "actions.disabled",
        "actions.shell",
        "actions.media",
        "actions.avatar",
        "actions.emotes",
        "actions.restart",
        "actions.plugins",
        "customActions",
    }


def test_what_doctor_refuses_the_runtime_refuses_too() -> None:
    config = AgentplugConfig.parse({"actions": {"shell": {"enabled": "sure"}}})
    keys = [key for key, _ in check_config(config)]
    with pytest.raises(ConfigError) as refused:
        asyncio.run(PluginHost(config).actions.load())
    assert keys == [key for key, _ in refused.value.issues] == ["actions.shell.enabled"]
