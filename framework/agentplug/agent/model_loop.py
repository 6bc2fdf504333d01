"""The model loop: provider calls with their hooks, tool calls, finalize revisions.

Per attempt: ``llm_input``, ``model_call_started``, the provider call,
``model_call_ended`` (sanitised fields only, the request id as a bounded keyed hash),
and ``llm_output`` only when the attempt produced output (text or tool calls): a failed
attempt never reaches ``llm_output``. Each call is bounded by ``agent.limits`` (its
duration, the bytes read, then :func:`~agentplug.agent.limits.bound_response` before any
hook or the transcript sees the response). Tool calls run through
:func:`~agentplug.agent.toolrun.run_tool_call`; the loop goes on until the model gives a
final reply or ``agent.max_steps`` model calls were made. A final reply goes to
``before_agent_finalize``; a ``revise`` adds the revision prompt and runs one more pass,
counted per idempotency key (at most 3 per key).
"""

from __future__ import annotations

import asyncio
import inspect
import json
import time
import uuid
from collections.abc import Awaitable, Iterable
from typing import Any, TypeVar

from agentplug.agent.compaction import note_usage
from agentplug.agent.limits import BoundedResponse, bound_response, within_deadline
from agentplug.agent.providers.base import (
    ModelDelta,
    ModelProvider,
    ModelRequest,
    ModelResponse,
    ProviderError,
)
from agentplug.agent.toolrun import offered_tools, run_tool_call
from agentplug.agent.transcript import write_message
from agentplug.agent.turn import Turn, TurnCancelled, TurnFailed
from agentplug.core.redaction import scrub
from agentplug.services.modelcalls import upstream_request_id_hash
from agentplug.services.toolresults import strip_details

__all__ = ["call_model", "model_loop", "provider_messages"]

T = TypeVar("T")
_WIRE_KEYS = ("role", "content", "tool_calls", "tool_call_id", "name")


