"""The runner's side of tool calls: which tools a turn offers, and the calls of one model
response through the gateway's :class:`~agentplug.agent.pipeline.ToolCallPipeline`.

The pipeline does the work (validate, the gate, the tool, ``after_tool_call``, the
persist hooks, shaping); this module finds the tool the model named (``agent.tools``
exclusions hold here too: a tool never offered is not run because the model guessed its
name), turns the runner's refusals (``agent.limits``, arguments that are not a JSON
object) into the pipeline's, and appends the resulting tool messages to the transcript.

Several calls in one response (:func:`run_tool_calls`): the gate decides them one after
another in call order (an approval asked for the first is answered before the second
is looked at), the allowed ones then run side by side, at most
``agent.tools.concurrency`` at a time (a synchronous Python tool holds the event loop
while it runs, so only ``async`` tools really overlap), and the results go back in call
order. A deny, a refusal or a failure answers its own call and stops no other.
"""

from __future__ import annotations

import asyncio
from typing import Any

from agentplug.agent import spans
from agentplug.agent.pipeline import CallIds, PendingCall, ToolRequest
from agentplug.agent.providers.base import ToolCall
from agentplug.agent.streaming import ToolCallRequested, ToolDecision, ToolResult, emit
from agentplug.agent.tools import Tool, ToolCallContext, ToolOutput
from agentplug.agent.turn import Turn
from agentplug.agent.usage import UsageLimitReached

__all__ = ["MAX_REPLY_MEDIA", "offered_tools", "reply_media", "run_tool_call", "run_tool_calls"]

MAX_REPLY_MEDIA = 32
"""Most media one reply carries: the first ones the turn's tools returned are kept."""


async def offered_tools(turn: Turn) -> list[Tool]:
    """The tools offered in ``turn``'s next model call: ``agent.tools`` applied, and
    actions whose ``validate()`` fails for the turn's message left out."""
    call = ToolCallContext(
        run_id=turn.run_id, session_key=turn.session.session_key, user_text=turn.prompt
    )
    policy = turn.runner.tool_policy
    return [t for t in await turn.runner.tools.offered(call) if not policy.excludes(t.name)]


def _tool(turn: Turn, name: str) -> Tool | None:
    if turn.runner.tool_policy.excludes(name):
        return None
    return turn.runner.tools.get(name)


def _refusal(turn: Turn, call: ToolCall, tool: Tool | None) -> str | None:
    runner = turn.runner
    if tool is None:
        offered = [t for t in runner.tools.all() if not runner.tool_policy.excludes(t.name)]
        names = ", ".join(t.name for t in offered) or "none"
        return f"unknown tool {call.name!r}; available tools: {names}"
    if call.raw_arguments is not None:
        return (
            f"the arguments of {call.name!r} are not a JSON object; call it again with a "
            "JSON object matching its schema"
        )
    return None


def _request(
    turn: Turn, call: ToolCall, tool: Tool | None, refusal: str | None, note: str | None
) -> ToolRequest:
    if refusal is None:
        refusal = _refusal(turn, call, tool)
    return ToolRequest(
        call.name,
        dict(call.arguments),
        CallIds(
            run_id=turn.run_id,
            session_key=turn.session.session_key,
            session_id=turn.session.session_id,
            tool_call_id=call.id,
            agent_id=turn.tool_ctx.agent_id,
            channel=turn.tool_ctx.channel_id,
        ),
        user_text=turn.prompt,
        signal=turn.signal,
        refusal=refusal,
        note=note,
        context=turn.tool_ctx,
    )


async def run_tool_call(
    turn: Turn, call: ToolCall, *, refusal: str | None = None, note: str | None = None
) -> dict[str, Any]:
    """Run one call (or answer it with ``refusal`` without running it); append the tool
    message the model will read next to the transcript and return it."""
    tool = _tool(turn, call.name) if refusal is None else None
    request = _request(turn, call, tool, refusal, note)
    done = await turn.runner.pipeline.run(request, tool, checkpoint=turn.check_aborted)
    assert done.message is not None
    turn.session.messages.append(done.message)
    _collect_media(turn, done.message)
    return done.message


