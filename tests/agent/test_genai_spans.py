"""OpenTelemetry spans of a turn with the GenAI semantic-convention attribute names
(agentplug.agent.spans): ``invoke_agent``, ``chat`` per model call (every attempt),
``execute_tool`` per tool call, failed, blocked and refused calls included, and never any
content."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from tests.agent.chat_server import ChatServer, chat_server
from tests.agent.conftest import make_runner, on, run


def _traced(responses: list[Any] | None = None, **kwargs: Any) -> tuple[Any, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    runner, _ = make_runner(responses, **kwargs)
    runner.host.enable_tracing(provider.get_tracer("test"))
    return runner, exporter


def _named(exporter: InMemorySpanExporter, prefix: str) -> list[ReadableSpan]:
    return [s for s in exporter.get_finished_spans() if s.name.startswith(prefix)]


def _calls(*names: str) -> dict[str, Any]:
    return {
        "text": "",
        "tool_calls": [{"id": f"c{i}", "name": n, "arguments": {}} for i, n in enumerate(names)],
    }


def test_a_turn_is_an_invoke_agent_span_with_chat_and_tool_spans_under_it() -> None:
    runner, exporter = _traced([_calls("ok_tool"), "done"])
    runner.tools.add_python(lambda: "fine", name="ok_tool", description="O.")
    result = run(runner.run_turn("hi", session_key="s1"))
    (agent,) = _named(exporter, "invoke_agent")
    chats, tools = _named(exporter, "chat "), _named(exporter, "execute_tool ")
    assert agent.name == "invoke_agent main" and len(chats) == 2 and len(tools) == 1
    assert agent.attributes is not None
    assert agent.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert agent.attributes["gen_ai.agent.name"] == "main"
    assert agent.attributes["gen_ai.usage.output_tokens"] == result.usage.output_tokens
    for child in (*chats, *tools):
        assert child.parent is not None and child.parent.span_id == agent.context.span_id
    hooks = _named(exporter, "agentplug.dispatch")
    assert hooks and all(h.context.trace_id == agent.context.trace_id for h in hooks)


def test_a_chat_span_has_the_genai_request_response_and_usage_attributes(
    server: ChatServer,
) -> None:
    server.stream_reply("hello", usage={"prompt_tokens": 12, "completion_tokens": 3})
    settings = {
        "model": "openai/test-model",
        "providers": {"openai": {"base_url": server.base_url}},
    }
    runner, exporter = _traced(agent=settings)

    async def go() -> None:
        async for _event in runner.stream("hi", session_key="s1"):
            pass

    run(go())
    (chat,) = _named(exporter, "chat ")
    attributes = dict(chat.attributes or {})
    assert chat.name == "chat test-model" and chat.kind == SpanKind.CLIENT
    assert attributes["gen_ai.operation.name"] == "chat"
    assert attributes["gen_ai.provider.name"] == "openai"
    assert attributes["gen_ai.request.model"] == "test-model"
    assert attributes["gen_ai.response.model"] == "test-model-2024"
    assert attributes["gen_ai.request.stream"] is True
    assert tuple(attributes["gen_ai.response.finish_reasons"]) == ("stop",)
    assert attributes["gen_ai.usage.input_tokens"] == 12
    assert attributes["gen_ai.usage.output_tokens"] == 3
    assert isinstance(attributes["gen_ai.conversation.id"], str)
    assert chat.status.status_code != StatusCode.ERROR


def test_every_attempt_is_its_own_chat_span_and_a_failed_one_has_an_error_type() -> None:
    runner, exporter = _traced(
        [{"error": "busy", "status": 503}, "ok"],
        agent={"retry": {"initial_backoff_s": 0, "max_backoff_s": 0}},
    )
    run(runner.run_turn("hi", session_key="s1"))
    failed, ok = _named(exporter, "chat ")
    assert failed.status.status_code == StatusCode.ERROR
    assert (failed.attributes or {})["error.type"] == "503"
    assert "error.type" not in (ok.attributes or {})
    assert ok.kind == SpanKind.INTERNAL  # the scripted provider runs in-process


def test_failed_blocked_and_refused_tool_calls_are_spans_with_an_error_type() -> None:
    def block(event: Any, ctx: Any) -> dict[str, Any] | None:
        return {"block": True, "block_reason": "no"} if event.tool_name == "blocked" else None

    def broken() -> str:
        raise RuntimeError("boom")

    runner, exporter = _traced(
        [_calls("fine", "broken", "blocked", "unknown"), "done"],
        plugins={"b": on("before_tool_call", block)},
    )
    runner.tools.add_python(lambda: "ok", name="fine", description="F.")
    runner.tools.add_python(broken, name="broken", description="B.")
    runner.tools.add_python(lambda: "ok", name="blocked", description="B.")
    run(runner.run_turn("hi", session_key="s1"))
    spans = {s.name: s for s in _named(exporter, "execute_tool ")}
    assert set(spans) == {
        "execute_tool fine", "execute_tool broken", "execute_tool blocked", "execute_tool unknown",
    }  # fmt: skip
    errors = {name: (s.attributes or {}).get("error.type") for name, s in spans.items()}
    assert errors == {
        "execute_tool fine": None,
        "execute_tool broken": "tool_error",
        "execute_tool blocked": "blocked",
        "execute_tool unknown": "refused",
    }
    fine = spans["execute_tool fine"].attributes or {}
    assert fine["gen_ai.operation.name"] == "execute_tool"
    assert fine["gen_ai.tool.name"] == "fine" and fine["gen_ai.tool.call.id"] == "c0"
    assert fine["gen_ai.tool.type"] == "function"


def test_no_span_records_content() -> None:
    runner, exporter = _traced([_calls("echo"), "the secret reply text"])
    runner.tools.add_python(lambda: "the tool result text", name="echo", description="E.")
    run(runner.run_turn("the user's private words", session_key="agent:main:chat:alice"))
    dumped = json.dumps([dict(s.attributes or {}) for s in exporter.get_finished_spans()])
    for text in ("secret reply", "tool result", "private words", "alice"):
        assert text not in dumped


@pytest.fixture
def server() -> Iterator[ChatServer]:
    with chat_server() as srv:
        yield srv
