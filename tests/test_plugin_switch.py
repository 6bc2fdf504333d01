"""``AGENTPLUG_DISABLE_PLUGINS=1`` (and ``--no-plugins``) turns installed plugins off for
every command, in one place: the host's loader (issue 28 item 8)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from agentplug import Gateway
from agentplug.cli.common import PLUGIN_COMMANDS, walk_parsers
from agentplug.cli.main import build_parser, main
from agentplug.core.loader import DISABLE_PLUGINS_ENV

EXAMPLE = "audit-log"  # an example plugin `make test` installs


def _agentplug(cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if k not in (DISABLE_PLUGINS_ENV,)}
    environ.update({"AGENTPLUG_CONFIG": "", **env})
    return subprocess.run(
        [sys.executable, "-m", "agentplug.cli", *args],
        cwd=cwd,
        env=environ,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_installed_example_plugins_load_without_the_switch(tmp_path: Path) -> None:
    assert EXAMPLE in _agentplug(tmp_path, "plugins").stdout


@pytest.mark.parametrize(
    ("args", "env"),
    [
        (["plugins"], {DISABLE_PLUGINS_ENV: "1"}),
        (["plugins", "--no-plugins"], {}),
        (["doctor"], {DISABLE_PLUGINS_ENV: "1"}),
        (["doctor", "--no-plugins"], {}),
        (["actions", "list"], {DISABLE_PLUGINS_ENV: "1"}),
        (["actions", "list", "--no-plugins"], {}),
    ],
    ids=lambda v: " ".join(v) if isinstance(v, list) else ",".join(v),
)
def test_the_switch_loads_no_installed_plugin_in_any_command(
    args: list[str], env: dict[str, str], tmp_path: Path
) -> None:
    done = _agentplug(tmp_path, *args, **env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert EXAMPLE not in done.stdout
    if args[0] == "doctor":
        assert "plugins loaded: 0" in done.stdout


def test_plugins_says_why_it_lists_none(tmp_path: Path) -> None:
    done = _agentplug(tmp_path, "plugins", "--no-plugins")
    assert "installed plugins are off" in done.stdout


@pytest.mark.parametrize("value", ["0", "false", "no", "off", ""])
def test_a_false_value_of_the_switch_keeps_plugins_on(value: str, tmp_path: Path) -> None:
    assert EXAMPLE in _agentplug(tmp_path, "plugins", **{DISABLE_PLUGINS_ENV: value}).stdout


def test_a_gateway_built_in_code_honours_the_switch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(DISABLE_PLUGINS_ENV, "1")
    gateway = Gateway.from_config({}, load_plugins=True)
    assert [r.plugin_id for r in gateway.host.plugins] == []
    monkeypatch.delenv(DISABLE_PLUGINS_ENV)
    loaded = Gateway.from_config({}, load_plugins=True)
    assert EXAMPLE in {r.plugin_id for r in loaded.host.plugins}


def test_every_command_that_loads_plugins_has_no_plugins() -> None:
    missing = [
        " ".join(path)
        for path, parser in walk_parsers(build_parser())
        if path
        and path[0] in PLUGIN_COMMANDS
        and parser._subparsers is None  # a command, not a group of commands
        and not any("--no-plugins" in a.option_strings for a in parser._actions)
    ]
    assert missing == []


def test_no_plugins_in_process_does_not_leak_into_the_next_command(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv(DISABLE_PLUGINS_ENV, raising=False)
    monkeypatch.setenv("AGENTPLUG_CONFIG", "")
    monkeypatch.chdir(tmp_path)
    assert main(["plugins", "--no-plugins"]) == 0
    assert DISABLE_PLUGINS_ENV not in os.environ
    capsys.readouterr()
