"""Streaming: ``runner.stream`` events, the ``openai`` provider's server-sent events, and
the rule that streamed text never gets past a delivery hook (agentplug.agent.streaming).

Each rule is checked offline (the scripted provider streams word by word) and, where the
wire matters, against the OpenAI-compatible protocol server on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from agentplug.agent import ModelDelta, ModelRequest, ModelResponse
from agentplug.agent.streaming import (
    DELIVERY_HOOKS,
    FinalReply,
    StreamEvent,
    TextDelta,
    ToolCallRequested,
    ToolDecision,
    ToolResult,
    UsageUpdate,
)
from agentplug.core.redaction import forget_secret, register_secret

from tests.agent.chat_server import ChatServer, Stream, chat_server, text_chunks
from tests.agent.conftest import Recorder, make_runner, on, run, tool_call


@pytest.fixture
def server() -> Iterator[ChatServer]:
    with chat_server() as srv:
        yield srv


def _openai(server: ChatServer, **agent: Any) -> Any:
    settings = {
        "model": "openai/test-model",
        "providers": {"openai": {"base_url": server.base_url}},
        "retry": {"attempts": 1},
        **agent,
    }
    runner, _ = make_runner(agent=settings)
    return runner


async def _events(runner: Any, text: str = "hi", **kwargs: Any) -> list[StreamEvent]:
    return [event async for event in runner.stream(text, session_key="s1", **kwargs)]


def _text(events: list[StreamEvent]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


def _final(events: list[StreamEvent]) -> FinalReply:
    last = events[-1]
    assert isinstance(last, FinalReply)
    return last


# -- the events --------------------------------------------------------------------------


def test_stream_yields_the_reply_text_in_deltas_then_the_final_reply_last() -> None:
    runner, _ = make_runner(["a streamed reply"])
    events = run(_events(runner))
    deltas = [e for e in events if isinstance(e, TextDelta)]
    assert [d.text for d in deltas] == ["a ", "streamed ", "reply"]
    assert all(d.kind == "preview" and d.step == 1 for d in deltas)
    final = _final(events)
    assert final.reply == "a streamed reply" and final.status == "replied"
    assert sum(isinstance(e, FinalReply) for e in events) == 1


def test_stream_reports_tool_calls_decisions_and_results_in_call_order() -> None:
    both = {"text": "", "tool_calls": [
        {"id": "c1", "name": "echo", "arguments": {"x": "one"}},
        {"id": "c2", "name": "nope", "arguments": {}},
    ]}  # fmt: skip
    runner, _ = make_runner([both, "done"])
    runner.tools.add_python(lambda x: f"got {x}", name="echo", description="Echo x.")
    events = run(_events(runner))
    kinds = [(type(e).__name__, getattr(e, "call_id", None)) for e in events]
    requested = [e for e in events if isinstance(e, ToolCallRequested)]
    decisions = [e for e in events if isinstance(e, ToolDecision)]
    results = [e for e in events if isinstance(e, ToolResult)]
    assert [e.call_id for e in requested] == ["c1", "c2"] and requested[0].arguments == {"x": "one"}
    assert [(d.call_id, d.allowed) for d in decisions] == [("c1", True), ("c2", False)]
    assert "unknown tool 'nope'" in (decisions[1].reason or "")
    assert (results[0].call_id, results[0].content, results[0].is_error) == ("c1", "got one", False)
    assert results[1].call_id == "c2" and results[1].is_error
    assert kinds.index(("ToolDecision", "c2")) < kinds.index(("ToolResult", "c1"))
    assert _final(events).reply == "done"


def test_stream_reports_each_model_calls_usage_and_the_running_total() -> None:
    runner, provider = make_runner([tool_call("echo", {"x": 1}), "done"])
    provider.usage = {"prompt_tokens": 10, "completion_tokens": 3}
    runner.tools.add_python(lambda x: "ok", name="echo", description="Echo x.")
    events = run(_events(runner))
    usage = [e for e in events if isinstance(e, UsageUpdate)]
    assert [u.call.total_tokens for u in usage] == [13, 13]
    assert [u.turn.total_tokens for u in usage] == [13, 26]
    assert _final(events).result.usage.total_tokens == 26


class PartialThenStall:
    """Streams one delta, then never finishes."""

    name = "stall"

    async def complete(self, request: ModelRequest) -> ModelResponse:
        raise AssertionError("streamed only")

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelDelta | ModelResponse]:
        yield ModelDelta("partial ")
        await asyncio.Event().wait()
        yield ModelResponse()  # pragma: no cover


QUIET = tuple(h for h in Recorder().hooks if h not in DELIVERY_HOOKS)
"""The turn hooks but the delivery ones (a recorder of those would turn previews into
blocks)."""


def test_closing_the_stream_early_cancels_the_turn_and_still_ends_it() -> None:
    recorder = Recorder(QUIET)
    runner, _ = make_runner(recorder=recorder, agent={"model": "stall/m"})
    runner.providers.register("stall", PartialThenStall())

    async def go() -> list[StreamEvent]:
        seen: list[StreamEvent] = []
        async with contextlib.aclosing(runner.stream("hi", session_key="s1")) as events:
            async for event in events:
                seen.append(event)
                break
        return seen

    (first,) = run(go())
    assert isinstance(first, TextDelta) and first.text == "partial "
    (ended,) = recorder.events("agent_end")
    assert ended.success is False and "stream closed" in (ended.error or "")
    (call,) = recorder.events("model_call_ended")
    assert call.outcome == "cancelled"


def test_run_turn_takes_an_on_event_listener_too() -> None:
    seen: list[StreamEvent] = []
    runner, _ = make_runner(["hello world"])
    result = run(runner.run_turn("hi", session_key="s1", on_event=seen.append))
    assert _text(seen) == "hello world" == result.reply
    assert not any(isinstance(e, FinalReply) for e in seen)  # the result is returned


# -- the openai provider streams ---------------------------------------------------------


def test_the_openai_provider_streams_server_sent_events_as_deltas(server: ChatServer) -> None:
    server.stream_reply(
        "Streaming from the server!", usage={"prompt_tokens": 9, "completion_tokens": 5}
    )
    events = run(_events(_openai(server)))
    deltas = [e.text for e in events if isinstance(e, TextDelta)]
    assert len(deltas) > 3 and "".join(deltas) == "Streaming from the server!"
    body = server.requests[0]["body"]
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    result = _final(events).result
    assert result.reply == "Streaming from the server!"
    assert result.usage.input_tokens == 9 and result.usage.output_tokens == 5
    assert not result.usage.estimated


def test_streamed_tool_call_fragments_are_assembled_into_whole_calls(server: ChatServer) -> None:
    server.strict = True
    server.stream_tool_calls(("echo", {"x": "first value"}), ("echo", {"x": "second one"}))
    server.stream_reply("done")
    runner = _openai(server)
    seen: list[str] = []
    runner.tools.add_python(lambda x: seen.append(x) or f"got {x}", name="echo", description="E.")
    events = run(_events(runner))
    assert sorted(seen) == ["first value", "second one"]
    requested = [e for e in events if isinstance(e, ToolCallRequested)]
    assert [(e.call_id, e.arguments) for e in requested] == [
        ("call_s0", {"x": "first value"}),
        ("call_s1", {"x": "second one"}),
    ]
    tool_messages = [m for m in server.requests[1]["body"]["messages"] if m["role"] == "tool"]
    assert [m["content"] for m in tool_messages] == ["got first value", "got second one"]
    assert _final(events).reply == "done"


def test_a_server_answering_json_to_a_stream_request_is_read_whole(server: ChatServer) -> None:
    server.reply("plain body")
    events = run(_events(_openai(server)))
    assert _text(events) == "plain body" == _final(events).reply


def test_a_stream_cut_short_by_the_server_fails_the_call_as_a_dropped_connection(
    server: ChatServer,
) -> None:
    server.raw(200, Stream(tuple(text_chunks("never finis")), done=False))
    events = run(_events(_openai(server)))
    result = _final(events).result
    assert result.status == "failed"
    assert "ended before the response was complete" in (result.error or "")


def test_an_error_chunk_mid_stream_fails_the_call_with_the_servers_message(
    server: ChatServer,
) -> None:
    events = (*text_chunks("partial"), {"error": {"message": "overloaded, try later"}})
    server.raw(200, Stream(events))
    result = _final(run(_events(_openai(server)))).result
    assert result.status == "failed" and "overloaded, try later" in (result.error or "")
    assert "mid-stream" in (result.error or "")


def test_a_streamed_body_is_never_read_past_model_response_bytes(server: ChatServer) -> None:
    server.stream_reply("x" * 40_000, size=100)
    runner = _openai(server, limits={"model_response_bytes": 4096})
    result = _final(run(_events(runner))).result
    assert result.status == "failed"
    assert "over 4096 bytes (agent.limits.model_response_bytes)" in (result.error or "")


def test_a_dripping_stream_cannot_outlive_the_providers_timeout(server: ChatServer) -> None:
    server.raw(200, Stream(tuple(text_chunks("slow " * 50)), interval=0.2))
    runner = _openai(server, providers={"openai": {"base_url": server.base_url, "timeout_s": 0.5}})
    result = _final(run(_events(runner))).result
    assert result.status == "failed"
    assert "did not complete within 0.5 s (agent.providers.openai.timeout_s" in (result.error or "")


def test_streamed_tool_calls_past_the_limit_are_counted_not_built(server: ChatServer) -> None:
    calls = [("echo", {"x": str(i)}) for i in range(5)]
    server.stream_tool_calls(*calls)
    server.stream_reply("done")
    runner = _openai(server, limits={"tool_calls_per_response": 2})
    ran: list[str] = []
    runner.tools.add_python(lambda x: ran.append(x) or "ok", name="echo", description="E.")
    result = _final(run(_events(runner))).result
    assert sorted(ran) == ["0", "1"]
    note = [m for m in result.transcript if m.get("role") == "tool"][-1]["content"]
    assert "3 more tool call(s) of this response were dropped" in note


def test_hostile_stream_chunks_are_one_line_malformed_errors(server: ChatServer) -> None:
    for bad in ("not json", [1, 2], {"choices": [{"delta": {"content": 5}}]},
                {"choices": [{"delta": {"tool_calls": [{"index": -1}]}}]}):  # fmt: skip
        server.raw(200, Stream((bad,)))
        result = _final(run(_events(_openai(server)))).result
        assert result.status == "failed" and "malformed streamed chunk" in (result.error or "")
        assert "\n" not in (result.error or "")


# -- deltas never bypass a delivery hook --------------------------------------------------


def _cancel_secret_plan(event: Any, ctx: Any) -> dict[str, Any] | None:
    return {"cancel": True} if "secret plan" in event.content else None


def _rewrite_paris(event: Any, ctx: Any) -> dict[str, Any]:
    return {"content": event.content.replace("Paris", "[city]")}


LONG = (
    "Here is the first paragraph of a long answer, written to cross a block boundary. "
    "It goes on for a while with nothing in it that any plugin would object to at all, "
    "so that the first block of the streamed reply can be let out before the rest. "
    "The secret plan is to meet in Paris at noon, and nobody else may know about it. "
    "A last sentence closes the answer so that the stream goes on for a while longer."
)


def test_deltas_are_previews_only_when_no_delivery_hook_is_loaded() -> None:
    runner, _ = make_runner([LONG])
    assert {e.kind for e in run(_events(runner)) if isinstance(e, TextDelta)} == {"preview"}
    guarded, _ = make_runner([LONG], plugins={"noop": on("message_sending", lambda e, c: None)})
    assert {e.kind for e in run(_events(guarded)) if isinstance(e, TextDelta)} == {"block"}


@pytest.mark.parametrize("hook", ["message_sending", "reply_payload_sending"])
def test_a_delivery_hook_that_cancels_is_never_bypassed_by_streamed_text(hook: str) -> None:
    def cancel(event: Any, ctx: Any) -> dict[str, Any] | None:
        text = event.content if hook == "message_sending" else event.payload.text or ""
        return {"cancel": True} if "secret plan" in text else None

    runner, _ = make_runner([LONG], plugins={"guard": on(hook, cancel)})
    events = run(_events(runner))
    assert "secret plan" not in _text(events)
    assert _text(events)  # the part before the cancelled block was allowed out
    final = _final(events)
    assert final.status == "suppressed" and final.reply is None


def test_a_rewriting_delivery_hook_is_never_bypassed_by_streamed_text() -> None:
    runner, _ = make_runner([LONG], plugins={"rewrite": on("message_sending", _rewrite_paris)})
    events = run(_events(runner))
    released = _text(events)
    assert "Paris" not in released and "[city]" in released
    assert _final(events).reply == LONG.replace("Paris", "[city]") == released


def test_a_rewrite_that_changes_released_text_stops_the_release_until_the_final_reply() -> None:
    def sign(event: Any, ctx: Any) -> dict[str, Any]:
        return {"content": event.content + "\n-- the bot"}

    runner, _ = make_runner([LONG], plugins={"sign": on("message_sending", sign)})
    events = run(_events(runner))
    blocks = [e.text for e in events if isinstance(e, TextDelta)]
    assert len(blocks) == 1  # the first block went out signed; the second diverged
    assert _final(events).reply == LONG + "\n-- the bot"


def test_on_delta_never_receives_text_a_delivery_hook_cancels() -> None:
    seen: list[str] = []
    runner, _ = make_runner(
        [LONG], plugins={"guard": on("message_sending", _cancel_secret_plan)}, on_delta=seen.append
    )
    result = run(runner.run_turn("hi", session_key="s1"))
    assert result.status == "suppressed" and "secret plan" not in "".join(seen)


def test_final_mode_releases_no_text_before_the_final_reply() -> None:
    runner, _ = make_runner([LONG], agent={"stream": {"deltas": "final"}})
    events = run(_events(runner))
    assert not any(isinstance(e, TextDelta) for e in events)
    assert _final(events).reply == LONG


def test_streamed_blocks_are_marked_for_the_delivery_hooks() -> None:
    recorder = Recorder(("message_sending", "reply_payload_sending"))
    runner, _ = make_runner([LONG], recorder=recorder)
    run(_events(runner))  # the recorder implements both hooks: blocks
    sending = recorder.events("message_sending")
    assert [e.metadata.get("stream", {}).get("partial") for e in sending[:-1]] == [True] * (
        len(sending) - 2
    ) + [False]
    assert sending[-1].metadata == {} and sending[-1].content == LONG
    payloads = recorder.events("reply_payload_sending")
    assert payloads[0].payload.delivery == {"stream": {"step": 1, "block": 1, "partial": True}}


def test_a_cancel_or_rewrite_is_never_bypassed_against_the_protocol_server(
    server: ChatServer,
) -> None:
    settings = {"model": "openai/test-model", "retry": {"attempts": 1},
                "providers": {"openai": {"base_url": server.base_url}}}  # fmt: skip
    server.stream_reply(LONG, size=3)
    cancelling, _ = make_runner(
        agent=settings, plugins={"guard": on("message_sending", _cancel_secret_plan)}
    )
    events = run(_events(cancelling))
    assert "secret plan" not in _text(events) and _final(events).status == "suppressed"
    server.stream_reply(LONG, size=3)
    rewriting, _ = make_runner(
        agent=settings, plugins={"rewrite": on("message_sending", _rewrite_paris)}
    )
    events = run(_events(rewriting))
    assert "Paris" not in _text(events) and "[city]" in _text(events)
    assert _final(events).reply == LONG.replace("Paris", "[city]")


def test_a_secret_split_across_streamed_chunks_is_never_released(server: ChatServer) -> None:
    secret = "sk-live-4f9a8b7c6d5e"
    register_secret(secret)
    try:
        server.stream_reply(f"the key is {secret} and that is all", size=3)
        events = run(_events(_openai(server)))
        released = _text(events)
        assert "4f9a" not in released and "sk-live" not in released
        assert released == "the key is *** and that is all" == _final(events).reply
    finally:
        forget_secret(secret)


def test_previews_stop_at_the_reply_limit() -> None:
    runner, _ = make_runner(["word " * 100], agent={"limits": {"reply_chars": 42}})
    assert len(_text(run(_events(runner)))) == 42


def test_a_retry_after_text_was_released_is_announced_before_the_new_preview(
    server: ChatServer,
) -> None:
    server.raw(200, Stream((*text_chunks("first try"),), done=False))
    server.stream_reply("second try")
    runner = _openai(server, retry={"attempts": 2, "initial_backoff_s": 0, "max_backoff_s": 0})
    events = run(_events(runner))
    names = [type(e).__name__ for e in events]
    assert names.index("ModelRetry") < max(
        i for i, e in enumerate(events) if isinstance(e, TextDelta)
    )
    assert _final(events).reply == "second try"


def test_a_streamed_turn_dispatches_the_hooks_of_a_plain_turn_in_the_same_order() -> None:
    streamed, plain = Recorder(QUIET), Recorder(QUIET)
    runner, _ = make_runner([tool_call("echo", {"x": 1}), "one two"], recorder=streamed)
    runner.tools.add_python(lambda x: "ok", name="echo", description="E.")
    other, _ = make_runner([tool_call("echo", {"x": 1}), "one two"], recorder=plain)
    other.tools.add_python(lambda x: "ok", name="echo", description="E.")
    run(_events(runner))
    run(other.run_turn("hi", session_key="s1"))
    assert streamed.order == plain.order
