"""Structured dispatch logs and OpenTelemetry spans."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from agentplug import PluginHost, hookimpl
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter


class Blocker:
    @hookimpl(priority=5)
    def before_tool_call(self, event: Any) -> dict[str, Any]:
        return {"block": True, "block_reason": "CANARY-secret-reason"}


class Seer:
    seen: list[Any] = []

    @hookimpl
    def message_sending(self, event: Any, ctx: Any) -> None:
        Seer.seen.append(ctx)


def test_debug_records_carry_plugin_hook_status_and_duration(
    caplog: pytest.LogCaptureFixture,
) -> None:
    host = PluginHost()
    host.register(Blocker(), "blocker")
    with caplog.at_level(logging.DEBUG, logger="agentplug.trace"):
        asyncio.run(host.dispatch("before_tool_call", {"tool_name": "exec"}))
    payloads = [r.agentplug for r in caplog.records if hasattr(r, "agentplug")]
    handler = next(p for p in payloads if p["event"] == "handler")
    assert handler["plugin_id"] == "blocker" and handler["hook"] == "before_tool_call"
    assert handler["status"] == "ok" and handler["duration_ms"] >= 0
    dispatch = next(p for p in payloads if p["event"] == "dispatch")
    assert dispatch["outcome"] == {"blocked": True, "blocked_by": "blocker"}


def test_structured_records_never_carry_block_reasons(caplog: pytest.LogCaptureFixture) -> None:
    host = PluginHost()
    host.register(Blocker(), "blocker")
    with caplog.at_level(logging.DEBUG):
        asyncio.run(host.dispatch("before_tool_call", {"tool_name": "exec"}))
    assert "CANARY" not in caplog.text
    assert all("CANARY" not in str(getattr(r, "agentplug", "")) for r in caplog.records)


def _tracing_host() -> tuple[PluginHost, InMemorySpanExporter, Any]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("test")
    host = PluginHost()
    host.enable_tracing(tracer)
    return host, exporter, tracer


def test_tracing_emits_a_span_per_dispatch_and_per_handler() -> None:
    host, exporter, _ = _tracing_host()
    host.register(Blocker(), "blocker")
    asyncio.run(host.dispatch("before_tool_call", {"tool_name": "exec"}))
    spans = {s.name: s for s in exporter.get_finished_spans()}
    parent = spans["agentplug.dispatch before_tool_call"]
    child = spans["agentplug.handler blocker"]
    assert child.parent is not None and child.parent.span_id == parent.context.span_id
    assert child.attributes is not None and child.attributes["agentplug.status"] == "ok"


def test_context_trace_fields_are_filled_from_the_active_span() -> None:
    host, _, tracer = _tracing_host()
    host.register(Seer(), "seer")
    Seer.seen.clear()
    with tracer.start_as_current_span("outer") as outer:
        asyncio.run(host.dispatch("message_sending", {"content": "hi"}))
    (ctx,) = Seer.seen
    assert ctx.trace_id == format(outer.get_span_context().trace_id, "032x")
    assert ctx.span_id == format(outer.get_span_context().span_id, "016x")
    assert ctx.trace["trace_id"] == ctx.trace_id
