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
    # Every problem line names the file first: ``PROBLEM: <file>: <key>: <problem>``.
    assert all(
        line.startswith(f"PROBLEM: {path}: ") for line in out.splitlines() if "PROBLEM" in line
    )
    return out.replace(f"PROBLEM: {path}: ", "PROBLEM: ")


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
        (
            {"actions": {"shel": {"enabled": True}}},
            "actions.shel: unknown setting; did you mean 'shell'?",
        ),
        ({"security": {"sssrf": {}}}, "security.sssrf: unknown setting; did you mean 'ssrf'?"),
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


# -- issue 28: every section, every problem, in one run ------------------------------------

ISSUE_CONFIG = """\
[agent]
max_step = 3
model = "olama/llama3"

[runtim]
default_timeout_ms = 5

[runtime]
default_timout_ms = 5

[actions.shell]
enabld = true

[security.ssrf]
allowHosts = "127.0.0.1"
"""


def _doctor_file(tmp_path: Path, text: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    path = tmp_path / "agentplug.toml"
    path.write_text(text, encoding="utf-8")
    code = main(["doctor", "--config", str(path)])
    return code, capsys.readouterr().out


def test_doctor_reports_every_problem_of_a_file_in_one_run_with_file_key_and_did_you_mean(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = _doctor_file(tmp_path, ISSUE_CONFIG, capsys)
    path = tmp_path / "agentplug.toml"
    problems = [line for line in out.splitlines() if line.startswith("PROBLEM: ")]
    expected = {
        "agent.max_step": "did you mean 'max_steps'?",
        "agent.model": "did you mean 'ollama'?",
        "runtim": "did you mean 'runtime'?",
        "runtime.default_timout_ms": "did you mean 'default_timeout_ms'?",
        "actions.shell.enabld": "did you mean 'enabled'?",
        "security.ssrf.allowHosts": "valid list",
    }
    for key, hint in expected.items():
        line = f"PROBLEM: {path}: {key}: "
        assert any(p.startswith(line) and hint in p for p in problems), (key, out)
    assert len(problems) == len(expected), out
    assert out.splitlines()[-1] == f"doctor: {len(expected)} problem(s)"
    assert code == 2  # the config is invalid: the exit code of every command for it


def test_a_misspelt_top_level_section_is_a_problem_not_a_note(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = _doctor_file(tmp_path, "[runtim]\ndefault_timeout_ms = 5\n", capsys)
    assert f"PROBLEM: {tmp_path / 'agentplug.toml'}: runtim: unknown section; " in out
    assert "did you mean 'runtime'?" in out
    assert not [line for line in out.splitlines() if line.startswith("note: ") and "runtim" in line]
    assert code == 2


def test_a_top_level_key_that_is_no_section_is_kept_for_the_host_as_a_note(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = _doctor_file(tmp_path, "[my_host_app]\ncolour = 'blue'\n", capsys)
    assert (
        "note: " in out and "'my_host_app' is not an agentplug section (kept for the host)" in out
    )
    assert code == 0


def test_the_agent_section_is_checked_with_the_agent_runtimes_own_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # What the runner refuses (agentplug.agent.config.AgentConfig), doctor reports.
    from agentplug.agent.config import agent_config

    code, out = _doctor_file(tmp_path, "[agent]\nmax_steps = 0\n", capsys)
    with pytest.raises(ConfigError) as refused:
        agent_config({"max_steps": 0})
    assert [key for key, _ in refused.value.issues] == ["agent.max_steps"]
    assert f"PROBLEM: {tmp_path / 'agentplug.toml'}: agent.max_steps: " in out
    assert code == 2


def test_actions_code_is_a_section_the_runtime_reads_not_an_unknown_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = _doctor_file(tmp_path, "[actions.code]\npool_size = 2\n", capsys)
    assert "PROBLEM" not in out and code == 0, out
    code, out = _doctor_file(tmp_path, "[actions.code]\npool_size = 'many'\n", capsys)
    assert "actions.code.pool_size: " in out and code == 2


def test_every_command_refuses_an_invalid_config_naming_every_problem(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "agentplug.toml"
    path.write_text("[agent]\nmax_step = 3\n[runtim]\nx = 1\n", encoding="utf-8")
    for command in (["hooks"], ["plugins"], ["approvals", "list"], ["actions", "list"]):
        code = main([*command, "--config", str(path)])
        err = capsys.readouterr().err
        assert code == 2, (command, err)
        [line] = err.splitlines()
        assert (
            str(path) in line
            and "agent.max_step: unknown setting; did you mean 'max_steps'?" in line
        )
        assert "runtim: unknown section; did you mean 'runtime'?" in line


def test_config_schema_types_every_section_the_runtime_reads(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["config", "schema"]) == 0
    schema = json.loads(capsys.readouterr().out)
    defs = schema["$defs"]

    def model(node: dict[str, Any]) -> dict[str, Any]:
        if node.get("type") == "array":
            node = node["items"]
        ref = node.get("$ref") or next(
            (x["$ref"] for x in node.get("anyOf", []) if "$ref" in x), None
        )
        return defs[ref.rsplit("/", 1)[-1]] if ref else node

    wanted = {
        "plugins": "entries",
        "runtime": "stateDir",
        "state": "url",
        "agent": "maxSteps",
        "actions": "shell",
        "security": "ssrf",
        "customActions": "handler",
    }
    for section, key in wanted.items():
        assert key in model(schema["properties"][section]).get("properties", {}), section
    assert model(schema["properties"]["agent"])["additionalProperties"] is False
