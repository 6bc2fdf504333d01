"""Sessions (issue 27 item 7): transcripts in the gateway's store, reset with its hooks in
order, listing."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest
from agentplug import Gateway, PluginApi
from agentplug.agent import ModelRequest, ModelResponse, ScriptedProvider
from agentplug.agent.sessions import UnknownSession
from agentplug.core.redaction import register_secret

from tests.agent.chat_server import chat_server
from tests.agent.conftest import Recorder, make_runner, run


def _runner(gateway: Gateway, replies: list[Any]) -> Any:
    return gateway.runner_for(ScriptedProvider(replies), config={"tools": {"actions": False}})


def test_a_session_outlives_its_gateway_in_the_state_directory(tmp_path: Path) -> None:
    first = Gateway(state_dir=tmp_path)
    run(_runner(first, ["Nice to meet you, Ana."]).run_turn("I am Ana", session_key="s1"))
    run(first.aclose())
    second = Gateway(state_dir=tmp_path)
    provider = ScriptedProvider(["Your name is Ana."])
    runner = second.runner_for(provider, config={"tools": {"actions": False}})
    run(runner.run_turn("what is my name?", session_key="s1"))
    run(second.aclose())
    contents = [m["content"] for m in provider.requests[0].messages]
    assert contents == ["I am Ana", "Nice to meet you, Ana.", "what is my name?"]


def test_a_stored_session_is_what_an_openai_compatible_server_reads_next(
    tmp_path: Path,
) -> None:
    with chat_server() as server:
        server.reply("Nice to meet you, Ana.")
        server.reply("Your name is Ana.")
        agent = {
            "model": "openai/m",
            "providers": {"openai": {"base_url": server.base_url}},
            "tools": {"actions": False},
        }
        for text in ("I am Ana", "what is my name?"):  # a new gateway for each turn
            gateway = Gateway.from_config({"agent": agent}, state_dir=tmp_path)
            result = run(gateway.runner.run_turn(text, session_key="s1"))
            run(gateway.aclose())
            assert result.status == "replied", result.error
        sent = server.requests[-1]["body"]["messages"]
    assert [(m["role"], m["content"]) for m in sent] == [
        ("user", "I am Ana"),
        ("assistant", "Nice to meet you, Ana."),
        ("user", "what is my name?"),
    ]


def test_reset_fires_before_reset_then_session_end_then_session_start() -> None:
    recorder = Recorder(("before_reset", "session_start", "session_end"))
    runner, _ = make_runner(["hi"], recorder=recorder)
    run(runner.run_turn("hello", session_key="s1"))
    old_id = recorder.events("session_start")[0].session_id
    recorder.calls.clear()
    fresh = run(runner.reset_session("s1", source="command"))
    assert recorder.order == ["before_reset", "session_end", "session_start"]
    reset = recorder.events("before_reset")[0]
    assert (reset.session_key, reset.source) == ("s1", "command")
    assert recorder.ctxs("before_reset")[0].session_id == old_id
    end, start = recorder.events("session_end")[0], recorder.events("session_start")[0]
    assert (end.reason, end.session_id) == ("reset", old_id)
    assert (start.reason, start.session_id) == ("reset", fresh.session_id)
    assert fresh.session_id != old_id


def test_after_a_reset_the_model_reads_no_earlier_message() -> None:
    runner, provider = make_runner(["one", "two"])
    run(runner.run_turn("remember 42", session_key="s1"))
    run(runner.reset_session("s1"))
    run(runner.run_turn("what number?", session_key="s1"))
    assert provider.requests[1].messages == [{"role": "user", "content": "what number?"}]


def test_the_turn_after_a_reset_does_not_start_the_session_again() -> None:
    recorder = Recorder(("session_start",))
    runner, _ = make_runner(["one", "two"], recorder=recorder)
    run(runner.run_turn("a", session_key="s1"))
    run(runner.reset_session("s1"))
    run(runner.run_turn("b", session_key="s1"))
    assert [e.reason for e in recorder.events("session_start")] == ["new", "reset"]


def test_reset_deletes_the_plugins_session_state_and_pending_injections() -> None:
    holder: dict[str, PluginApi] = {}
    cleaned: list[tuple[str, str | None]] = []

    def register(api: PluginApi) -> None:
        holder["api"] = api
        api.session.state.register_session_extension("notes", default={})
        api.session.on_cleanup(lambda reason, key: cleaned.append((reason, key)))

    runner, provider = make_runner(["one", "two"], plugins={"memo": register})
    api = holder["api"]
    run(runner.run_turn("a", session_key="s1"))
    runner.sessions.patch("s1", "memo", "notes", {"topic": "invoices"})
    api.session.workflow.enqueue_next_turn_injection("s1", "STALE CONTEXT")
    run(runner.reset_session("s1"))
    assert cleaned == [("reset", "s1")]
    assert runner.sessions.get_state("s1", "memo", "notes") == {}
    run(runner.run_turn("b", session_key="s1"))
    assert "STALE CONTEXT" not in str(provider.requests[1].messages)


def test_resetting_an_unknown_session_names_it_and_the_closest_key() -> None:
    runner, _ = make_runner(["one"])
    run(runner.run_turn("a", session_key="agent:main:chat:terminal"))
    with pytest.raises(UnknownSession, match="did you mean 'agent:main:chat:terminal'"):
        run(runner.reset_session("agent:main:chat:termnal"))


class GatedModel:
    """Replies once ``release`` is set; ``called`` is set when a call arrives."""

    name = "scripted"

    def __init__(self) -> None:
        self.called = asyncio.Event()
        self.release = asyncio.Event()

    async def complete(self, request: ModelRequest) -> ModelResponse:
        self.called.set()
        await self.release.wait()
        return ModelResponse(text="late reply")


def test_a_reset_waits_for_the_turn_of_that_session_in_progress() -> None:
    async def scenario() -> None:
        runner, _ = make_runner(["first"])
        await runner.run_turn("a", session_key="s1")
        model = GatedModel()
        runner.providers.register("scripted", model)
        turn = asyncio.create_task(runner.run_turn("b", session_key="s1"))
        await model.called.wait()
        reset = asyncio.create_task(runner.reset_session("s1"))
        await asyncio.sleep(0)
        assert not reset.done()  # held by the turn's session lock
        model.release.set()
        assert (await turn).reply == "late reply"
        await reset
        stored = runner.transcripts.load("s1")
        assert stored is not None and stored.messages == []  # the reset came after

    asyncio.run(scenario())


def test_sessions_are_listed_most_recent_first_with_a_scrubbed_preview() -> None:
    register_secret("sk-LISTING-SECRET-123")
    runner, _ = make_runner(["one", "two", "three"])
    run(runner.run_turn("older question", session_key="a"))
    saved = runner.transcripts.load("a").updated_at_ms
    while int(time.time() * 1000) <= saved:  # the next save gets a later stamp
        time.sleep(0.001)
    run(runner.run_turn("my key is sk-LISTING-SECRET-123", session_key="b"))
    rows = runner.list_sessions()
    assert [r.session_key for r in rows] == ["b", "a"]
    assert rows[0].messages == 2
    assert "sk-LISTING-SECRET-123" not in rows[0].last_user
    assert rows[1].last_user == "older question"
