"""The seed's turn rules the runner keeps (issue 27 item 9), one rule per test: dispatch
hooks in delivery, heartbeat context before the run guard, ``before_model_resolve`` before
the transcript load, attachments delivered as media, ``channel_id`` and the context
window fields filled."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

import pytest
from agentplug import Gateway, PluginApi
from agentplug.actions.model import Action, ActionResult, Attachment
from agentplug.agent import ScriptedProvider
from agentplug.agent.toolrun import MAX_REPLY_MEDIA
from agentplug.agent.transcript import SessionRecord, StateStoreTranscripts
from agentplug.services.replies import ReplyDispatcher
from agentplug.store import MemoryStore

from tests.agent.chat_server import ChatServer, chat_server
from tests.agent.conftest import Recorder, make_runner, on, run, tool_call


@pytest.fixture
def server() -> Iterator[ChatServer]:
    with chat_server() as srv:
        yield srv


# -- dispatch hooks in delivery -------------------------------------------------------------


def test_before_dispatch_and_reply_dispatch_run_after_the_payload_hooks_before_the_channel() -> (
    None
):
    order: list[str] = []
    recorder = Recorder(("reply_payload_sending", "before_dispatch", "reply_dispatch"))
    runner, _ = make_runner(["Hi."], recorder=recorder, channel=lambda p: order.append("channel"))
    run(runner.run_turn("hello", session_key="s1"))
    assert recorder.order == ["reply_payload_sending", "before_dispatch", "reply_dispatch"]
    assert order == ["channel"]
    (event,) = recorder.events("before_dispatch")
    assert event.content == "Hi." and event.payload["text"] == "Hi."


def test_a_before_dispatch_rewrite_is_what_the_channel_sends() -> None:
    sent: list[dict[str, Any]] = []
    runner, _ = make_runner(
        ["Hi."],
        plugins={"signer": on("before_dispatch", lambda event: {"content": event.content + " -A"})},
        channel=sent.append,
    )
    result = run(runner.run_turn("hello", session_key="s1"))
    assert sent[0]["text"] == "Hi. -A"
    assert result.reply == "Hi. -A"


def test_a_dispatch_a_plugin_takes_never_reaches_the_channel() -> None:
    sent: list[dict[str, Any]] = []
    recorder = Recorder(("message_sent",))
    runner, _ = make_runner(
        ["Hi."],
        recorder=recorder,
        plugins={"relay": on("reply_dispatch", lambda: {"handled": True})},
        channel=sent.append,
    )
    result = run(runner.run_turn("hello", session_key="s1"))
    assert sent == []
    assert result.delivery is not None
    assert (result.delivery.status, result.delivery.dispatched_by) == ("delivered", "relay")
    assert recorder.events("message_sent")[0].success is True


def test_a_before_dispatch_claim_skips_reply_dispatch() -> None:
    recorder = Recorder(("reply_dispatch",))
    runner, _ = make_runner(
        ["Hi."],
        recorder=recorder,
        plugins={"taker": on("before_dispatch", lambda: {"handled": True})},
    )
    result = run(runner.run_turn("hello", session_key="s1"))
    assert result.delivery is not None and result.delivery.dispatched_by == "taker"
    assert recorder.order == []


def test_dispatch_hooks_no_plugin_implements_are_not_dispatched() -> None:
    sent: list[dict[str, Any]] = []
    runner, _ = make_runner(["Hi."], channel=sent.append)
    result = run(runner.run_turn("hello", session_key="s1"))
    assert "before_dispatch" not in result.hooks and "reply_dispatch" not in result.hooks
    assert sent[0]["text"] == "Hi." and result.delivery is not None
    assert result.delivery.dispatched_by is None


def test_dispatch_hooks_never_see_runtime_trust_markers() -> None:
    seen: list[Any] = []
    gateway = Gateway()
    gateway.host.register(on("before_dispatch", lambda event: seen.append(event.payload)), "spy")
    replies = ReplyDispatcher(gateway.host)
    payload = {"trusted_local_media": True, "media": [{"url": "file:///tmp/a.png"}]}
    delivery = run(replies.deliver("hi", channel=lambda p: None, payload=payload))
    assert delivery.status == "delivered"
    assert "trusted_local_media" not in seen[0]
    assert seen[0]["media"] == [{"url": "file:///tmp/a.png"}]


# -- heartbeat context before the run guard ---------------------------------------------------


def test_the_run_guard_sees_the_heartbeat_context() -> None:
    guarded: list[str] = []

    def register(api: PluginApi) -> None:
        api.on("heartbeat_prompt_contribution", lambda: {"append_context": "disk 97% full"})
        api.on("before_agent_run", lambda event: guarded.append(event.prompt))

    runner, provider = make_runner(["ok"], plugins={"monitor": register})
    run(runner.run_turn("check the host", session_key="s1", heartbeat=True))
    assert guarded == ["check the host\n\ndisk 97% full"]
    assert provider.requests[0].messages[-1]["content"] == "check the host\n\ndisk 97% full"


def test_a_run_guard_can_block_a_heartbeat_turn_on_its_context() -> None:
    def register(api: PluginApi) -> None:
        api.on("heartbeat_prompt_contribution", lambda: {"append_context": "PAGE-ONCALL"})
        api.on(
            "before_agent_run",
            lambda event: (
                {"outcome": "block", "reason": "no paging at night"}
                if "PAGE-ONCALL" in event.prompt
                else None
            ),
        )

    runner, provider = make_runner(["ok"], plugins={"night": register})
    result = run(runner.run_turn("tick", session_key="s1", heartbeat=True))
    assert result.status == "blocked" and provider.requests == []


# -- before_model_resolve before the transcript load ------------------------------------------


class LoggingTranscripts(StateStoreTranscripts):
    """The store's transcripts, logging each load into a shared list."""

    def __init__(self, log: list[str]) -> None:
        super().__init__(MemoryStore())
        self.log = log

    def load(self, session_key: str) -> SessionRecord | None:
        self.log.append("load")
        return super().load(session_key)


