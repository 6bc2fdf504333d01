"""One tool call of the model, through the one gate path.

``ToolCallGate.check`` (trusted policies, ``before_tool_call``, ``resolve_exec_env`` and
its filter for exec tools, approvals with durable grants), then the tool, then
``after_tool_call``, then ``tool_result_persist`` + ``before_message_write`` for the
transcript write (:func:`~agentplug.services.toolresults.persist_tool_result`, which also
bounds ``details``). The result always answers the model's call id: a blocked call, an
unknown tool, a failing tool or a call refused by ``agent.limits`` (which never reaches
the gate) is an error result the model can read, never a crash. The content the model
reads is cut at ``agent.limits.tool_result_chars``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import Any

from agentplug.agent.limits import cut_tool_result
from agentplug.agent.providers.base import ToolCall
from agentplug.agent.tools import Tool, ToolCallContext, ToolOutput
from agentplug.agent.turn import Turn
from agentplug.core.redaction import scrub, scrub_data
from agentplug.services.toolresults import persist_tool_result

__all__ = ["offered_tools", "run_tool_call"]

log = logging.getLogger("agentplug.agent")

WITHHELD = "(this tool result was withheld from the transcript by a plugin)"


async def offered_tools(turn: Turn) -> list[Tool]:
    """The tools offered in ``turn``'s next model call: ``agent.tools`` applied, and
    actions whose ``validate()`` fails for the turn's message left out."""
    call = ToolCallContext(
        run_id=turn.run_id, session_key=turn.session.session_key, user_text=turn.prompt
    )
    policy = turn.runner.tool_policy
    return [t for t in await turn.runner.tools.offered(call) if not policy.excludes(t.name)]


def _tool(turn: Turn, name: str) -> Tool | None:
    """The tool the model may call as ``name`` (``agent.tools.exclude`` holds here too:
    a tool that was never offered is not run because the model guessed its name)."""
    if turn.runner.tool_policy.excludes(name):
        return None
    return turn.runner.tools.get(name)


async def _execute(turn: Turn, call: ToolCall) -> tuple[ToolOutput, dict[str, Any]]:
    """Gate and run ``call``; returns the output and the parameters it ran with."""
    runner = turn.runner
    tool = _tool(turn, call.name)
    params = dict(call.arguments)
    if tool is None:
        offered = [t for t in runner.tools.all() if not runner.tool_policy.excludes(t.name)]
        names = ", ".join(t.name for t in offered) or "none"
        return ToolOutput(
            f"unknown tool {call.name!r}; available tools: {names}", is_error=True
        ), params
    if call.raw_arguments is not None:
        return (
            ToolOutput(
                f"the arguments of {call.name!r} are not a JSON object; call it again with "
                "a JSON object matching its schema",
                is_error=True,
            ),
            params,
        )
    event = {
        "tool_name": call.name,
        "params": params,
        "tool_kind": tool.kind,
        "run_id": turn.run_id,
        "tool_call_id": call.id,
    }
    started = time.perf_counter()
    decision = await runner.gate.check(
        event, turn.tool_ctx.model_copy(update={"tool_kind": tool.kind}), approval=tool.approval
    )
    env = decision.metadata.get("exec_env")  # key names only: values may be secrets
    turn.trace.add(
        "tool",
        call.name,
        (time.perf_counter() - started) * 1000,
        allowed=decision.allowed,
        blocked_by=decision.blocked_by,
        blocked_by_policy=decision.blocked_by_policy,
        approval=decision.approval_resolution,
        approval_requested_by=decision.approval.plugin_id if decision.approval else None,
        approval_by=decision.approval_by,
        env_kept=sorted(env.get("kept", {})) if env else None,
        env_dropped=[d["key"] for d in env.get("dropped", [])] if env else None,
    )
    turn.check_aborted()
    if not decision.allowed:
        return ToolOutput(f"tool call blocked: {decision.reason}", is_error=True), dict(
            decision.params
        )
    params = dict(decision.params)
    context = ToolCallContext(
        run_id=turn.run_id,
        session_key=turn.session.session_key,
        tool_call_id=call.id,
        user_text=turn.prompt,
        exec_env=dict(decision.exec_env.env) if decision.exec_env is not None else None,
        signal=turn.signal,
    )
    try:
        value = tool.run(params, context)
        if asyncio.iscoroutine(value) or isinstance(value, asyncio.Future):
            value = await value
    except Exception as exc:  # a failing tool is an error result, not a crashed turn
        log.warning("tool %s raised %s", call.name, type(exc).__name__)
        return ToolOutput(
            f"tool {call.name!r} failed: {type(exc).__name__}: {exc}", is_error=True
        ), params
    output = value if isinstance(value, ToolOutput) else ToolOutput(str(value))
    return output, params


async def run_tool_call(
    turn: Turn, call: ToolCall, *, refusal: str | None = None, note: str | None = None
) -> dict[str, Any]:
    """Run one call (or answer it with ``refusal`` without running it); return the tool
    message the model will read next."""
    started = time.perf_counter()
    if refusal is not None:
        output, params = ToolOutput(refusal, is_error=True), dict(call.arguments)
    else:
        output, params = await _execute(turn, call)
    # What goes to the plugins, the transcript and the model: bounded, never a configured
    # secret.
    content = cut_tool_result(scrub(output.content), turn.runner.config.limits)
    if note is not None:  # what the model must know about this response (dropped calls)
        content = f"{content}\n{note}"
    output = ToolOutput(content, scrub_data(output.details), output.is_error)
    duration_ms = (time.perf_counter() - started) * 1000
    await turn.host.dispatch(
        "after_tool_call",
        {
            "tool_name": call.name,
            "params": params,
            "result": output.content if not output.is_error else None,
            "error": output.content if output.is_error else None,
            "duration_ms": duration_ms,
            "run_id": turn.run_id,
            "tool_call_id": call.id,
        },
        turn.tool_ctx,
    )
    message: dict[str, Any] = {
        "role": "tool",
        "tool_call_id": call.id,
        "name": call.name,
        "content": output.content,
    }
    if output.is_error:
        message["is_error"] = True
    if output.details is not None:
        message["details"] = json.loads(json.dumps(output.details, default=str))
    persisted = persist_tool_result(
        turn.host,
        message,
        turn.tool_ctx,
        tool_name=call.name,
        tool_call_id=call.id,
        session_key=turn.session.session_key,
    )
    if persisted.message is None:
        # The model still needs an answer to its call id; the transcript keeps only this.
        withheld = {"role": "tool", "tool_call_id": call.id, "name": call.name, "content": WITHHELD}
        turn.session.messages.append(withheld)
        return withheld
    turn.session.messages.append(persisted.message)
    return persisted.message
