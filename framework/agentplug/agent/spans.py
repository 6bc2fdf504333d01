"""OpenTelemetry spans of a turn with the GenAI semantic-convention names.

With tracing on (``pip install 'agentplug[otel]'``, then ``host.enable_tracing()``) a turn
is one ``invoke_agent {agent}`` span; each model call (every attempt, compaction and the
language-aware action flow's calls included) is a ``chat {model}`` span and each tool
call an ``execute_tool {tool}`` span under it, and the hook dispatch spans of the turn
nest under it too. The attribute names are those of the GenAI semantic conventions
(development status; the set emitted is the latest, ``gen_ai.provider.name`` rather
than the older ``gen_ai.system``):

- every span: ``gen_ai.operation.name`` (``invoke_agent``, ``chat``, ``execute_tool``),
  ``gen_ai.conversation.id`` (the session id, never the session key, which may name a
  user), ``error.type`` and an error status when it failed;
- ``invoke_agent``: ``gen_ai.agent.name``, and the turn's ``gen_ai.usage.input_tokens`` /
  ``gen_ai.usage.output_tokens``;
- ``chat``: ``gen_ai.provider.name``, ``gen_ai.request.model``, ``gen_ai.request.stream``,
  ``gen_ai.output.type`` (``json`` for a structured-output turn), then
  ``gen_ai.response.model``, ``gen_ai.response.finish_reasons``,
  ``gen_ai.usage.input_tokens``, ``gen_ai.usage.output_tokens`` (plus
  ``agentplug.usage.estimated`` when they are an estimate and ``agentplug.purpose``);
- ``execute_tool``: ``gen_ai.tool.name``, ``gen_ai.tool.call.id``, ``gen_ai.tool.type``
  (``function``, or ``extension`` for a tool source's, an MCP server's); a blocked,
  refused or failed call has ``error.type`` ``blocked``, ``refused`` or ``tool_error``.

No content is recorded: no prompt, reply, tool arguments or results, and no provider
request id. Without a tracer every function here is a cheap no-op.
"""

from __future__ import annotations

from typing import Any

from agentplug.agent.providers.base import ModelResponse
from agentplug.agent.usage import TokenUsage

__all__ = [
    "end_span",
    "model_span",
    "set_response",
    "set_usage",
    "start_agent_span",
    "tool_span",
    "tracer_of",
]


def tracer_of(host: Any) -> Any:
    """The host's OpenTelemetry tracer (``None`` when tracing is off)."""
    observer = getattr(host, "observer", None)
    return getattr(observer, "tracer", None)


def _kind(name: str) -> Any:
    from opentelemetry.trace import SpanKind

    kind: Any = getattr(SpanKind, name)
    return kind


def start_agent_span(tracer: Any, agent: str, conversation_id: str | None) -> tuple[Any, Any]:
    """An ``invoke_agent`` span made current; returns ``(span, token)`` for
    :func:`end_span` (``(None, None)`` without a tracer)."""
    if tracer is None:
        return None, None
    from opentelemetry import context, trace

    span = tracer.start_span(
        f"invoke_agent {agent}",
        kind=_kind("INTERNAL"),
        attributes={
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": agent,
            **({"gen_ai.conversation.id": conversation_id} if conversation_id else {}),
        },
    )
    token = context.attach(trace.set_span_in_context(span))
    return span, token


def model_span(
    tracer: Any,
    provider: str,
    model: str,
    *,
    conversation_id: str | None,
    stream: bool,
    json_output: bool,
    purpose: str,
    in_process: bool,
) -> Any:
    """A ``chat {model}`` span (not made current: hooks dispatched during the call stay
    siblings); ``None`` without a tracer."""
    if tracer is None:
        return None
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": provider,
        "gen_ai.request.model": model,
        "gen_ai.request.stream": stream,
        "agentplug.purpose": purpose,
    }
    if conversation_id:
        attributes["gen_ai.conversation.id"] = conversation_id
    if json_output:
        attributes["gen_ai.output.type"] = "json"
    return tracer.start_span(
        f"chat {model}",
        kind=_kind("INTERNAL" if in_process else "CLIENT"),
        attributes=attributes,
    )


def set_usage(span: Any, usage: TokenUsage | None) -> None:
    """The token counts on ``span``."""
    if span is None or usage is None:
        return
    span.set_attribute("gen_ai.usage.input_tokens", usage.input_tokens)
    span.set_attribute("gen_ai.usage.output_tokens", usage.output_tokens)
    if usage.estimated:
        span.set_attribute("agentplug.usage.estimated", True)


def set_response(span: Any, response: ModelResponse, usage: TokenUsage | None) -> None:
    """What a ``chat`` span records of a response (never its content)."""
    if span is None:
        return
    if response.model:
        span.set_attribute("gen_ai.response.model", response.model)
    if response.finish_reason:
        span.set_attribute("gen_ai.response.finish_reasons", [response.finish_reason])
    set_usage(span, usage)


def tool_span(tracer: Any, name: str, call_id: str | None, source: str | None) -> Any:
    """An ``execute_tool {name}`` span; ``None`` without a tracer. ``source`` is the
    tool's (:attr:`~agentplug.agent.tools.Tool.source`): a host, Python or action tool is
    a ``function``, a tool source's (an MCP server's) an ``extension``."""
    if tracer is None:
        return None
    local = source in (None, "host", "python", "action", "framework")
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": name,
        "gen_ai.tool.type": "function" if local else "extension",
    }
    if call_id:
        attributes["gen_ai.tool.call.id"] = call_id
    return tracer.start_span(f"execute_tool {name}", kind=_kind("INTERNAL"), attributes=attributes)


def end_span(span: Any, error_type: str | None = None, token: Any = None) -> None:
    """End ``span``, with ``error.type`` and an error status when ``error_type`` is set;
    ``token`` (from :func:`start_agent_span`) restores the context that was current."""
    if span is None:
        return
    if error_type is not None:
        from opentelemetry.trace import Status, StatusCode

        span.set_attribute("error.type", error_type)
        span.set_status(Status(StatusCode.ERROR))
    span.end()
    if token is not None:
        from opentelemetry import context

        context.detach(token)