def test_before_model_resolve_runs_before_the_session_is_loaded() -> None:
    log: list[str] = []
    runner, _ = make_runner(
        ["ok"],
        plugins={"router": on("before_model_resolve", lambda: log.append("before_model_resolve"))},
        transcripts=LoggingTranscripts(log),
    )
    run(runner.run_turn("hi", session_key="s1"))
    assert log == ["before_model_resolve", "load"]


def test_before_model_resolve_sees_no_session_messages() -> None:
    recorder = Recorder(("before_model_resolve",))
    runner, _ = make_runner(["one", "two"], recorder=recorder)
    run(runner.run_turn("first", session_key="s1"))
    run(runner.run_turn("second", session_key="s1"))
    event = recorder.events("before_model_resolve")[1]
    assert event.prompt == "second"
    assert "messages" not in event.model_dump()
    assert recorder.ctxs("before_model_resolve")[1].session_id is None


def test_the_model_chosen_before_the_load_is_the_one_the_turn_calls(server: ChatServer) -> None:
    server.reply("from the server")
    runner, scripted = make_runner(
        ["from the script"],
        plugins={"router": on("before_model_resolve", lambda: {"model_override": "openai/m"})},
        agent={"providers": {"openai": {"base_url": server.base_url}}},
    )
    result = run(runner.run_turn("hi", session_key="s1"))
    assert result.reply == "from the server" and scripted.requests == []
    assert server.requests[0]["body"]["model"] == "m"


def test_a_turn_that_stops_before_the_load_keeps_the_stored_session() -> None:
    gateway = Gateway()
    scripted = ScriptedProvider(["first reply"])
    runner = gateway.runner_for(scripted, config={"tools": {"actions": False}})
    run(runner.run_turn("first", session_key="s1"))
    broken = gateway.runner_for(
        scripted,
        config={
            "tools": {
                "actions": False,
                # a server that exits at once: connecting fails before the session loads
                "mcp_servers": {"gone": {"command": sys.executable, "args": ["-c", "pass"]}},
            }
        },
    )
    result = run(broken.run_turn("second", session_key="s1"))
    assert result.status == "failed"
    stored = runner.transcripts.load("s1")
    assert stored is not None
    assert [m["content"] for m in stored.messages] == ["first", "first reply"]


# -- attachments delivered as media -------------------------------------------------------------


def _media_action(count: int = 1) -> Action:
    def handler(runtime: Any, message: Any, state: Any, options: Any) -> ActionResult:
        return ActionResult(
            success=True,
            text="made a picture",
            attachments=[
                Attachment(url=f"https://cdn.example/{i}.png", content_type="image/png")
                for i in range(count)
            ],
        )

    return Action(name="DRAW", description="Draw a picture.", handler=handler, side_effects=False)


