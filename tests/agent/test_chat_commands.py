"""``agentplug chat`` slash commands and ``agentplug sessions``: real subprocesses fed on
stdin, the sessions in the default state directory of the working folder."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from agentplug.cli.main import main
from agentplug.services.approvals.models import PendingApproval
from agentplug.services.approvals.shared import publish_pending, stored_decision
from agentplug.store import SQLiteStore
from agentplug_hookspecs.tools import ApprovalRequest

from tests.conftest import FakeDist

KEY = "agent:main:chat:terminal"

RESETTER = """
def register(api):
    api.on("before_reset", lambda event: print("BEFORE-RESET", event.session_key, event.source,
                                              flush=True))
"""


def _env(tmp_path: Path, site: Path | None = None) -> dict[str, str]:
    env = {**os.environ, "AGENTPLUG_CACHE_DIR": str(tmp_path / "cache")}
    if site is not None:
        env["PYTHONPATH"] = str(site)
    for name in ("AGENTPLUG_CONFIG", "AGENTPLUG_STATE_DIR", "AGENTPLUG_STATE_URL"):
        env.pop(name, None)
    return env


def _agentplug(
    tmp_path: Path, *args: str, stdin: str = "", site: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agentplug.cli", *args],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=_env(tmp_path, site),
        timeout=120,
    )


def _chat(tmp_path: Path, stdin: str, replies: list[Any], site: Path | None = None) -> str:
    script = tmp_path / "replies.json"
    script.write_text(json.dumps(replies), encoding="utf-8")
    plugins = [] if site is not None else ["--no-plugins"]
    done = _agentplug(tmp_path, "chat", "--script", str(script), *plugins, stdin=stdin, site=site)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def _transcript(tmp_path: Path, key: str = KEY) -> list[dict[str, Any]]:
    done = _agentplug(tmp_path, "sessions", "show", key, "--json")
    assert done.returncode == 0, done.stderr
    messages: list[dict[str, Any]] = json.loads(done.stdout)["messages"]
    return messages


def test_help_lists_the_commands_and_never_reaches_the_model(tmp_path: Path) -> None:
    out = _chat(tmp_path, "/help\nhello\n/quit\n", ["first scripted reply"])
    assert "/reset" in out and "/approve" in out and "/sessions" in out
    assert "agent> first scripted reply" in out  # the model's first call answered "hello"
    assert [m["content"] for m in _transcript(tmp_path)] == ["hello", "first scripted reply"]


def test_an_unknown_command_is_refused_and_not_sent(tmp_path: Path) -> None:
    out = _chat(tmp_path, "/weather paris\n", ["never used"])
    assert "unknown command '/weather'" in out
    done = _agentplug(tmp_path, "sessions", "show", KEY)
    assert done.returncode == 2  # no turn ran: no session


def test_a_double_slash_line_is_sent_as_text_with_one_slash(tmp_path: Path) -> None:
    _chat(tmp_path, "//etc is a folder\n", ["ok"])
    assert _transcript(tmp_path)[0]["content"] == "/etc is a folder"


def test_the_chat_session_persists_into_the_next_chat(tmp_path: Path) -> None:
    _chat(tmp_path, "my name is Ana\n", ["Hello Ana."])
    _chat(tmp_path, "what is my name?\n", ["You are Ana."])
    contents = [m["content"] for m in _transcript(tmp_path)]
    assert contents == ["my name is Ana", "Hello Ana.", "what is my name?", "You are Ana."]


def test_reset_fires_before_reset_and_empties_the_session(
    tmp_path: Path, site_dir: Path, fake_dist: FakeDist
) -> None:
    fake_dist("fakeplug-resetter", "fakeplug_resetter", RESETTER, {"resetter": "fakeplug_resetter"})
    out = _chat(tmp_path, "hello\n/reset\n", ["hi"], site=site_dir)
    assert f"BEFORE-RESET {KEY} command" in out
    assert f"session {KEY} reset" in out
    assert _transcript(tmp_path) == []


def test_new_starts_another_session_and_sessions_lists_both(tmp_path: Path) -> None:
    out = _chat(tmp_path, "first\n/new\nsecond\n/sessions\n", ["one", "two"])
    lines = [line.removeprefix("you> ") for line in out.splitlines()]
    new_key = next(line.split()[2] for line in lines if line.startswith("new session "))
    assert new_key.startswith(f"{KEY}-")
    listed = [line for line in lines if line.startswith(("* ", "  ")) and KEY in line]
    assert any(line.startswith(f"* {new_key}") for line in listed)
    assert any(line.startswith(f"  {KEY} ") for line in listed)
    assert [m["content"] for m in _transcript(tmp_path, new_key)] == ["second", "two"]


def test_approve_answers_an_approval_another_gateway_awaits(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / ".agentplug-state" / "state.sqlite3")
    request = ApprovalRequest(title="Deploy?", description="deploy to prod", plugin_id="ops")
    publish_pending(
        store,
        PendingApproval(id="ap1-abc123", tool_name="deploy", params={}, request=request),
        gateway="other:1",
    )
    store.close()
    out = _chat(tmp_path, "/approve\n/approve ap1-abc123 allow-once\n", [])
    assert "ap1-abc123  tool=deploy  plugin=ops" in out
    assert "approval 'ap1-abc123' ('Deploy?'): allow-once" in out
    store = SQLiteStore(tmp_path / ".agentplug-state" / "state.sqlite3")
    try:
        decided = stored_decision(store, "ap1-abc123")
    finally:
        store.close()
    assert decided is not None
    assert (decided["resolution"], decided["by"]) == ("allow-once", "chat")


def test_approve_with_a_word_that_is_no_decision_says_so(tmp_path: Path) -> None:
    out = _chat(tmp_path, "/approve ap1-x maybe\n", [])
    assert "no pending approval with id 'ap1-x'" in out


# -- agentplug sessions -----------------------------------------------------------------------


def test_sessions_list_without_a_store_creates_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    for name in ("AGENTPLUG_CONFIG", "AGENTPLUG_STATE_DIR", "AGENTPLUG_STATE_URL"):
        monkeypatch.delenv(name, raising=False)
    assert main(["sessions", "list"]) == 0
    assert "no sessions in .agentplug-state" in capsys.readouterr().out
    assert not (tmp_path / ".agentplug-state").exists()


def test_sessions_list_show_and_reset_after_a_chat(tmp_path: Path) -> None:
    _chat(tmp_path, "hello there\n", ["General Kenobi."])
    listed = _agentplug(tmp_path, "sessions", "list")
    assert listed.returncode == 0
    assert KEY in listed.stdout and "2 messages" in listed.stdout
    assert "last: 'hello there'" in listed.stdout
    shown = _agentplug(tmp_path, "sessions", "show", KEY)
    assert shown.stdout.splitlines()[1:] == ["user: hello there", "assistant: General Kenobi."]
    reset = _agentplug(tmp_path, "sessions", "reset", KEY, "--no-plugins")
    assert reset.returncode == 0 and f"session {KEY} reset" in reset.stdout
    assert _transcript(tmp_path) == []


def test_sessions_show_of_an_unknown_key_is_one_line_with_a_did_you_mean(tmp_path: Path) -> None:
    _chat(tmp_path, "hello\n", ["hi"])
    done = _agentplug(tmp_path, "sessions", "show", "agent:main:chat:termnal")
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0
    assert f"did you mean {KEY!r}?" in done.stderr
