"""Tool result details: bounded when persisted, stripped for replay, hooks run first."""

from __future__ import annotations

import json
from typing import Any

from agentplug import PluginApi, PluginHost
from agentplug.services.toolresults import (
    DEFAULT_MAX_DETAILS_BYTES,
    HistoryView,
    bound_details,
    persist_tool_result,
    strip_details,
)
from agentplug_hookspecs import FrozenDict, FrozenList


def on(hook: str, fn: Any, **kw: Any) -> Any:
    def register(api: PluginApi) -> None:
        api.on(hook, fn, **kw)

    return register


def tool_message(details: Any) -> dict[str, Any]:
    return {"role": "toolResult", "tool_call_id": "c1", "content": "42 rows", "details": details}


def test_small_details_are_kept_as_they_are() -> None:
    message = tool_message({"rows": 42, "chart": {"kind": "bar"}})
    assert bound_details(message) == message


def test_oversized_details_become_a_compact_summary() -> None:
    details = {"rows": ["x" * 100] * 1000, "meta": {"source": "db"}}
    message = tool_message(details)
    bounded = bound_details(message, max_bytes=1024)
    summary = bounded["details"]
    assert summary["persisted_details_truncated"] is True
    assert summary["keys"] == ["rows", "meta"] and summary["type"] == "object"
    assert summary["original_bytes"] > 1024
    assert len(json.dumps(summary)) < 1024
    assert bounded["content"] == "42 rows"
    assert message["details"] is details  # the input is not modified


def test_the_default_bound_applies() -> None:
    bounded = bound_details(tool_message("y" * (DEFAULT_MAX_DETAILS_BYTES + 1)))
    assert bounded["details"]["persisted_details_truncated"] is True
    assert bounded["details"]["type"] == "string"


def test_non_json_details_are_summarised_too() -> None:
    bounded = bound_details(tool_message({"when": object()}))
    assert bounded["details"]["persisted_details_truncated"] is True
    assert bounded["details"]["not_json"] is True
    json.dumps(bounded)


def test_details_are_stripped_before_replay_and_compaction() -> None:
    messages: list[Any] = [
        {"role": "user", "content": "count rows"},
        tool_message({"secret_ui_state": 1}),
        "a non-mapping item",
    ]
    stripped = strip_details(messages)
    assert stripped[1] == {"role": "toolResult", "tool_call_id": "c1", "content": "42 rows"}
    assert stripped[0] == messages[0] and stripped[2] == "a non-mapping item"
    assert "details" in messages[1]  # inputs untouched


def test_the_history_hooks_receive_is_frozen_and_has_no_details() -> None:
    messages: list[Any] = [{"role": "user", "content": "count rows"}, tool_message({"ui": 1})]
    history = HistoryView()(messages)
    assert type(history) is FrozenList and all(type(m) is FrozenDict for m in history)
    assert history[1] == {"role": "toolResult", "tool_call_id": "c1", "content": "42 rows"}
    assert "details" in messages[1]  # inputs untouched


def test_a_history_view_copies_a_message_once_and_shares_it_after() -> None:
    messages: list[Any] = [{"role": "user", "content": "hi"}]
    view = HistoryView()
    first = view(messages)
    messages.append({"role": "assistant", "content": "hello"})
    second = view(messages)
    assert second[0] is first[0]
    assert second[1] == {"role": "assistant", "content": "hello"}


def test_a_history_view_copies_a_replaced_message_afresh() -> None:
    messages: list[Any] = [{"role": "user", "content": "hi"}]
    view = HistoryView()
    view(messages)
    messages[0] = {"role": "user", "content": "a summary"}
    assert view(messages)[0] == {"role": "user", "content": "a summary"}


def test_persist_runs_both_hooks_before_the_final_bound() -> None:
    host = PluginHost()
    order: list[str] = []

    def grow(event: Any) -> dict[str, Any]:
        order.append("tool_result_persist")
        return {"message": {**event.message, "details": {"blob": "z" * 50_000}}}

    def annotate(event: Any) -> dict[str, Any]:
        order.append("before_message_write")
        # This handler still sees the unbounded details: the bound comes last.
        assert len(event.message["details"]["blob"]) == 50_000
        return {"message": {**event.message, "content": "42 rows (checked)"}}

    host.register(on("tool_result_persist", grow), "grower")
    host.register(on("before_message_write", annotate), "annotator")
    result = persist_tool_result(host, tool_message({"rows": 42}), {"session_key": "s"})
    assert order == ["tool_result_persist", "before_message_write"]
    assert result.message is not None
    assert result.message["content"] == "42 rows (checked)"
    assert result.message["details"]["persisted_details_truncated"] is True
    assert result.changed_by == ["grower", "annotator"]


def test_before_message_write_can_block_the_write() -> None:
    host = PluginHost()
    host.register(on("before_message_write", lambda: {"block": True}), "blocker")
    result = persist_tool_result(host, tool_message({"rows": 1}))
    assert result.blocked and result.message is None and result.blocked_by == "blocker"


def test_async_handlers_on_the_sync_hooks_are_ignored() -> None:
    host = PluginHost()

    async def rewrite(event: Any) -> dict[str, Any]:
        return {"message": {"content": "async rewrite"}}

    host.register(on("tool_result_persist", rewrite), "async-plugin")
    result = persist_tool_result(host, tool_message(None))
    assert result.message is not None and result.message["content"] == "42 rows"


def test_a_failing_persist_handler_is_skipped() -> None:
    host = PluginHost()

    def broken() -> None:
        raise ValueError("nope")

    host.register(on("tool_result_persist", broken, priority=10), "broken")
    host.register(on("tool_result_persist", lambda e: {"message": {**e.message, "n": 1}}), "ok")
    result = persist_tool_result(host, tool_message({}))
    assert result.message is not None and result.message["n"] == 1