def _media_runner(
    count: int = 1, plugins: dict[str, Any] | None = None
) -> tuple[Any, list[dict[str, Any]], Recorder]:
    sent: list[dict[str, Any]] = []
    recorder = Recorder(("reply_payload_sending",))
    runner, _ = make_runner(
        [tool_call("DRAW"), "Here it is."],
        recorder=recorder,
        plugins=plugins,
        agent={"tools": {"allow": ["DRAW"]}},
        channel=sent.append,
    )
    runner.actions.registry.register(_media_action(count))
    return runner, sent, recorder


def test_an_actions_attachments_reach_the_reply_payload_media() -> None:
    runner, sent, recorder = _media_runner()
    run(runner.run_turn("draw a cat", session_key="s1"))
    (event,) = recorder.events("reply_payload_sending")
    media = [dict(m) for m in event.payload.media]
    assert media == [{"url": "https://cdn.example/0.png", "contentType": "image/png"}]
    assert sent[0]["media"] == media


def test_reply_payload_sending_can_take_the_media_out() -> None:
    def no_media(event: Any) -> dict[str, Any]:
        return {"payload": {"text": event.payload.text, "media": []}}

    runner, sent, _ = _media_runner(plugins={"textonly": on("reply_payload_sending", no_media)})
    run(runner.run_turn("draw a cat", session_key="s1"))
    assert sent[0]["media"] == []


def test_a_withheld_tool_result_brings_no_media() -> None:
    def withhold(event: Any) -> dict[str, Any] | None:
        return {"block": True} if event.message.get("role") == "tool" else None

    runner, sent, _ = _media_runner(plugins={"keeper": on("before_message_write", withhold)})
    run(runner.run_turn("draw a cat", session_key="s1"))
    assert sent[0]["media"] == []


def test_a_reply_carries_at_most_the_media_bound() -> None:
    runner, sent, _ = _media_runner(count=MAX_REPLY_MEDIA + 8)
    run(runner.run_turn("draw many", session_key="s1"))
    assert len(sent[0]["media"]) == MAX_REPLY_MEDIA


# -- channel_id and the context window ------------------------------------------------------------


def test_channel_id_is_the_inbound_chat_id() -> None:
    recorder = Recorder(("before_agent_run", "before_tool_call"))
    runner, _ = make_runner([tool_call("echo"), "ok"], recorder=recorder)
    runner.tools.add_python(lambda: "e", name="echo", description="Echo.")
    inbound = {"content": "hi", "channel": "telegram", "chat_id": "c-42", "sender_id": "u1"}
    run(runner.handle_inbound(inbound))
    assert recorder.ctxs("before_agent_run")[0].channel_id == "c-42"
    assert recorder.ctxs("before_tool_call")[0].channel_id == "c-42"


def test_channel_id_comes_from_the_session_key_without_an_inbound_message() -> None:
    recorder = Recorder(("before_agent_run",))
    runner, _ = make_runner(["ok"], recorder=recorder)
    run(runner.run_turn("tick", session_key="agent:main:discord:room-7", heartbeat=True))
    assert recorder.ctxs("before_agent_run")[0].channel_id == "room-7"


def test_the_models_window_is_the_reference_when_the_configured_budget_is_lower() -> None:
    recorder = Recorder(("before_agent_run", "model_call_started"))
    runner, _ = make_runner(
        ["ok"],
        recorder=recorder,
        agent={"context_token_budget": 8000, "context_window_tokens": 128000},
    )
    run(runner.run_turn("hi", session_key="s1"))
    ctx = recorder.ctxs("before_agent_run")[0]
    assert (ctx.context_token_budget, ctx.context_window_source) == (8000, "config")
    assert ctx.context_window_reference_tokens == 128000
    (started,) = recorder.events("model_call_started")
    assert started.context_window_reference_tokens == 128000


def test_the_models_window_is_the_budget_when_none_is_configured() -> None:
    recorder = Recorder(("before_agent_run",))
    runner, _ = make_runner(["ok"], recorder=recorder, agent={"context_window_tokens": 32000})
    run(runner.run_turn("hi", session_key="s1"))
    ctx = recorder.ctxs("before_agent_run")[0]
    assert (ctx.context_token_budget, ctx.context_window_source) == (32000, "model")
    assert ctx.context_window_reference_tokens is None
