"""One default state location, chosen by one rule (``agentplug.store.location``) and said
the same way by every command (issue 28 item 4).

The ``agentplug`` commands run in a fresh folder, no config, no state environment (in
this process: the rule spans no process; ``tests/store/test_state_commands.py`` runs
the commands as subprocesses).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from agentplug import Gateway
from agentplug.cli.main import main
from agentplug.config.model import AgentplugConfig
from agentplug.store import MemoryStore, SQLiteStore
from agentplug.store.location import DEFAULT_STATE_DIR, state_location

DEFAULT_LINE = (
    "state: sqlite:///.agentplug-state/state.sqlite3 (the default: .agentplug-state in the "
    "current folder; not created yet)"
)
CLEAN = ("AGENTPLUG_STATE_URL", "AGENTPLUG_STATE_DIR", "AGENTPLUG_CONFIG")


@dataclass
class Done:
    returncode: int
    stdout: str
    stderr: str


@pytest.fixture
def cli(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> Callable[..., Done]:
    for name in CLEAN:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AGENTPLUG_DISABLE_PLUGINS", "1")  # the examples are not the subject
    monkeypatch.chdir(tmp_path)

    def run(*args: str) -> Done:
        code = main(list(args))
        out = capsys.readouterr()
        return Done(code, out.out, out.err)

    return run


@pytest.mark.parametrize(
    "command",
    [
        ["doctor"],
        ["state", "check"],
        ["approvals", "list"],
        ["approvals", "pending"],
    ],
    ids=" ".join,
)
def test_every_command_says_the_same_default_state_line_in_a_fresh_folder(
    command: list[str], tmp_path: Path, cli: Callable[..., Done]
) -> None:
    done = cli(*command)
    assert done.returncode == 0, done.stdout + done.stderr
    assert DEFAULT_LINE in done.stdout, done.stdout
    assert not (tmp_path / DEFAULT_STATE_DIR).exists()  # looking creates nothing


def test_state_check_on_the_defaults_of_a_fresh_folder_is_no_error(
    cli: Callable[..., Done],
) -> None:
    done = cli("state", "check", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert (report["created"], report["source"]) == (False, "default")
    assert report["url"] == "sqlite:///.agentplug-state/state.sqlite3"


def test_what_one_command_writes_in_the_default_folder_the_others_find(
    tmp_path: Path, cli: Callable[..., Done]
) -> None:
    migrated = cli("state", "migrate")
    assert migrated.returncode == 0, migrated.stderr
    assert (tmp_path / DEFAULT_STATE_DIR / "state.sqlite3").exists()
    checked = cli("state", "check")
    assert checked.returncode == 0 and "reachable: yes" in checked.stdout
    doctor = cli("doctor")
    line = "state: sqlite:///.agentplug-state/state.sqlite3 (the default: .agentplug-state"
    assert any(row.startswith(line) and "reachable" in row for row in doctor.stdout.splitlines())


def test_the_folder_comes_from_the_flag_then_the_env_then_the_config_then_the_default() -> None:
    config = AgentplugConfig.parse({"runtime": {"state_dir": "from-config"}})
    env = {"AGENTPLUG_STATE_DIR": "from-env"}
    pick = state_location  # the one rule
    kw = {"default_dir": DEFAULT_STATE_DIR}
    assert pick(config, state_dir="flag", environ=env, **kw).state_dir == Path("flag")
    assert pick(config, environ=env, **kw).state_dir == Path("from-env")
    assert pick(config, environ={}, **kw).state_dir == Path("from-config")
    assert pick(AgentplugConfig(), environ={}, **kw).state_dir == Path(DEFAULT_STATE_DIR)
    assert pick(AgentplugConfig(), environ={}).url == "memory:"  # code: no default folder


def test_a_state_url_wins_over_the_folder_and_the_flag_over_the_env_and_config() -> None:
    config = AgentplugConfig.parse({"state": {"url": "sqlite:///c.sqlite3"}})
    env = {"AGENTPLUG_STATE_URL": "sqlite:///e.sqlite3"}
    assert state_location(config, url="sqlite:///f.sqlite3", environ=env).url.endswith("f.sqlite3")
    assert state_location(config, environ=env).source == "$AGENTPLUG_STATE_URL"
    assert state_location(config, environ={}, state_dir="d").source == "state.url"


def test_a_gateway_built_in_code_keeps_state_in_memory_unless_a_folder_is_chosen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in CLEAN:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    gateway = Gateway()
    assert isinstance(gateway.store, MemoryStore) and gateway.state_dir is None
    assert not (tmp_path / DEFAULT_STATE_DIR).exists()
    monkeypatch.setenv("AGENTPLUG_STATE_DIR", str(tmp_path / "env-state"))
    from_env = Gateway()
    try:
        assert isinstance(from_env.store, SQLiteStore)
        assert from_env.state_dir == tmp_path / "env-state"
        assert from_env.state_location.describe() == (
            f"state: sqlite:///{tmp_path / 'env-state' / 'state.sqlite3'} "
            "(from $AGENTPLUG_STATE_DIR)"
        )
    finally:
        from_env.store.close()