def _collect_media(turn: Turn, message: dict[str, Any]) -> None:
    """Keep the attachments of a tool result as the transcript kept it (a result a plugin
    withheld or rewrote without them brings none), up to :data:`MAX_REPLY_MEDIA`."""
    details = message.get("details")
    found = details.get("attachments") if isinstance(details, dict) else None
    if not isinstance(found, list):
        return
    room = MAX_REPLY_MEDIA - len(turn.media)
    for item in found[: max(0, room)]:
        if isinstance(item, dict):  # unset fields of the attachment are left out
            turn.media.append({k: v for k, v in item.items() if v is not None})


def reply_media(media: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The reply payload fields that carry ``media`` (``None`` when there is none)."""
    return {"media": list(media[:MAX_REPLY_MEDIA])} if media else None


async def _execute_all(turn: Turn, pendings: list[PendingCall]) -> None:
    """Run the allowed calls side by side (at most ``agent.tools.concurrency`` at once);
    one call's failure is its own result and cancels no other."""
    pipeline = turn.runner.pipeline
    limit = turn.runner.config.tools.concurrency
    if limit <= 1 or sum(p.will_run for p in pendings) <= 1:
        for pending in pendings:
            await pipeline.execute(pending)
        return
    slots = asyncio.Semaphore(limit)

    async def one(pending: PendingCall) -> None:
        async with slots:
            await pipeline.execute(pending)

    outcomes = await asyncio.gather(*(one(p) for p in pendings), return_exceptions=True)
    for pending, outcome in zip(pendings, outcomes, strict=True):
        if isinstance(outcome, Exception):  # a bug past the pipeline's own guards
            failed = ToolOutput(
                f"tool {pending.request.tool_name!r} failed: {type(outcome).__name__}",
                is_error=True,
            )
            pending.output = pending.output or failed
            pending.shaped = pending.shaped or failed
        elif isinstance(outcome, BaseException):
            raise outcome


async def run_tool_calls(
    turn: Turn, calls: list[ToolCall], refusals: list[str | None], note: str | None
) -> None:
    """Answer the tool calls of one model response: the gate decides each in call order
    (``agent.limits.tool_calls_per_turn`` refuses the calls past it), the allowed ones
    run side by side, the results enter the transcript in call order. Raises
    :class:`~agentplug.agent.usage.UsageLimitReached` after answering every call when the
    tool-call limit refused some."""
    pipeline = turn.runner.pipeline
    ledger = turn.ledger
    left = ledger.tool_calls_left()
    over = False
    pendings: list[PendingCall] = []
    last = len(calls) - 1
    try:
        for index, (call, refusal) in enumerate(zip(calls, refusals, strict=True)):
            if turn.on_event is not None:
                await emit(
                    turn, ToolCallRequested(call.id, call.name, dict(call.arguments), turn.steps)
                )
            if refusal is None and left is not None and index >= left:
                refusal = "tool call refused: " + ledger.tool_limit_message().removeprefix(
                    "stopped: "
                )
                over = True
            tool = _tool(turn, call.name) if refusal is None else None
            request = _request(turn, call, tool, refusal, note if index == last else None)
            pending = await pipeline.decide(request, tool, checkpoint=turn.check_aborted)
            pendings.append(pending)
            ledger.tool_calls += 1
            if turn.on_event is not None:
                await emit(turn, _decision(call, pending))
        await _execute_all(turn, pendings)
        for call, pending in zip(calls, pendings, strict=True):
            done = pipeline.persist(pending)
            assert done.message is not None
            turn.session.messages.append(done.message)
            _collect_media(turn, done.message)
            if turn.on_event is not None:
                await emit(
                    turn, ToolResult(call.id, call.name, done.output.content, done.output.is_error)
                )
    finally:
        for pending in pendings:  # a cancelled turn leaves no span open
            spans.end_span(pending.span, "cancelled")
            pending.span = None
    turn.check_aborted()
    if over:
        raise UsageLimitReached(ledger.tool_limit_message())


def _decision(call: ToolCall, pending: PendingCall) -> ToolDecision:
    decision = pending.decision
    return ToolDecision(
        call.id,
        call.name,
        allowed=pending.will_run,
        reason=None if pending.will_run or pending.output is None else pending.output.content,
        blocked_by=decision.blocked_by if decision is not None else None,
        approval=decision.approval_resolution if decision is not None else None,
    )
