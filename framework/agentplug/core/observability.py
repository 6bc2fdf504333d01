"""Structured logs and optional OpenTelemetry spans for dispatches.

Log records (logger ``agentplug.trace``, level DEBUG) carry an ``agentplug`` attribute:
``{"event": "dispatch"|"handler", "hook", "plugin_id", "status", "duration_ms",
"outcome"}``; failures are logged at WARNING by the dispatch engine. Nothing is computed
unless DEBUG is enabled for that logger or tracing is on, so the hot path stays cheap.

Tracing (``pip install agentplug[otel]``, then ``host.enable_tracing()``): one span per
dispatch and one child span per handler (created from the measured timings), and the
hook context's ``trace_id``/``span_id``/``parent_span_id``/``trace`` fields filled from
the active span when the host left them empty.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from agentplug_hookspecs import Context, HookDecl

from agentplug.core.redaction import scrub
from agentplug.core.results import DispatchResult

__all__ = ["Observer", "trace_log"]

trace_log = logging.getLogger("agentplug.trace")

_TRACE_FIELDS = ("trace_id", "span_id", "parent_span_id")
_SAFE_OUTCOME_FIELDS = (
    "blocked",
    "blocked_by",
    "cancelled",
    "cancelled_by",
    "handled",
    "plugin_id",
    "outcome",
    "action",
)


def _summary(outcome: Any) -> dict[str, Any]:
    # Only decision flags and who decided: never content, params or confidential reasons.
    return {f: getattr(outcome, f) for f in _SAFE_OUTCOME_FIELDS if hasattr(outcome, f)}


class Observer:
    """Emits structured records and (optionally) spans for one host."""

    def __init__(self) -> None:
        self.tracer: Any = None

    def enable_tracing(self, tracer: Any = None) -> None:
        """Turn OpenTelemetry spans on (``tracer`` defaults to the global provider's)."""
        try:
            from opentelemetry import trace
        except ImportError as exc:  # pragma: no cover - depends on the optional extra
            raise RuntimeError(
                "tracing needs OpenTelemetry: pip install 'agentplug[otel]'"
            ) from exc
        self.tracer = tracer or trace.get_tracer("agentplug")

    @property
    def active(self) -> bool:
        """Whether a dispatch needs observing at all (cheap check)."""
        return self.tracer is not None or trace_log.isEnabledFor(logging.DEBUG)

    def fill_context(self, ctx: Context) -> Context:
        """Fill empty trace fields of ``ctx`` from the active span."""
        if self.tracer is None:
            return ctx
        from opentelemetry import trace

        span_ctx = trace.get_current_span().get_span_context()
        if not span_ctx.is_valid:
            return ctx
        fields = type(ctx).model_fields
        updates: dict[str, Any] = {}
        if "trace_id" in fields and getattr(ctx, "trace_id", None) is None:
            updates["trace_id"] = format(span_ctx.trace_id, "032x")
        if "span_id" in fields and getattr(ctx, "span_id", None) is None:
            updates["span_id"] = format(span_ctx.span_id, "016x")
        parent = getattr(trace.get_current_span(), "parent", None)
        if "parent_span_id" in fields and parent is not None and ctx.parent_span_id is None:  # type: ignore[attr-defined]
            updates["parent_span_id"] = format(parent.span_id, "016x")
        if "trace" in fields and getattr(ctx, "trace", None) is None and updates:
            updates["trace"] = {k: updates[k] for k in _TRACE_FIELDS if k in updates}
        return ctx.model_copy(update=updates) if updates else ctx

    def record(
        self, decl: HookDecl, result: DispatchResult[Any], started_ns: int, ended_ns: int
    ) -> None:
        """Emit the structured records / spans of one finished dispatch."""
        duration_ms = (ended_ns - started_ns) / 1e6
        summary = _summary(result.outcome)
        if trace_log.isEnabledFor(logging.DEBUG):
            for handler, status, seconds, error in result.records:
                trace_log.debug(
                    "hook %s plugin %s %s in %.3f ms",
                    decl.name,
                    handler.plugin_id,
                    status.value,
                    seconds * 1000,
                    extra={
                        "agentplug": {
                            "event": "handler",
                            "hook": decl.name,
                            "plugin_id": handler.plugin_id,
                            "status": status.value,
                            "duration_ms": round(seconds * 1000, 3),
                            "error": scrub(error) if error else error,
                        }
                    },
                )
            trace_log.debug(
                "hook %s dispatched to %d handler(s) in %.3f ms",
                decl.name,
                len(result.records),
                duration_ms,
                extra={
                    "agentplug": {
                        "event": "dispatch",
                        "hook": decl.name,
                        "handlers": len(result.records),
                        "duration_ms": round(duration_ms, 3),
                        "outcome": summary,
                    }
                },
            )
        if self.tracer is not None:
            self._spans(decl, result, started_ns, ended_ns, summary)

    def _spans(
        self,
        decl: HookDecl,
        result: DispatchResult[Any],
        started_ns: int,
        ended_ns: int,
        summary: dict[str, Any],
    ) -> None:
        from opentelemetry import trace

        # perf_counter_ns -> wall-clock ns for span timestamps.
        offset = time.time_ns() - time.perf_counter_ns()
        parent = self.tracer.start_span(
            f"agentplug.dispatch {decl.name}", start_time=started_ns + offset
        )
        parent.set_attribute("agentplug.hook", decl.name)
        parent.set_attribute("agentplug.kind", decl.kind.value)
        for key, value in summary.items():
            if value is not None:
                parent.set_attribute(f"agentplug.outcome.{key}", value)
        cursor = started_ns
        with trace.use_span(parent, end_on_exit=False):
            for handler, status, seconds, error in result.records:
                span = self.tracer.start_span(
                    f"agentplug.handler {handler.plugin_id}", start_time=cursor + offset
                )
                span.set_attribute("agentplug.hook", handler.hook)
                span.set_attribute("agentplug.plugin_id", handler.plugin_id)
                span.set_attribute("agentplug.status", status.value)
                if error:
                    span.set_attribute("agentplug.error", scrub(error))
                span_end = cursor + int(seconds * 1e9)
                span.end(end_time=span_end + offset)
                if not decl.concurrent:
                    cursor = span_end
        parent.end(end_time=ended_ns + offset)
