"""Hostile model responses through the runner (issue 25 acceptance), as a property.

A real OpenAI-compatible server on 127.0.0.1 answers each model call with what hypothesis
draws: any number of tool calls with unknown, empty, unicode or huge names, repeated or
empty ids, arguments that are objects, other JSON, deep nesting, huge strings or not JSON
at all, reply text of any size, and bodies that are broken or over the wire limit. Whatever
comes, the turn ends with a status (no traceback escapes, the runner's catch-all never
fires, a failure is the provider's one-line error, never an exception let through), every
``agent.limits`` bound holds, and the transcript stays protocol-valid: each assistant tool
call id is answered by exactly one tool message right after it, and there is no tool
message anywhere else.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterator
from typing import Any, get_args

import pytest

hypothesis = pytest.importorskip("hypothesis")
from agentplug import PluginApi, PluginHost  # noqa: E402
from agentplug.agent import AgentRunner, ToolOutput  # noqa: E402
from agentplug.agent.limits import MAX_CALL_ID_CHARS, MAX_TOOL_NAME_CHARS  # noqa: E402
from agentplug.agent.turn import TurnStatus  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from tests.agent.chat_server import ChatServer, chat_server  # noqa: E402

FUZZ = settings(
    max_examples=80,
    derandomize=True,  # the same examples on every run and machine
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
LIMITS = {
    "tool_calls_per_response": 4,
    "tool_argument_bytes": 600,
    "tool_result_chars": 300,
    "reply_chars": 400,
    "model_response_bytes": 48 * 1024,
}
MARKER_ROOM = 400  # a truncation marker, and the note about dropped tool calls
TOOLS = ["echo", "big", "boom", "noop"]


@pytest.fixture(scope="module")
def server() -> Iterator[ChatServer]:
    with chat_server() as srv:
        yield srv


scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**20), max_value=10**20),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12),
)
json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=12,
)


def _deep(depth: int, brackets: bool) -> str:
    return "[" * depth + "]" * depth if brackets else '{"a":' * depth + "1" + "}" * depth


names = st.one_of(
    st.sampled_from(TOOLS),
    st.just(""),
    st.text(max_size=16),
    st.text(alphabet="é漢字🙂\u202e\x00 ", min_size=1, max_size=8),
    st.integers(min_value=MAX_TOOL_NAME_CHARS - 2, max_value=20_000).map(lambda n: "n" * n),
)
ids = st.one_of(
    st.sampled_from(["c1", "c2", "dup", "call_0_1"]),
    st.just(""),
    st.none(),
    st.text(max_size=8),
    st.integers(min_value=MAX_CALL_ID_CHARS - 2, max_value=5000).map(lambda n: "i" * n),
)
arguments = st.one_of(
    st.dictionaries(st.sampled_from(["text", "x", ""]), json_values, max_size=3).map(json.dumps),
    json_values.map(json.dumps),  # any JSON, objects or not
    st.builds(_deep, st.sampled_from([3, 900, 5000, 20_000]), st.booleans()),
    st.integers(min_value=0, max_value=3000).map(lambda n: json.dumps({"text": "h" * n})),
    st.text(max_size=30),  # mostly not JSON
    st.dictionaries(st.text(max_size=4), scalars, max_size=2),  # an object, not a string
    st.integers(),  # a number where the arguments string goes
    st.none(),
)


@st.composite
def tool_calls(draw: st.DrawFn) -> dict[str, Any]:
    call: dict[str, Any] = {
        "type": "function",
        "function": {"name": draw(names), "arguments": draw(arguments)},
    }
    call_id = draw(ids)
    if call_id is not None:
        call["id"] = call_id
    return call


@st.composite
def hostile_bodies(draw: st.DrawFn) -> bytes:
    kind = draw(st.sampled_from(["message"] * 6 + ["broken", "oversize", "shape"]))
    if kind == "broken":
        deep = st.builds(_deep, st.integers(min_value=500, max_value=5000), st.booleans())
        return draw(st.one_of(st.binary(max_size=40), deep.map(str.encode)))
    if kind == "oversize":
        return json.dumps({"choices": [{"message": {"content": "o" * (64 * 1024)}}]}).encode()
    if kind == "shape":
        message = draw(json_values)
        return json.dumps({"choices": [{"message": message}]}).encode()
    content = draw(
        st.one_of(
            st.none(),
            st.text(max_size=40),
            st.integers(min_value=0, max_value=5000).map(lambda n: "c" * n),
        )
    )
    calls = draw(
        st.one_of(
            st.lists(tool_calls(), max_size=8),
            st.integers(min_value=0, max_value=300).map(
                lambda n: [_plain_call(i) for i in range(n)]
            ),
        )
    )
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls or draw(st.booleans()):
        message["tool_calls"] = calls
    return json.dumps({"id": "x", "choices": [{"message": message}]}).encode()


def _plain_call(index: int) -> dict[str, Any]:
    return {"id": f"p{index}", "type": "function", "function": {"name": "noop", "arguments": "{}"}}


class GateLog:
    """A real plugin recording the call ids that reach ``before_tool_call``."""

    plugin_id = "gate-log"

    def __init__(self) -> None:
        self.ids: list[str] = []

    def register(self, api: PluginApi) -> None:
        api.on("before_tool_call", lambda event, ctx: self.ids.append(event.tool_call_id))


class ErrorLog(logging.Handler):
    """Collects ERROR records of the agentplug loggers (the runner's catch-all logs one)."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def _runner(server: ChatServer, gate: GateLog) -> AgentRunner:
    host = PluginHost()
    host.register(gate, gate.plugin_id)
    runner = AgentRunner(
        host,
        config={
            "model": "openai/hostile",
            "tools": {"actions": False},
            "limits": LIMITS,
            "providers": {"openai": {"base_url": server.base_url, "timeout_s": 20}},
        },
    )

    def echo(text: str) -> str:
        """Echoes the text."""
        return text

    def big() -> str:
        """A large result."""
        return "b" * 5000

    def boom() -> str:
        """Always fails."""
        raise RuntimeError("boom " * 500)

    def noop() -> ToolOutput:
        """Nothing."""
        return ToolOutput("ok")

    for tool in (echo, big, boom, noop):
        runner.tools.add_python(tool)
    return runner


def assert_protocol_valid(messages: list[dict[str, Any]]) -> None:
    index = 0
    while index < len(messages):
        message = messages[index]
        assert message.get("role") != "tool", f"orphan tool message at {index}"
        calls = (message.get("tool_calls") or []) if message.get("role") == "assistant" else []
        ids = [c["id"] for c in calls]
        assert len(set(ids)) == len(ids), "repeated call ids in one assistant message"
        answers = messages[index + 1 : index + 1 + len(ids)]
        assert [a.get("role") for a in answers] == ["tool"] * len(ids)
        assert [a.get("tool_call_id") for a in answers] == ids
        index += 1 + len(ids)


def assert_bounded(messages: list[dict[str, Any]], gate_ids: list[str]) -> None:
    gated = set(gate_ids)
    for message in messages:
        if message.get("role") == "tool":
            assert len(message["content"]) <= LIMITS["tool_result_chars"] + MARKER_ROOM
        if message.get("role") == "assistant":
            assert len(message.get("content") or "") <= LIMITS["reply_chars"] + MARKER_ROOM
            calls = message.get("tool_calls") or []
            assert len(calls) <= LIMITS["tool_calls_per_response"]
            assert sum(c["id"] in gated for c in calls) <= LIMITS["tool_calls_per_response"]
            for call in calls:
                assert 0 < len(call["id"]) <= MAX_CALL_ID_CHARS
                assert len(call["function"]["name"]) <= MAX_TOOL_NAME_CHARS + 40
                arguments = call["function"]["arguments"].encode("utf-8", "surrogatepass")
                assert len(arguments) <= LIMITS["tool_argument_bytes"]


@FUZZ
@given(st.lists(hostile_bodies(), min_size=1, max_size=3))
def test_hostile_model_responses_end_the_turn_with_every_bound_held(
    server: ChatServer, bodies: list[bytes]
) -> None:
    server.answers.clear()
    server.requests.clear()
    for body in bodies:
        server.raw(200, body)
    server.reply("done")
    gate = GateLog()
    errors = ErrorLog()
    logging.getLogger("agentplug").addHandler(errors)
    try:
        result = asyncio.run(_runner(server, gate).run_turn("go", session_key="s1"))
    finally:
        logging.getLogger("agentplug").removeHandler(errors)
    assert result.status in get_args(TurnStatus)
    assert errors.records == [], [r.getMessage() for r in errors.records]
    if result.error is not None:
        assert "\n" not in result.error and len(result.error) < 2000
        # a failure is the provider's own one-line verdict, never a Python error let through
        assert result.error.startswith("openai provider: "), result.error
    if result.reply is not None:
        assert len(result.reply) <= LIMITS["reply_chars"] + MARKER_ROOM
    assert len(set(gate.ids)) == len(gate.ids)
    assert_protocol_valid(result.transcript)
    assert_bounded(result.transcript, gate.ids)
    for request in server.requests:
        sent = request["body"]["messages"]
        assert_protocol_valid([m for m in sent if m["role"] != "system"])
        assert_bounded(sent, gate.ids)
