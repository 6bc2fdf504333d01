"""``agentplug chat``: a real subprocess fed on stdin (scripted provider, installed plugins)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import FakeDist

DICER = """
def register(api):
    def ask(event):
        if event.tool_name == "ROLL_DICE":
            return {"require_approval": {"title": "Roll dice?", "description": "roll some dice"}}
        return None

    api.on("before_tool_call", ask)
    api.on("message_sending", lambda event: {"content": event.content + " (checked)"})
"""


def _chat(tmp_path: Path, site: Path, stdin: str, *extra: str) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "replies.json"
    script.write_text(
        json.dumps(
            [
                {"tool_calls": [{"id": "c1", "name": "ROLL_DICE", "arguments": {"sides": 6}}]},
                "You rolled the die.",
            ]
        ),
        encoding="utf-8",
    )
    env = {
        **os.environ,
        "PYTHONPATH": str(site),
        "AGENTPLUG_CACHE_DIR": str(tmp_path / "cache"),
    }
    env.pop("AGENTPLUG_CONFIG", None)
    return subprocess.run(
        [sys.executable, "-m", "agentplug.cli", "chat", "--script", str(script), *extra],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=120,
    )


def test_chat_asks_approvals_at_the_terminal_and_prints_a_compact_trace(
    tmp_path: Path, site_dir: Path, fake_dist: FakeDist
) -> None:
    fake_dist("fakeplug-dicer", "fakeplug_dicer", DICER, {"dicer": "fakeplug_dicer"})
    done = _chat(tmp_path, site_dir, "roll a die for me\no\n/quit\n")
    out = done.stdout
    assert done.returncode == 0, out + done.stderr
    assert "Roll dice?" in out and "-> allow-once" in out
    assert "agent> You rolled the die. (checked)" in out
    assert "before_tool_call: approval_requested_by=dicer" in out
    assert "tool ROLL_DICE: allowed=True, approval=allow-once, approval_requested_by=dicer" in out
    assert "message_sending: changed_by=dicer" in out
    assert "replied in" in out and "2 model call(s)" in out


def test_chat_denied_approval_keeps_the_tool_from_running(
    tmp_path: Path, site_dir: Path, fake_dist: FakeDist
) -> None:
    fake_dist("fakeplug-dicer", "fakeplug_dicer", DICER, {"dicer": "fakeplug_dicer"})
    done = _chat(tmp_path, site_dir, "roll a die\nd\n")
    assert done.returncode == 0, done.stderr
    assert "tool ROLL_DICE: allowed=False, blocked_by=dicer, approval=deny" in done.stdout


def test_chat_json_prints_json_lines(tmp_path: Path, site_dir: Path, fake_dist: FakeDist) -> None:
    fake_dist("fakeplug-dicer", "fakeplug_dicer", DICER, {"dicer": "fakeplug_dicer"})
    done = _chat(tmp_path, site_dir, "roll\nallow-once\n", "--json")
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    hooks = [r["name"] for r in rows if r.get("kind") == "hook"]
    assert (
        hooks.index("before_agent_run") < hooks.index("before_tool_call") < hooks.index("agent_end")
    )
    tool = next(r for r in rows if r.get("kind") == "tool")
    assert tool["decision"]["approval"] == "allow-once"
    turn = rows[-1]["turn"]
    assert turn["status"] == "replied" and turn["reply"] == "You rolled the die. (checked)"


def test_a_decision_at_the_chat_prompt_is_recorded_as_chat(
    tmp_path: Path, site_dir: Path, fake_dist: FakeDist
) -> None:
    fake_dist("fakeplug-dicer", "fakeplug_dicer", DICER, {"dicer": "fakeplug_dicer"})
    done = _chat(tmp_path, site_dir, "roll\nallow-once\n", "--json")
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    tool = next(r for r in rows if r.get("kind") == "tool")
    assert (tool["decision"]["approval"], tool["decision"]["approval_by"]) == ("allow-once", "chat")


def test_chat_without_configuration_echoes_with_the_scripted_provider(tmp_path: Path) -> None:
    env = {**os.environ, "AGENTPLUG_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("AGENTPLUG_CONFIG", None)
    done = subprocess.run(
        [sys.executable, "-m", "agentplug.cli", "chat", "--no-plugins"],
        input="hello\n",
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0 and "agent> You said: hello" in done.stdout


def test_chat_allow_always_grant_is_saved_in_the_configured_state_store(
    tmp_path: Path, site_dir: Path, fake_dist: FakeDist
) -> None:
    from agentplug.services.approvals.grants import list_grants
    from agentplug.store import open_store_url

    fake_dist("fakeplug-dicer", "fakeplug_dicer", DICER, {"dicer": "fakeplug_dicer"})
    url = f"sqlite:///{tmp_path / 'shared.sqlite3'}"
    (tmp_path / "agentplug.json").write_text(json.dumps({"state": {"url": url}}))
    done = _chat(tmp_path, site_dir, "roll a die\na\n/quit\n")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "approval=allow-always" in done.stdout
    store = open_store_url(url)
    try:
        grants = list_grants(store)
    finally:
        store.close()
    assert [(g.plugin_id, g.tool_name) for g in grants] == [("dicer", "ROLL_DICE")]


def test_chat_asks_the_operators_approval_for_an_allowed_side_effecting_action(
    tmp_path: Path,
) -> None:
    config = {"agent": {"tools": {"allow": ["@safe", "LOG_LEVEL"]}}}
    (tmp_path / "agentplug.json").write_text(json.dumps(config))
    script = tmp_path / "log-level.json"
    script.write_text(
        json.dumps(
            [
                {
                    "tool_calls": [
                        {"id": "c1", "name": "LOG_LEVEL", "arguments": {"level": "debug"}}
                    ]
                },
                "I did not change the log level.",
            ]
        ),
        encoding="utf-8",
    )
    env = {**os.environ, "AGENTPLUG_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("AGENTPLUG_CONFIG", None)
    done = subprocess.run(
        [sys.executable, "-m", "agentplug.cli", "chat", "--no-plugins", "--script", str(script)],
        input="be more verbose\nd\n/quit\n",
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Run the action LOG_LEVEL" in done.stdout
    assert "tool LOG_LEVEL: allowed=False, blocked_by=agentplug.tools, approval=deny" in done.stdout
