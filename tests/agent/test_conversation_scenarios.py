"""Scenario files that script whole conversations: ``agentplug run``, pytest items, the demo."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

# Imported here, before pytester runs an inner session: pytester removes the modules
# that the inner session imported, and the host's service table would keep classes of
# the removed modules (two SessionServices classes for the rest of the run).
import agentplug.services.sessions
import agentplug.testing.conversation  # noqa: F401
import pytest

from tests.test_pytest_plugin import PLUGIN_ARGS

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[2]

GUARD = """
from agentplug import hookimpl

PLUGIN_ID = "guard"


@hookimpl
def before_tool_call(event):
    if event.tool_name == "wipe":
        return {"block": True, "block_reason": "wipe is not allowed"}
    return None


@hookimpl
def message_sending(event):
    return {"content": event.content.replace("secret", "[hidden]")}
"""

CONVERSATION = {
    "plugins": [{"id": "guard", "module": "guard"}],
    "tools": [
        {"name": "lookup", "description": "Look it up", "result": "the answer is 42"},
        {"name": "wipe", "description": "Wipe the disk", "result": "wiped"},
    ],
    "conversation": [
        {
            "name": "a lookup and a refused wipe",
            "inbound": {"content": "find it, then wipe", "sender_id": "u1"},
            "model": [
                {"tool_calls": [{"name": "lookup", "arguments": {}}]},
                {"tool_calls": [{"name": "wipe", "arguments": {}}]},
                "The secret answer is 42.",
            ],
            "expect": {"status": "replied", "reply": "The [hidden] answer is 42."},
            "expect_hooks": [
                "message_received",
                "before_agent_run",
                "before_tool_call",
                "message_sending",
                "agent_end",
            ],
            "expect_decisions": {
                "before_tool_call": [{}, {"blocked": True, "blocked_by": "guard"}]
            },
            "expect_tools": {"wipe": {"allowed": False}, "lookup": {"allowed": True}},
            "expect_transcript": [
                {"role": "user", "content": "find it, then wipe"},
                {"role": "tool", "content": "the answer is 42"},
            ],
            "expect_delivery": {"status": "delivered", "changed_by": ["guard"]},
        },
        {
            "name": "the same session goes on",
            "inbound": {"content": "thanks", "sender_id": "u1"},
            "model": ["You are welcome."],
            "expect": {"reply": "You are welcome."},
            "expect_no_hooks": ["session_start", "before_tool_call"],
        },
    ],
}


def _write(tmp_path: Path, scenario: dict[str, object]) -> Path:
    (tmp_path / "guard.py").write_text(GUARD, encoding="utf-8")
    path = tmp_path / "scenario_chat.json"
    path.write_text(json.dumps(scenario), encoding="utf-8")
    return path


def _agentplug(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "AGENTPLUG_CACHE_DIR": str(cwd / ".cache")}
    return subprocess.run(
        [sys.executable, "-m", "agentplug.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=120,
    )


def test_agentplug_run_checks_every_expectation_of_a_conversation(tmp_path: Path) -> None:
    path = _write(tmp_path, CONVERSATION)
    done = _agentplug("run", str(path), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "expectations: all met (2 turns checked)" in done.stdout
    assert "tool wipe: allowed=False, blocked_by=guard" in done.stdout


def test_agentplug_run_reports_a_missed_conversation_expectation(tmp_path: Path) -> None:
    broken = json.loads(json.dumps(CONVERSATION))
    broken["conversation"][0]["expect"]["reply"] = "something else"
    broken["conversation"][0]["expect_hooks"] = ["message_sending", "before_agent_run"]
    done = _agentplug("run", str(_write(tmp_path, broken)), cwd=tmp_path)
    assert done.returncode == 1
    assert 'turn 1 "a lookup and a refused wipe" (conversation[0])' in done.stdout
    assert "result.reply" in done.stdout and '"something else"' in done.stdout
    assert "hooks[1]" in done.stdout and "not found after the previous match" in done.stdout
    assert "Traceback" not in done.stdout + done.stderr


def test_agentplug_run_json_prints_one_line_per_turn(tmp_path: Path) -> None:
    done = _agentplug("run", str(_write(tmp_path, CONVERSATION)), "--json", cwd=tmp_path)
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert [line.get("turn") for line in lines[:2]] == [1, 2]
    assert lines[0]["reply"] == "The [hidden] answer is 42."
    assert lines[-1] == {"expectations": {"passed": True, "failures": []}}


def test_a_conversation_scenario_file_is_a_pytest_item(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(guard=GUARD)
    pytester.syspathinsert()
    broken = json.loads(json.dumps(CONVERSATION))
    broken["conversation"][1]["expect"] = {"reply": "no"}
    pytester.makefile(
        ".json", scenario_good=json.dumps(CONVERSATION), scenario_bad=json.dumps(broken)
    )
    result = pytester.runpytest(*PLUGIN_ARGS, "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        ['*turn 2 "the same session goes on" (conversation?1?) turn:*', "*result.reply*"]
    )


def test_the_demo_is_a_conversation_governed_by_the_example_plugins(tmp_path: Path) -> None:
    done = _agentplug("run", str(ROOT / "demo" / "scenario.json"), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "expectations: all met (2 turns checked)" in out
    assert (
        "tool web_search: allowed=True, approval=allow-once, approval_requested_by=tool-preflight"
        in out
    )
    assert "tool delete_repository: allowed=False, blocked_by=tool-preflight" in out
    assert "env_dropped=LD_PRELOAD+PATH+HTTPS_PROXY" in out
    assert "[REDACTED:email]" in out and "ana@example.org" not in out.split("=> replied")[1]
    assert "message_sending: cancelled=True, cancelled_by=message-redactor" in out
    audit = [
        json.loads(line)
        for line in (tmp_path / ".agentplug-state" / "demo-audit.jsonl").read_text().splitlines()
    ]
    hooks = [line["hook"] for line in audit]
    assert {
        "message_received",
        "before_tool_call",
        "llm_output",
        "agent_end",
        "message_sent",
    } <= set(hooks)
    assert "ana@example.org" not in json.dumps(audit)


def test_a_turn_can_script_its_own_approval_decisions(tmp_path: Path) -> None:
    search = {"tool_calls": [{"name": "web_search", "arguments": {"query": "q"}}]}
    scenario = {
        "plugins": ["tool-preflight"],
        "approvals": {"web_search": "allow-once"},
        "tools": [{"name": "web_search", "description": "Search", "result": "hits"}],
        "conversation": [
            {
                "inbound": {"content": "search", "sender_id": "u1"},
                "model": [search, "searched"],
                "expect_tools": {"web_search": {"allowed": True, "approval": "allow-once"}},
            },
            {
                "inbound": {"content": "search again", "sender_id": "u1"},
                "approvals": {"web_search": "deny"},
                "model": [search, "not allowed"],
                "expect_tools": {"web_search": {"allowed": False, "approval": "deny"}},
                "expect_transcript": [{"role": "tool", "is_error": True}],
            },
        ],
    }
    done = _agentplug("run", str(_write(tmp_path, scenario)), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
