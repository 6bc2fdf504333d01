"""The model loop: model calls with their hooks, tool calls, finalize revisions.

Per model call: ``llm_input``, then :func:`~agentplug.agent.calls.governed_call` (each
attempt its own ``model_call_started`` / ``model_call_ended``, retries and fallback
models, the turn's deadline and usage limits, the response streamed into the turn's
:class:`~agentplug.agent.streaming.DeltaGate` when someone listens), then
:func:`~agentplug.agent.limits.bound_response` before any hook or the transcript sees
the response, and ``llm_output`` only when the call produced output (text or tool
calls): a failed call never reaches ``llm_output``. The tool calls of a response run
through :func:`~agentplug.agent.toolrun.run_tool_calls` (the gate decides in call order,
approved calls run side by side, results go back in call order); the loop goes on until
the model gives a final reply or ``agent.max_steps`` model calls were made. A final
reply goes to ``before_agent_finalize``; a ``revise`` adds the revision prompt and runs
one more pass, counted per idempotency key (at most 3 per key). A turn with an output
type validates the final reply and asks again on failure
(:mod:`~agentplug.agent.structured`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from agentplug.agent.calls import abortable, candidates, governed_call, scope_of
from agentplug.agent.compaction import note_usage
from agentplug.agent.limits import BoundedResponse, bound_response
from agentplug.agent.providers.base import ModelRequest, ModelResponse, ProviderError
from agentplug.agent.streaming import DeltaGate, delta_mode
from agentplug.agent.structured import OutputInvalid
from agentplug.agent.toolrun import offered_tools, run_tool_calls
from agentplug.agent.transcript import write_message
from agentplug.agent.turn import Turn, TurnFailed
from agentplug.services.toolresults import strip_details

__all__ = ["abortable", "call_model", "model_loop", "provider_messages"]

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


def _gate(turn: Turn) -> DeltaGate | None:
    """The turn's delta gate when someone listens to its text and it may leave early."""
    if turn.on_event is None and turn.runner.on_delta is None:
        return None
    gate: DeltaGate | None = turn._extras.get("gate")
    if gate is None:
        gate = DeltaGate(turn, delta_mode(turn))
        turn._extras["gate"] = gate
    return None if gate.mode == "final" else gate


async def call_model(turn: Turn, messages: list[dict[str, Any]]) -> BoundedResponse:
    """One model call with its hooks, its response held to the limits (see the module
    docstring)."""
    runner = turn.runner
    host = turn.host
    try:
        runner.provider_for(turn.provider_name)
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
    limits = runner.config.limits
    spec = turn.output
    request = ModelRequest(
        model=turn.model,
        messages=messages,
        tools=[tool.schema() for tool in await offered_tools(turn)],
        max_response_bytes=limits.model_response_bytes,
        max_tool_calls=limits.tool_calls_per_response,
        output_schema=spec.schema if spec is not None else None,
        output_name=spec.name if spec is not None else "output",
    )
    try:
        answer = await governed_call(scope_of(turn), candidates(turn), request, sink=_gate(turn))
    except ProviderError as exc:
        raise TurnFailed(str(exc)) from None
    taken = {str(m.get("tool_call_id")) for m in turn.session.messages if m.get("role") == "tool"}
    bounded = bound_response(answer.response, limits, turn.steps, taken)
    response = bounded.response
    if response.has_output:
        await host.hooks.llm_output(
            {
                "run_id": turn.run_id,
                "provider": answer.provider,
                "model": answer.model,
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
            "messages": turn.history(),
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


def _system(turn: Turn) -> str | None:
    """The system prompt the provider reads: the turn's, plus the output instruction."""
    if turn.output is None:
        return turn.system_prompt
    instruction = turn.output.instruction()
    return f"{turn.system_prompt}\n\n{instruction}" if turn.system_prompt else instruction


def _checked_output(turn: Turn, text: str) -> bool:
    """Validate a final answer against the turn's output type; ``False`` when the model
    was asked again."""
    spec = turn.output
    if spec is None:
        return True
    try:
        turn.output_value = spec.validate(text)
    except OutputInvalid as exc:
        asked = turn._extras.get("output_asks", 0)
        if asked >= turn.output_retries:
            raise TurnFailed(
                f"the final answer does not match the output type {spec.name} after "
                f"{asked} re-ask(s) (output_retries): {exc}"
            ) from None
        turn._extras["output_asks"] = asked + 1
        write_message(
            turn.host,
            turn.session,
            {"role": "user", "content": spec.retry_prompt(str(exc)), "revision": True},
            turn.tool_ctx,
        )
        return False
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
        messages = provider_messages(_system(turn), turn.session.messages)
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
            await run_tool_calls(turn, response.tool_calls, bounded.refusals, bounded.note)
            continue
        if await _revise(turn, response.text):
            continue
        if not _checked_output(turn, response.text):
            continue
        turn.reply = response.text or None
        turn.status = "replied" if response.text else "silent"
        return
