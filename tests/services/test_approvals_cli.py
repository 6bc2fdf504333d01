"""``agentplug approvals list|revoke`` against a real state store (real subprocesses)."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

from agentplug.cli.approvals import add_approvals_commands, state_dir
from agentplug.services.approvals import ApprovalBroker, PendingApproval, ProgrammaticResolver
from agentplug.store import SQLiteStore
from agentplug_hookspecs.tools import ApprovalRequest


def cli(
    *args: str, env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    full_env = {k: v for k, v in os.environ.items() if k != "AGENTPLUG_STATE_DIR"}
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "agentplug.cli.approvals", *args],
        capture_output=True,
        text=True,
        env=full_env,
        cwd=cwd,
        timeout=60,
    )


def grant(state: Path, title: str = "Run web search", plugin: str = "preflight") -> str:
    """Create a real allow-always grant through the broker (a person answering)."""
    store = SQLiteStore(state / "state.sqlite3")
    resolver = ProgrammaticResolver()
    resolver.on_pending = lambda p: resolver.resolve(p.id, "allow-always")
    broker = ApprovalBroker(resolver, store=store)
    request = ApprovalRequest(title=title, description="d", plugin_id=plugin)
    verdict = asyncio.run(broker.request("web_search", {}, request))
    store.close()
    assert verdict.grant_id is not None
    return verdict.grant_id


def test_approvals_list_on_a_missing_state_dir_is_empty_and_creates_nothing(
    tmp_path: Path,
) -> None:
    state = tmp_path / "nothing-here"
    result = cli("approvals", "list", "--state-dir", str(state))
    assert result.returncode == 0, result.stderr
    assert "no standing approval grants" in result.stdout
    assert not state.exists()
    as_json = cli("approvals", "list", "--state-dir", str(state), "--json")
    assert json.loads(as_json.stdout) == []


def test_approvals_list_shows_grants_as_text_and_json(tmp_path: Path) -> None:
    grant_id = grant(tmp_path)
    text = cli("approvals", "list", "--state-dir", str(tmp_path))
    assert text.returncode == 0, text.stderr
    assert grant_id in text.stdout
    assert "plugin=preflight" in text.stdout and "tool=web_search" in text.stdout
    rows = json.loads(cli("approvals", "list", "--state-dir", str(tmp_path), "--json").stdout)
    assert [(r["grant_id"], r["plugin_id"], r["title"]) for r in rows] == [
        (grant_id, "preflight", "Run web search")
    ]


def test_approvals_revoke_removes_the_grant_and_the_request_asks_again(tmp_path: Path) -> None:
    grant_id = grant(tmp_path)
    result = cli("approvals", "revoke", grant_id, "--state-dir", str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert f"revoked {grant_id}" in result.stdout
    listed = cli("approvals", "list", "--state-dir", str(tmp_path), "--json")
    assert json.loads(listed.stdout) == []

    store = SQLiteStore(tmp_path / "state.sqlite3")
    asked: list[str] = []
    resolver = ProgrammaticResolver()

    def person(p: PendingApproval) -> None:
        asked.append(p.id)
        resolver.resolve(p.id, "deny")

    resolver.on_pending = person
    broker = ApprovalBroker(resolver, store=store)
    request = ApprovalRequest(title="Run web search", description="d", plugin_id="preflight")
    verdict = asyncio.run(broker.request("web_search", {}, request))
    store.close()
    assert (verdict.allowed, len(asked)) == (False, 1)


def test_approvals_revoke_of_an_unknown_grant_fails_with_a_clear_message(tmp_path: Path) -> None:
    grant(tmp_path)
    result = cli("approvals", "revoke", "grant-doesnotexist", "--state-dir", str(tmp_path))
    assert result.returncode == 1
    assert "no grant 'grant-doesnotexist'" in result.stderr
    assert "agentplug approvals list" in result.stderr
    missing = cli("approvals", "revoke", "grant-x", "--state-dir", str(tmp_path / "none"))
    assert missing.returncode == 1 and "no state store" in missing.stderr


def test_the_state_dir_comes_from_the_flag_then_the_env_then_the_default(tmp_path: Path) -> None:
    env_dir = tmp_path / "from-env"
    grant_id = grant(env_dir)
    via_env = cli("approvals", "list", "--json", env={"AGENTPLUG_STATE_DIR": str(env_dir)})
    assert [r["grant_id"] for r in json.loads(via_env.stdout)] == [grant_id]
    flag_wins = cli(
        "approvals",
        "list",
        "--json",
        "--state-dir",
        str(tmp_path / "other"),
        env={"AGENTPLUG_STATE_DIR": str(env_dir)},
    )
    assert json.loads(flag_wins.stdout) == []
    default_id = grant(tmp_path / ".agentplug-state", title="default dir")
    via_default = cli("approvals", "list", "--json", cwd=tmp_path)
    assert [r["grant_id"] for r in json.loads(via_default.stdout)] == [default_id]
    assert state_dir("x") == Path("x")


def test_add_approvals_commands_sets_func_returning_an_exit_code(tmp_path: Path) -> None:
    parser = argparse.ArgumentParser(prog="agentplug")
    add_approvals_commands(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["approvals", "list", "--state-dir", str(tmp_path), "--json"])
    assert args.func(args) == 0
    args = parser.parse_args(["approvals", "revoke", "nope", "--state-dir", str(tmp_path)])
    assert args.func(args) == 1
