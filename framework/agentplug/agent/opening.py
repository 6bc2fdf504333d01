"""Opening a turn: its contexts, then (after ``before_model_resolve``) its session.

:func:`new_turn` builds the :class:`~agentplug.agent.turn.Turn` with the hook contexts
filled from what is known before anything is loaded: the run id, the channel and the
conversation it answers (``ctx.channel_id``, from the inbound chat id or the session
key), the sender, and the context window (:func:`context_window`). The session is not
loaded yet: HOOKS.md runs ``before_model_resolve`` before the session's messages are
loaded, so :func:`load_session` runs after it and completes the contexts with the
session id.
"""

from __future__ import annotations

import logging
import uuid
from typing import TYPE_CHECKING

from agentplug_hookspecs.common import AgentContext, MessageContext
from agentplug_hookspecs.tools import ToolContext

from agentplug.agent.config import AgentConfig
from agentplug.agent.trace import TurnTrace
from agentplug.agent.transcript import SessionRecord, TranscriptStore, answer_open_calls
from agentplug.agent.turn import InboundMessage, Turn, TurnRunner
from agentplug.services.signals import AbortSignal

if TYPE_CHECKING:
    from agentplug.agent.spawn import Spawn

__all__ = ["ContextWindow", "channel_id", "context_window", "load_session", "new_turn"]

log = logging.getLogger("agentplug.agent")


class ContextWindow:
    """The effective token budget of a turn and where it came from."""

    __slots__ = ("budget", "reference_tokens", "source")

    def __init__(self, budget: int | None, source: str | None, reference: int | None) -> None:
        self.budget = budget
        """The budget compaction works to (``ctx.context_token_budget``)."""
        self.source = source
        """``config`` (``agent.context_token_budget``) or ``model``
        (``agent.context_window_tokens``)."""
        self.reference_tokens = reference
        """The model's own window, when the configured budget is lower than it."""


def context_window(config: AgentConfig) -> ContextWindow:
    """The smaller of ``context_token_budget`` and the model's ``context_window_tokens``;
    the model's window is the reference when the configured budget is the lower one."""
    budget, window = config.context_token_budget, config.context_window_tokens
    if budget is not None and (window is None or budget < window):
        return ContextWindow(budget, "config", window)
    if window is not None:
        return ContextWindow(window, "model", None)
    return ContextWindow(None, None, None)


def channel_id(session_key: str, inbound: InboundMessage | None) -> str | None:
    """The conversation's id on its channel: the inbound chat id, else the peer part of
    an ``agent:<agent>:<channel>:<peer>`` session key, else the sender."""
    if inbound is not None and inbound.chat_id:
        return inbound.chat_id
    parts = session_key.split(":", 3)
    if len(parts) == 4 and parts[0] == "agent" and parts[2] != "subagent" and parts[3]:
        return parts[3]
    return inbound.sender_id if inbound is not None else None


def new_turn(
    runner: TurnRunner,
    prompt_text: str,
    session_key: str,
    *,
    inbound: InboundMessage | None,
    heartbeat: bool,
    signal: AbortSignal | None,
    run_id: str | None,
    trace: TurnTrace,
    spawn: Spawn | None = None,
) -> Turn:
    """A turn whose session is not loaded yet (see the module docstring)."""
    rid = run_id or f"run-{uuid.uuid4().hex[:12]}"
    window = context_window(runner.config)
    agent_id = runner.agent_id
    conversation = channel_id(session_key, inbound)
    trigger = "subagent" if spawn is not None else "heartbeat" if heartbeat else "user"
    ctx = AgentContext(
        agent_id=agent_id,
        session_key=session_key,
        run_id=rid,
        channel=inbound.channel if inbound else None,
        message_provider=inbound.channel if inbound else None,
        channel_id=conversation,
        sender_id=inbound.sender_id if inbound else None,
        chat_id=inbound.chat_id if inbound else None,
        channel_context=inbound.channel_context if inbound else None,
        trigger=trigger,
        trace=spawn.trace() if spawn is not None else None,
        context_token_budget=window.budget,
        context_window_source=window.source,
        context_window_reference_tokens=window.reference_tokens,
    )
    tool_ctx = ToolContext(
        agent_id=agent_id,
        session_key=session_key,
        run_id=rid,
        message_provider=inbound.channel if inbound else None,
        channel_id=conversation,
    )
    msg_ctx = MessageContext(
        session_key=session_key,
        run_id=rid,
        message_id=inbound.message_id if inbound else None,
        sender_id=inbound.sender_id if inbound else None,
        channel=inbound.channel if inbound else None,
        thread_id=inbound.thread_id if inbound else None,
        conversation_id=conversation,
    )
    return Turn(
        runner=runner,
        run_id=rid,
        session=SessionRecord(session_key),
        prompt=prompt_text,
        signal=signal or AbortSignal(),
        trace=trace,
        ctx=ctx,
        msg_ctx=msg_ctx,
        tool_ctx=tool_ctx,
        heartbeat=heartbeat,
        inbound=inbound,
        spawn=spawn,
    )


def load_session(turn: Turn, transcripts: TranscriptStore) -> None:
    """Load the turn's session (a new one when the store has none, or cannot be read) and
    put its id in the contexts. An open tool call an older turn left is answered first:
    the protocol would refuse the whole session."""
    key = turn.session.session_key
    try:
        stored = transcripts.load(key)
    except Exception as exc:  # a broken store starts a fresh session, never a crash
        log.warning(
            "agent: loading the transcript of %s failed (%s); starting a new session",
            key,
            type(exc).__name__,
        )
        stored = None
    record = stored if stored is not None else SessionRecord(key)
    turn.session = record
    turn.new_session = stored is None
    turn.loaded = True
    turn.ctx = turn.ctx.model_copy(update={"session_id": record.session_id})
    turn.tool_ctx = turn.tool_ctx.model_copy(update={"session_id": record.session_id})
    answer_open_calls(
        record.messages, "tool call not completed: an earlier turn ended before it did"
    )
