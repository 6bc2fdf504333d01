"""The runner's side of a tool call: which tools a turn offers, and one call of its model
through the gateway's :class:`~agentplug.agent.pipeline.ToolCallPipeline`.

The pipeline does the work (validate, the gate, the tool, ``after_tool_call``, the
persist hooks, shaping); this module finds the tool the model named (``agent.tools``
exclusions hold here too: a tool never offered is not run because the model guessed its
name), turns the runner's refusals (``agent.limits``, arguments that are not a JSON
object) into the pipeline's, and appends the resulting tool message to the transcript.
"""

from __future__ import annotations

from typing import Any

from agentplug.agent.pipeline import CallIds, ToolRequest
from agentplug.agent.providers.base import ToolCall
from agentplug.agent.tools import Tool, ToolCallContext
from agentplug.agent.turn import Turn

__all__ = ["MAX_REPLY_MEDIA", "offered_tools", "reply_media", "run_tool_call"]

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


async def run_tool_call(
    turn: Turn, call: ToolCall, *, refusal: str | None = None, note: str | None = None
) -> dict[str, Any]:
    """Run one call (or answer it with ``refusal`` without running it); append the tool
    message the model will read next to the transcript and return it."""
    tool = _tool(turn, call.name) if refusal is None else None
    if refusal is None:
        refusal = _refusal(turn, call, tool)
    request = ToolRequest(
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
