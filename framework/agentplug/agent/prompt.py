"""Turn phases before the model: model resolution, session start, prompt hooks, the guard.

Order (HOOKS.md and the seed): ``before_model_resolve`` before the session's messages
are loaded (:func:`resolve_model`); then, with the session loaded, session start when
new, claim of the next-turn injections, ``agent_turn_prepare``, ``before_prompt_build``
(and the deprecated ``before_agent_start``), ``heartbeat_prompt_contribution`` on
heartbeat turns only (so the run guard sees the heartbeat context),
``before_agent_run``, ``before_agent_reply``. The injections are acknowledged once the
prompt is built (after ``before_agent_start``).
"""

from __future__ import annotations

from typing import Any

from agentplug_hookspecs.agent import AgentRunEvent

from agentplug.agent.providers import split_model
from agentplug.agent.transcript import write_message
from agentplug.agent.turn import Turn
from agentplug.services.turns import guard_run

__all__ = ["build_prompt", "claim_reply", "guard", "heartbeat", "resolve_model", "start_session"]


def _join(*parts: str | None) -> str | None:
    joined = "\n\n".join(p for p in parts if p)
    return joined or None


async def start_session(turn: Turn) -> None:
    """``session_start`` (reason ``new``) for a session the store did not know."""
    if not turn.new_session:
        return
    await turn.host.hooks.session_start(
        {
            "session_key": turn.session.session_key,
            "session_id": turn.session.session_id,
            "reason": "new",
        },
        {
            "agent_id": turn.ctx.agent_id,
            "session_key": turn.session.session_key,
            "session_id": turn.session.session_id,
            "channel": turn.ctx.channel,
        },
    )


async def resolve_model(turn: Turn) -> None:
    """``agent.model``, then ``before_model_resolve`` (which sees only the prompt and the
    attachments' metadata: the session is not loaded yet)."""
    turn.provider_name, turn.model = split_model(turn.runner.config.model)
    attachments = turn.inbound.attachments if turn.inbound is not None else []
    resolved = await turn.host.hooks.before_model_resolve(
        {"prompt": turn.prompt, "attachments": attachments, "run_id": turn.run_id},
        turn.ctx,
    )
    _apply_model_override(turn, resolved.outcome)


async def build_prompt(turn: Turn) -> None:
    """Injections, ``agent_turn_prepare``, the prompt hooks.

    The injections are claimed once, before any prompt hook, and handed to
    ``agent_turn_prepare``; they are acknowledged once the prompt is built (after
    ``before_agent_start``), and released back to the queue if a hook raises first.
    """
    host = turn.host
    sessions = turn.runner.sessions
    history = turn.history()
    attachments = turn.inbound.attachments if turn.inbound is not None else []
    claim = sessions.claim_injections(turn.session.session_key)
    injections = claim.entries
    try:
        prepared = await host.hooks.agent_turn_prepare(
            {
                "prompt": turn.prompt,
                "messages": history,
                "injections": injections,
                "run_id": turn.run_id,
            },
            turn.ctx,
        )
        built = await host.hooks.before_prompt_build(
            {"prompt": turn.prompt, "messages": history, "run_id": turn.run_id}, turn.ctx
        )
        early, late = prepared.outcome, built.outcome
        before: list[str | None] = []
        after: list[str | None] = []
        if turn.runner.render_injections:
            before = [i["text"] for i in injections if i.get("placement") != "append"]
            after = [i["text"] for i in injections if i.get("placement") == "append"]
        system = _join(
            late.prepend_system_context,
            late.system_prompt
            if late.system_prompt is not None
            else turn.runner.config.system_prompt,
            late.append_system_context,
        )
        user = _join(*before, early.prepend_context, late.prepend_context, turn.prompt) or ""
        user = _join(user, *after, early.append_context, late.append_context) or ""
        legacy = await host.hooks.before_agent_start(
            {
                "prompt": turn.prompt,
                "messages": history,
                "attachments": attachments,
                "run_id": turn.run_id,
            },
            turn.ctx,
        )
        old = legacy.outcome
        if legacy.records:
            _apply_model_override(turn, old, only_if_default=True)
            if old.system_prompt is not None and late.system_prompt is None:
                system = _join(
                    late.prepend_system_context, old.system_prompt, late.append_system_context
                )
            system = _join(old.prepend_system_context, system, old.append_system_context)
            user = _join(old.prepend_context, user, old.append_context) or ""
    except BaseException:
        # No prompt was built: the injections go back to the queue for the next turn.
        sessions.release_injections(claim, after_failure=True)
        raise
    turn.system_prompt = system
    turn.user_prompt = user
    # The prompt is built: the injections in it are delivered (a failure above gives
    # them back at once, or, when the store cannot be reached, when the lease runs out).
    sessions.ack_injections(claim)


def _apply_model_override(turn: Turn, outcome: Any, *, only_if_default: bool = False) -> None:
    provider = getattr(outcome, "provider_override", None)
    model = getattr(outcome, "model_override", None)
    if only_if_default and turn.model_overridden:
        return
    if provider:
        turn.provider_name = provider
    if model:
        if "/" in model and not provider:
            turn.provider_name, turn.model = split_model(model, turn.provider_name)
        else:
            turn.model = model
    if provider or model:
        turn.model_overridden = True


async def guard(turn: Turn) -> bool:
    """``before_agent_run``; on a block, only the replacement message is written.

    The user's text is not kept and the blocking plugin's reason goes nowhere: not in the
    transcript, the trace, the logs or the turn result.
    """
    event = AgentRunEvent(
        prompt=turn.user_prompt,
        messages=turn.history(),
        system_prompt=turn.system_prompt,
        run_id=turn.run_id,
    )
    verdict = await guard_run(turn.host, event, turn.ctx)
    if verdict.allowed:
        return True
    assert verdict.record is not None
    write_message(turn.host, turn.session, verdict.record.model_dump(), turn.tool_ctx)
    turn.status = "blocked"
    turn.blocked_by = verdict.blocked_by
    turn.error = "blocked by before_agent_run"
    return False


async def claim_reply(turn: Turn) -> bool:
    """``before_agent_reply``: ``True`` when a plugin answered instead of the model."""
    result = await turn.host.hooks.before_agent_reply(
        {
            "prompt": turn.user_prompt,
            "messages": turn.history(),
            "run_id": turn.run_id,
        },
        turn.ctx,
    )
    outcome = result.outcome
    if not outcome.handled:
        return False
    reply = outcome.reply
    text = None if reply is None else (reply if isinstance(reply, str) else str(reply))
    turn.reply = text
    turn.status = "replied" if text else "silent"
    return True


async def heartbeat(turn: Turn) -> None:
    """``heartbeat_prompt_contribution`` (heartbeat turns only): context around the prompt."""
    if not turn.heartbeat:
        return
    result = await turn.host.hooks.heartbeat_prompt_contribution(
        {"prompt": turn.user_prompt, "run_id": turn.run_id}, turn.ctx
    )
    outcome = result.outcome
    turn.user_prompt = (
        _join(outcome.prepend_context, turn.user_prompt, outcome.append_context) or ""
    )
