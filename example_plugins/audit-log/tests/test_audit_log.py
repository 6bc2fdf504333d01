"""audit-log, exercised through a real PluginHost loading its entry point."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from agentplug import HookKind, PluginHost
from agentplug.dispatch import DispatchResult, HandlerStatus
from agentplug_audit_log import CONVERSATION_HOOKS, DECISION_HOOKS, LOW_PRIORITY, OBSERVATION_HOOKS
from agentplug_hookspecs import builtin_declarations

PLUGIN_ID = "audit-log"
SECRET = "sk-live-do-not-log-me-0123456789"


def make_host(path: Path | None, conversation: bool = False, **config: Any) -> PluginHost:
    if path is not None:
        config["path"] = str(path)
    entry = {"config": config, "hooks": {"allow_conversation_access": conversation}}
    host = PluginHost({"plugins": {"allow": [PLUGIN_ID], "entries": {PLUGIN_ID: entry}}})
    host.load_installed()
    assert host.load_errors == []
    return host


def dispatch(host: PluginHost, hook: str, event: dict[str, Any], **ctx: Any) -> DispatchResult[Any]:
    return asyncio.run(host.dispatch(hook, event, ctx))


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_it_observes_every_observation_hook_of_the_catalogue(tmp_path: Path) -> None:
    host = make_host(tmp_path / "audit.jsonl", conversation=True)
    catalogue = {
        name
        for name, decl in builtin_declarations().items()
        if decl.kind is HookKind.OBSERVE and decl.deprecation is None
    }
    assert set(OBSERVATION_HOOKS) == catalogue
    (record,) = host.plugins
    assert set(record.hooks) == catalogue | set(DECISION_HOOKS)


def test_each_call_appends_one_json_line_with_time_hook_and_ids(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    host = make_host(path)
    for n in range(3):
        dispatch(host, "message_received", {"content": "hi", "message_id": f"m{n}"}, run_id="r1")
    entries = lines(path)
    assert [e["hook"] for e in entries] == ["message_received"] * 3
    assert [e["event"]["message_id"] for e in entries] == ["m0", "m1", "m2"]
    assert all(e["run_id"] == "r1" and e["ts"].endswith("+00:00") for e in entries)


def test_message_bodies_are_recorded_as_lengths_only(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    host = make_host(path)
    content = f"my key is {SECRET}"
    dispatch(host, "message_received", {"content": content, "sender_id": "u-7"})
    dispatch(host, "message_sent", {"content": content, "to": "ana@example.org"})
    text = path.read_text(encoding="utf-8")
    assert SECRET not in text and "ana@example.org" not in text
    received, sent = lines(path)
    assert received["event"]["content"] == {"chars": len(content)}
    assert received["event"]["sender_id"] == "u-7"
    assert sent["event"]["to"] == {"chars": len("ana@example.org")}


def test_metadata_and_params_are_counted_not_copied(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    host = make_host(path)
    dispatch(host, "after_tool_call", {"tool_name": "exec", "params": {"token": SECRET}})
    (entry,) = lines(path)
    assert entry["event"]["tool_name"] == "exec"
    assert entry["event"]["params"] == {"keys": 1}
    assert SECRET not in path.read_text(encoding="utf-8")


def test_a_pairing_code_is_never_written(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    host = make_host(path)
    dispatch(host, "channel_pairing_requested", {"channel": "sms", "sender_id": "s", "code": "93"})
    (entry,) = lines(path)
    assert entry["event"]["code"] == {"chars": 2}


def test_typed_nested_models_are_summarized_field_by_field(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    host = make_host(path)
    error = "auth failed: " + SECRET
    job = {"id": "nightly", "state": {"last_run_status": "error", "last_error": error}}
    dispatch(host, "cron_changed", {"reason": "finished", "job": job})
    (entry,) = lines(path)
    assert entry["event"]["job"]["id"] == "nightly"
    assert entry["event"]["job"]["state"]["last_run_status"] == "error"
    assert entry["event"]["job"]["state"]["last_error"] == {"chars": len(error)}


def test_agent_end_is_recorded_only_with_conversation_access(tmp_path: Path) -> None:
    denied, allowed = tmp_path / "denied.jsonl", tmp_path / "allowed.jsonl"
    event = {"messages": [{"role": "user", "content": SECRET}], "success": True, "run_id": "r9"}
    result = dispatch(make_host(denied), "agent_end", event)
    assert HandlerStatus.OK not in [h.status for h in result.handlers]
    assert not denied.exists()
    dispatch(make_host(allowed, conversation=True), "agent_end", event)
    (entry,) = lines(allowed)
    assert entry["event"]["messages"] == {"items": 1}
    assert (entry["run_id"], entry["event"]["success"]) == ("r9", True)


def test_conversation_hooks_can_be_left_out_without_gate_warnings(tmp_path: Path) -> None:
    host = make_host(tmp_path / "audit.jsonl", conversation_hooks=False)
    (record,) = host.plugins
    assert CONVERSATION_HOOKS.isdisjoint(record.hooks)
    assert record.warnings == []


def test_decision_hooks_are_recorded_last_without_deciding(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    host = make_host(path)
    assert [h.priority for h in host.plan("before_tool_call")] == [LOW_PRIORITY]
    result = dispatch(host, "before_tool_call", {"tool_name": "web_search", "params": {"q": "x"}})
    assert (result.outcome.blocked, result.outcome.approval) == (False, None)
    assert result.outcome.params == {"q": "x"}
    (entry,) = lines(path)
    assert (entry["hook"], entry["event"]["tool_name"]) == ("before_tool_call", "web_search")


def test_decision_hooks_can_be_left_out(tmp_path: Path) -> None:
    host = make_host(tmp_path / "audit.jsonl", decision_hooks=False)
    assert host.plan("before_tool_call") == ()


def test_an_unwritable_audit_file_never_blocks_a_tool_call(tmp_path: Path) -> None:
    host = make_host(tmp_path)  # a directory: every write fails
    result = dispatch(host, "before_tool_call", {"tool_name": "exec"})
    assert [h.status for h in result.handlers] == [HandlerStatus.OK]
    assert not result.outcome.blocked


def test_the_default_file_is_in_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    host = make_host(None)
    dispatch(host, "session_start", {"session_key": "agent:main", "reason": "new"})
    (entry,) = lines(tmp_path / "agentplug-audit.jsonl")
    assert (entry["hook"], entry["session_key"], entry["event"]["reason"]) == (
        "session_start",
        "agent:main",
        "new",
    )