def provider_messages(
    system: str | None, history: Iterable[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The messages a provider sees: details stripped, only protocol keys kept."""
    out: list[dict[str, Any]] = []
    if system:
        out.append({"role": "system", "content": system})
    for message in strip_details(history):
        out.append({k: message[k] for k in _WIRE_KEYS if k in message})
    return out


async def abortable(turn: Turn, awaitable: Awaitable[T]) -> T:
    """Await ``awaitable`` unless the turn's signal fires first (then it is cancelled)."""
    task = asyncio.ensure_future(awaitable)
    if turn.signal.aborted:
        task.cancel()
        raise TurnCancelled(str(turn.signal.reason))
    waiter = asyncio.ensure_future(turn.signal.wait())
    try:
        done, _ = await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        waiter.cancel()
    if task not in done:
        task.cancel()
        raise TurnCancelled(str(turn.signal.reason or "cancelled"))
    return task.result()


def _telemetry(turn: Turn, call_id: str, transport: str) -> dict[str, Any]:
    return {
        "run_id": turn.run_id,
        "call_id": call_id,
        "provider": turn.provider_name,
        "model": turn.model,
        "api": "chat.completions",
        "transport": transport,
        "context_token_budget": turn.ctx.context_token_budget,
        "context_window_source": turn.ctx.context_window_source,
        "context_window_reference_tokens": turn.ctx.context_window_reference_tokens,
    }


async def _complete(turn: Turn, provider: ModelProvider, request: ModelRequest) -> ModelResponse:
    """``complete``, or ``stream`` forwarding deltas when the host wants them."""
    on_delta = turn.runner.on_delta
    stream = getattr(provider, "stream", None)
    if on_delta is None or not callable(stream):
        return await provider.complete(request)
    final: ModelResponse | None = None
    room = turn.runner.config.limits.reply_chars  # deltas past the reply limit are not shown
    async for item in stream(request):
        if isinstance(item, ModelDelta):
            if room <= 0:
                continue
            text = scrub(item.text)[:room]
            room -= len(text)
            returned = on_delta(text)
            if inspect.isawaitable(returned):
                await returned
        elif isinstance(item, ModelResponse):
            final = item
    if final is None:
        raise ProviderError(
            f"provider {turn.provider_name!r} streamed no final response", kind="malformed"
        )
    return final


async def call_model(turn: Turn, messages: list[dict[str, Any]]) -> BoundedResponse:
    """One attempt with its hooks, its response held to the limits (see the module
    docstring)."""
    runner = turn.runner
    host = turn.host
    try:
        provider = runner.provider_for(turn.provider_name)
    except ProviderError as exc:
        raise TurnFailed(str(exc)) from None
    history = [m for m in messages if m.get("role") != "system"]
    await host.hooks.llm_input(
        {
            "run_id": turn.run_id,
            "provider": turn.provider_name,
            "model": turn.model,
            "system_prompt": turn.system_prompt,
            "prompt": turn.user_prompt,
            "history": history,
        },
        turn.ctx,
    )
    call_id = f"call-{uuid.uuid4().hex[:12]}"
    transport = "http" if turn.provider_name != "scripted" else "in-process"
    base = _telemetry(turn, call_id, transport)
    await host.hooks.model_call_started(base, turn.ctx)
    limits = runner.config.limits
    request = ModelRequest(
        model=turn.model,
        messages=messages,
        tools=[tool.schema() for tool in await offered_tools(turn)],
        max_response_bytes=limits.model_response_bytes,
        max_tool_calls=limits.tool_calls_per_response,
    )
    started = time.perf_counter()
    outcome, error = "ok", None
    response: ModelResponse | None = None
    what = f"model call to {turn.provider_name}/{turn.model}"
    try:
        response = await abortable(
            turn, within_deadline(_complete(turn, provider, request), limits, what)
        )
    except TurnCancelled:
        outcome = "cancelled"
        raise
    except ProviderError as exc:
        outcome, error = "error", str(exc)
    except Exception as exc:  # a provider bug is a failed attempt, never a crashed host
        outcome, error = (
            "error",
            f"provider {turn.provider_name!r} raised {type(exc).__name__}: {exc}",
        )
    finally:
        ended = dict(base, duration_ms=(time.perf_counter() - started) * 1000, outcome=outcome)
        if response is not None and response.request_id:
            ended["upstream_request_id_hash"] = upstream_request_id_hash(response.request_id)
        await host.hooks.model_call_ended(ended, turn.ctx)
        turn.trace.add(
            "model",
            f"{turn.provider_name}/{turn.model}",
            ended["duration_ms"],
            began=started,
            outcome=outcome,
        )
    if error is not None or response is None:
        raise TurnFailed(error or "the provider returned nothing")
    taken = {str(m.get("tool_call_id")) for m in turn.session.messages if m.get("role") == "tool"}
    bounded = bound_response(response, limits, turn.steps, taken)
    response = bounded.response
    if response.has_output:
        await host.hooks.llm_output(
            {
                "run_id": turn.run_id,
                "provider": turn.provider_name,
                "model": turn.model,
                "output": {
                    "text": response.text,
                    "tool_calls": [
                        {"id": c.id, "name": c.name, "arguments": dict(c.arguments)}
                        for c in response.tool_calls
                    ],
                },
                "usage": response.usage,
                "context_token_budget": turn.ctx.context_token_budget,
            },
            turn.ctx,
        )
    return bounded


def _assistant_message(response: ModelResponse) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": response.text}
    if response.tool_calls:
        message["tool_calls"] = [
            {
                "id": c.id,
                "type": "function",
                "function": {"name": c.name, "arguments": json.dumps(dict(c.arguments))},
            }
            for c in response.tool_calls
        ]
    return message


async def _revise(turn: Turn, reply: str) -> bool:
    """``before_agent_finalize``; ``True`` when one more pass was granted."""
    result = await turn.host.hooks.before_agent_finalize(
        {
            "reply": reply,
            "messages": strip_details(turn.session.messages),
            "attempt": turn.finalize.revisions,
            "run_id": turn.run_id,
        },
        turn.ctx,
    )
    outcome = result.outcome
    if not turn.finalize.should_revise(outcome):
        return False
    prompt = turn.finalize.revision_prompt(outcome) or "Revise your previous answer."
    write_message(
        turn.host,
        turn.session,
        {"role": "user", "content": prompt, "revision": True},
        turn.tool_ctx,
    )
    return True


async def model_loop(turn: Turn) -> None:
    """Run the model until a final reply (or the step limit)."""
    runner = turn.runner
    limit = runner.config.max_steps
    while True:
        turn.check_aborted()
        if turn.steps >= limit:
            turn.status = "step_limit"
            turn.error = (
                f"stopped after {limit} model calls (agent.max_steps) without a final reply"
            )
            return
        await runner.maybe_compact(turn)
        messages = provider_messages(turn.system_prompt, turn.session.messages)
        bounded = await call_model(turn, messages)
        response = bounded.response
        turn.steps += 1
        assistant = _assistant_message(response)
        written = write_message(turn.host, turn.session, assistant, turn.tool_ctx)
        if written is None and response.tool_calls:
            # The protocol needs the call ids before their results; keep the bare calls.
            turn.session.messages.append(
                {"role": "assistant", "content": "", "tool_calls": assistant["tool_calls"]}
            )
        note_usage(turn.session, response.usage)  # the provider's count, for compaction
        if response.tool_calls:
            last = len(response.tool_calls) - 1
            for index, (call, refusal) in enumerate(
                zip(response.tool_calls, bounded.refusals, strict=True)
            ):
                note = bounded.note if index == last else None
                await run_tool_call(turn, call, refusal=refusal, note=note)
                turn.check_aborted()
            continue
        if await _revise(turn, response.text):
            continue
        turn.reply = response.text or None
        turn.status = "replied" if response.text else "silent"
        return
