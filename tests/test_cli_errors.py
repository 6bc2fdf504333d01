"""Every CLI error is one line naming what was wrong and the fix, exit 2 for usage errors
and 1 for failures, never a traceback: each command with a missing config, a malformed
config, a missing plugin and a bad argument."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from agentplug.cli.main import main

# Commands that read an operator config (the leaf, with arguments that make it valid).
CONFIGURED = {
    "hooks": ["hooks", "--builtin-only"],
    "plugins": ["plugins"],
    "doctor": ["doctor"],
    "actions-list": ["actions", "list"],
    "actions-test": ["actions", "test", "X"],
    "actions-run": ["actions", "run", "CORE_STATUS"],
    "serve": ["serve", "--port", "0"],
    "plugin-list": ["plugin", "list"],
    "plugin-ejected": ["plugin", "ejected"],
    "plugin-eject": ["plugin", "eject", "some-plugin"],
    "approvals-list": ["approvals", "list"],
}
MALFORMED = {
    "bad-yaml": ("agentplug.yaml", "plugins: [unclosed\n", "not valid YAML at line"),
    "bad-toml": ("agentplug.toml", "[plugins\nenabled = true\n", "not valid TOML"),
    "wrong-type": (
        "agentplug.toml",
        '[runtime]\ndefaultTimeoutMs = "soon"\n',
        "runtime.defaultTimeoutMs: must be a positive integer",
    ),
    "unknown-key": (
        "agentplug.json",
        json.dumps({"plugins": {"entris": {}}}),
        "plugins.entris: unknown setting; did you mean 'entries'?",
    ),
}


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.delenv("AGENTPLUG_CONFIG", raising=False)
    monkeypatch.setenv("AGENTPLUG_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("AGENTPLUG_STATE_DIR", str(tmp_path / "state"))
    return work


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


def one_error_line(text: str, *needles: str) -> str:
    """The single line of ``text`` holding every needle (and no traceback anywhere)."""
    assert "Traceback" not in text
    lines = [line for line in text.splitlines() if all(n in line for n in needles)]
    assert len(lines) == 1, text
    return lines[0]


@pytest.mark.parametrize("command", list(CONFIGURED))
def test_a_missing_config_file_is_one_line_naming_it(
    command: str, here: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = str(here / "nope.toml")
    code, out, err = run([*CONFIGURED[command], "--config", missing], capsys)
    assert code == 2  # an invalid config is exit 2 everywhere, doctor included
    one_error_line(out + err, missing, "does not exist")


@pytest.mark.parametrize("case", list(MALFORMED))
@pytest.mark.parametrize("command", list(CONFIGURED))
def test_a_malformed_config_is_one_line_naming_the_file_and_the_problem(
    command: str, case: str, here: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    name, text, problem = MALFORMED[case]
    (here / name).write_text(text, encoding="utf-8")
    code, out, err = run(CONFIGURED[command], capsys)
    assert code == 2  # an invalid config is exit 2 everywhere, doctor included
    line = one_error_line(out + err, name, problem)
    if command != "doctor":
        assert line.startswith("agentplug ") and ": error: " in line


@pytest.mark.parametrize("command", list(CONFIGURED))
def test_a_bad_argument_is_a_one_line_usage_error(
    command: str, here: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run([*CONFIGURED[command], "--no-such-option"], capsys)
    assert code == 2 and out == ""
    one_error_line(err, "--no-such-option", "--help")


@pytest.mark.parametrize(
    "argv",
    [
        ["plugin", "eject", "no-such-plugin"],
        ["plugin", "sync", "no-such-plugin"],
        ["plugin", "reinject", "no-such-plugin"],
    ],
    ids=["eject", "sync", "reinject"],
)
def test_a_missing_plugin_is_one_line_naming_it(
    argv: list[str], here: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(argv, capsys)
    line = one_error_line(err, "'no-such-plugin'")
    assert line.startswith(f"agentplug plugin {argv[1]}: error: ")
    # eject: no installed plugin of that id (usage); sync/reinject: it is not ejected.
    assert code == (2 if argv[1] == "eject" else 1)
    assert "install it first" in line or "eject it first" in line


def test_a_scenario_naming_a_missing_plugin_is_one_line_naming_it(
    here: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scenario = here / "s.json"
    scenario.write_text(json.dumps({"plugins": ["no-such-plugin"], "steps": []}))
    code, _, err = run(["run", str(scenario)], capsys)
    assert code == 2
    line = one_error_line(err, "'no-such-plugin'")
    assert line.startswith("agentplug run: error: ") and "pip install it" in line


@pytest.mark.parametrize("command", ["hooks", "plugins", "doctor", "actions-list"])
def test_a_config_naming_a_plugin_that_is_not_installed_is_no_error(
    command: str, here: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (here / "agentplug.json").write_text(
        json.dumps({"plugins": {"entries": {"no-such-plugin": {"enabled": True}}}})
    )
    code, out, err = run(CONFIGURED[command], capsys)
    assert code == 0 and "Traceback" not in out + err
    if command == "doctor":
        one_error_line(out, "note: plugins.entries.no-such-plugin", "no such plugin")


def test_agentplug_alone_prints_the_help_and_version_prints_the_version() -> None:
    env = {**os.environ, "AGENTPLUG_CONFIG": ""}
    alone = subprocess.run(
        [sys.executable, "-m", "agentplug.cli"], capture_output=True, text=True, env=env
    )
    assert alone.returncode == 0 and alone.stderr == ""
    assert alone.stdout.startswith("usage: agentplug") and "plugin" in alone.stdout
    version = subprocess.run(
        [sys.executable, "-m", "agentplug.cli", "--version"], capture_output=True, text=True
    )
    from agentplug import __version__

    assert version.returncode == 0 and version.stdout == f"agentplug {__version__}\n"


def test_a_command_group_without_its_command_is_one_line_listing_the_choices(
    capsys: pytest.CaptureFixture[str],
) -> None:
    for group in (["plugin"], ["approvals"], ["docs"], ["actions"]):
        code, _, err = run(group, capsys)
        assert code == 2
        one_error_line(err, f"agentplug {group[0]}: error: choose a command: ")


def test_an_unknown_command_suggests_the_closest(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(["plugn"], capsys)
    assert code == 2
    one_error_line(err, "unknown command 'plugn'; did you mean 'plugin'?")
