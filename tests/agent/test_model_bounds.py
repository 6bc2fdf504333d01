"""Bounds on what a model sends (``agent.limits``), against a real server on 127.0.0.1.

A model is untrusted input: the count of tool calls per response, the size of their
arguments, the size of a tool result handed back, of the reply, of the response read from
the wire and the time one call may take are all bounded, and a bound that trips says which
bound and which config key.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator, Mapping
from typing import Any

import pytest
from agentplug import PluginApi, PluginHost
from agentplug.agent import AgentRunner, ModelRequest, ModelResponse
from agentplug.agent.providers.base import ModelDelta
from agentplug.core.errors import ConfigError

from tests.agent.chat_server import ChatServer, Drip, Unsized, chat_server
from tests.agent.conftest import make_runner, run

MIB = 1024 * 1024


@pytest.fixture
def server() -> Iterator[ChatServer]:
    with chat_server() as srv:
        yield srv


class GateCounter:
    """A real plugin counting the calls that reach ``before_tool_call``."""

    plugin_id = "gate-counter"

    def __init__(self) -> None:
        self.call_ids: list[str] = []

    def register(self, api: PluginApi) -> None:
        api.on("before_tool_call", lambda event, ctx: self.call_ids.append(event.tool_call_id))


def _runner(
    server: ChatServer,
    limits: Mapping[str, Any] | None = None,
    *,
    plugins: tuple[Any, ...] = (),
    attempts: int = 3,
    **options: Any,
) -> AgentRunner:
    host = PluginHost()
    for plugin in plugins:
        host.register(plugin, plugin.plugin_id)
    config: dict[str, Any] = {
        "model": "openai/test-model",
        "tools": {"actions": False},
        "providers": {"openai": {"base_url": server.base_url, **options}},
        "retry": {"attempts": attempts},
    }
    if limits is not None:
        config["limits"] = dict(limits)
    runner = AgentRunner(host, config=config)

    def noop() -> str:
        """Does nothing."""
        return "ok"

    runner.tools.add_python(noop)
    return runner


def _tool_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [m for m in messages if m.get("role") == "tool"]


def _answer_counts(messages: list[dict[str, Any]]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for message in _tool_messages(messages):
        counts[message["tool_call_id"]] = counts.get(message["tool_call_id"], 0) + 1
    return counts


# -- tool calls per response ---------------------------------------------------------------


def test_tool_calls_past_the_per_response_limit_never_reach_the_gate(server: ChatServer) -> None:
    server.tool_calls(*[("noop", {}) for _ in range(10_000)])
    server.reply("done")
    counter = GateCounter()
    result = run(_runner(server, plugins=(counter,)).run_turn("go", session_key="s1"))
    assert result.status == "replied"
    assert counter.call_ids == [f"call_a{i}" for i in range(64)]


def test_tool_calls_past_the_limit_are_dropped_and_the_model_reads_how_many(
    server: ChatServer,
) -> None:
    server.tool_calls(*[("noop", {}) for _ in range(100)])
    server.reply("done")
    run(_runner(server, {"tool_calls_per_response": 3}).run_turn("go", session_key="s1"))
    sent = server.requests[1]["body"]["messages"]
    assistant = next(m for m in sent if m.get("tool_calls"))
    assert [c["id"] for c in assistant["tool_calls"]] == ["call_a0", "call_a1", "call_a2"]
    assert _answer_counts(sent) == {f"call_a{i}": 1 for i in range(3)}
    last = _tool_messages(sent)[-1]
    assert "97 more tool call(s)" in last["content"]
    assert "agent.limits.tool_calls_per_response" in last["content"]


def test_a_response_of_many_tiny_tool_calls_does_not_grow_the_next_request(
    server: ChatServer,
) -> None:
    # One response under the byte limit can hold a quarter of a million calls: none past the
    # limit may cost a transcript message, a hook dispatch or a byte of the next request.
    server.tool_calls(*[("noop", {}) for _ in range(50_000)])
    server.reply("done")
    counter = GateCounter()
    run(_runner(server, plugins=(counter,)).run_turn("go", session_key="s1"))
    assert len(counter.call_ids) == 64
    assert server.requests[1]["size"] < 64 * 1024


# -- reply and response size ---------------------------------------------------------------


def test_a_reply_over_the_reply_limit_is_delivered_cut_with_a_marker(server: ChatServer) -> None:
    server.raw(200, server.completion({"content": "x" * (2 * MIB)}))
    result = run(_runner(server).run_turn("talk", session_key="s1"))
    assert result.status == "replied" and result.reply is not None
    assert result.reply.startswith("x" * 1000)
    assert result.reply.count("x") == MIB
    assert result.reply.endswith("(agent.limits.reply_chars)]")


def test_a_50_mb_content_is_not_delivered_as_50_mb(server: ChatServer) -> None:
    server.raw(200, server.completion({"content": "x" * 50_000_000}))
    result = run(_runner(server).run_turn("talk", session_key="s1"))
    assert result.reply is None or len(result.reply) < MIB + 200
    assert sum(len(str(m.get("content"))) for m in result.transcript) < 2 * MIB


def test_a_50_mb_content_under_a_raised_response_limit_is_cut_at_the_reply_limit(
    server: ChatServer,
) -> None:
    server.raw(200, server.completion({"content": "x" * 50_000_000}))
    result = run(
        _runner(server, {"model_response_bytes": 64 * MIB}).run_turn("talk", session_key="s1")
    )
    assert result.status == "replied" and result.reply is not None
    assert result.reply.count("x") == MIB


@pytest.mark.parametrize("answer", [Unsized, bytes], ids=["no-content-length", "sized"])
def test_a_response_over_the_wire_limit_fails_in_one_line_naming_the_key(
    server: ChatServer, answer: Any
) -> None:
    server.raw(200, answer(server.completion({"content": "x" * 50_000_000})))
    result = run(_runner(server).run_turn("talk", session_key="s1"))
    assert result.status == "failed" and result.error is not None
    assert "agent.limits.model_response_bytes" in result.error
    assert str(16 * MIB) in result.error and "\n" not in result.error
    assert server.answered.wait(30)
    assert server.aborted == 1  # the client stopped reading; it did not take the 50 MB


def test_a_configured_response_limit_is_the_one_enforced(server: ChatServer) -> None:
    server.reply("y" * 5000)
    result = run(_runner(server, {"model_response_bytes": 2000}).run_turn("hi", session_key="s1"))
    assert result.status == "failed"
    assert "2000 bytes (agent.limits.model_response_bytes)" in (result.error or "")


# -- tool arguments and results ------------------------------------------------------------


@pytest.mark.parametrize(
    ("size", "limits"),
    [(12_000_000, None), (50_000_000, {"model_response_bytes": 64 * MIB})],
    ids=["12MB-default-limits", "50MB"],
)
def test_oversize_tool_arguments_are_refused_and_not_sent_again(
    server: ChatServer, size: int, limits: dict[str, Any] | None
) -> None:
    server.tool_calls(("noop", {"blob": "z" * size}))
    server.reply("done")
    counter = GateCounter()
    result = run(_runner(server, limits, plugins=(counter,)).run_turn("go", session_key="s1"))
    assert result.status == "replied" and counter.call_ids == []
    second = server.requests[1]
    assert second["size"] < 64 * 1024
    (answer,) = _tool_messages(second["body"]["messages"])
    assert "agent.limits.tool_argument_bytes" in answer["content"]
    (call,) = second["body"]["messages"][-2]["tool_calls"]
    assert call["id"] == answer["tool_call_id"] and len(call["function"]["arguments"]) < 1000


def test_arguments_within_the_limit_reach_the_tool_unchanged(server: ChatServer) -> None:
    server.tool_calls(("echo", {"text": "t" * 1000}))
    server.reply("done")
    runner = _runner(server, {"tool_argument_bytes": 2000})
    seen: list[str] = []

    def echo(text: str) -> str:
        """Echoes."""
        seen.append(text)
        return "ok"

    runner.tools.add_python(echo)
    run(runner.run_turn("go", session_key="s1"))
    assert seen == ["t" * 1000]


def test_a_tool_result_over_the_limit_reaches_the_model_cut_with_a_marker(
    server: ChatServer,
) -> None:
    server.tool_calls(("big", {}))
    server.reply("done")
    runner = _runner(server)
    runner.tools.add_python(lambda: "r" * 200_000, name="big", description="A big result.")
    result = run(runner.run_turn("go", session_key="s1"))
    (answer,) = _tool_messages(server.requests[1]["body"]["messages"])
    kept = 64 * 1024
    assert answer["content"][:kept] == "r" * kept and answer["content"][kept] == "\n"
    assert "200000 characters" in answer["content"]
    assert answer["content"].endswith("(agent.limits.tool_result_chars)]")
    assert _tool_messages(result.transcript)[0]["content"] == answer["content"]


def test_duplicate_tool_call_ids_are_each_answered_exactly_once(server: ChatServer) -> None:
    call = {"id": "dup", "type": "function", "function": {"name": "noop", "arguments": "{}"}}
    server.raw(200, server.completion({"content": None, "tool_calls": [call, call, call]}))
    server.reply("done")
    counter = GateCounter()
    run(_runner(server, plugins=(counter,)).run_turn("go", session_key="s1"))
    assistant, *answers = server.requests[1]["body"]["messages"][-4:]
    ids = [c["id"] for c in assistant["tool_calls"]]
    assert len(set(ids)) == 3 and ids[0] == "dup"
    assert [a["tool_call_id"] for a in answers] == ids
    assert counter.call_ids == ids


def test_a_huge_tool_name_is_not_kept_whole(server: ChatServer) -> None:
    server.tool_calls(("n" * 100_000, {}))
    server.reply("done")
    result = run(_runner(server).run_turn("go", session_key="s1"))
    assert result.status == "replied"
    assert server.requests[1]["size"] < 10_000
    (answer,) = _tool_messages(result.transcript)
    assert "unknown tool" in answer["content"]


# -- time --------------------------------------------------------------------------------


def test_a_slow_drip_server_cannot_keep_a_call_past_timeout_s(server: ChatServer) -> None:
    body = server.completion({"content": "late"})
    server.raw(200, Drip(body, interval=0.3))
    result = run(_runner(server, timeout_s=1, attempts=1).run_turn("hi", session_key="s1"))
    assert result.status == "failed" and result.error is not None
    assert "did not complete within 1 s" in result.error
    assert "agent.providers.openai.timeout_s" in result.error and "total" in result.error
    assert server.answered.wait(60)
    assert server.sent[-1] < len(body)


class StallingStream:
    """A streaming provider that sends one delta, then never finishes."""

    name = "stalling"

    async def complete(self, request: ModelRequest) -> ModelResponse:
        await asyncio.Event().wait()
        return ModelResponse()

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelDelta | ModelResponse]:
        yield ModelDelta("partial ")
        await asyncio.Event().wait()
        yield ModelResponse()


@pytest.mark.parametrize("streamed", [False, True])
def test_the_model_call_deadline_bounds_any_provider(streamed: bool) -> None:
    deltas: list[str] = []
    runner = AgentRunner(
        PluginHost(),
        StallingStream(),
        config={
            "model": "stalling/m",
            "tools": {"actions": False},
            "limits": {"model_call_timeout_s": 0.2},
            "retry": {"attempts": 1},
        },
        on_delta=deltas.append if streamed else None,
    )
    result = run(runner.run_turn("hi", session_key="s1"))
    assert result.status == "failed"
    assert "did not complete within 0.2 s (agent.limits.model_call_timeout_s)" in (
        result.error or ""
    )
    assert deltas == (["partial "] if streamed else [])


# -- config --------------------------------------------------------------------------------


def test_a_bad_limit_is_a_config_error_naming_the_key() -> None:
    with pytest.raises(ConfigError, match=r"agent\.limits\.tool_calls_per_response"):
        make_runner(agent={"limits": {"tool_calls_per_response": 0}})


def test_limits_accept_camel_case_keys() -> None:
    runner, _ = make_runner(agent={"limits": {"replyChars": 10}})
    assert runner.config.limits.reply_chars == 10


def test_scripted_replies_respect_the_reply_limit() -> None:
    runner, _ = make_runner(["abcdefghij" * 10], agent={"limits": {"reply_chars": 25}})
    result = run(runner.run_turn("hi", session_key="s1"))
    assert result.reply is not None and result.reply.startswith("abcdefghij" * 2 + "abcde\n")
    assert json.dumps(result.transcript).count("abcdefghij") == 2


def test_deeply_nested_arguments_are_answered_as_not_an_object(server: ChatServer) -> None:
    server.tool_calls(("noop", "[" * 5000 + "]" * 5000))
    server.reply("done")
    result = run(_runner(server).run_turn("go", session_key="s1"))
    assert result.status == "replied"
    (answer,) = _tool_messages(result.transcript)
    assert "not a JSON object" in answer["content"]
