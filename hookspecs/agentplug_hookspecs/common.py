"""Models shared by several hook groups."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from ._model import Context, HookModel, JsonMap, Result

__all__ = [
    "AgentContext",
    "ClaimOutcome",
    "ClaimResult",
    "MessageContext",
    "ObserveOutcome",
    "ThreadId",
]

ThreadId = str | int


class AgentContext(Context):
    """Correlation fields of agent-turn hooks (all optional; filled when known)."""

    agent_id: str | None = None
    session_key: str | None = None
    session_id: str | None = None
    run_id: str | None = None
    job_id: str | None = None
    """Id of the cron job that started the run (cron-initiated runs only)."""
    channel: str | None = None
    message_provider: str | None = None
    channel_id: str | None = None
    sender_id: str | None = None
    chat_id: str | None = None
    channel_context: JsonMap | None = None
    trigger: str | None = None
    trace: JsonMap | None = None
    trace_id: str | None = None
    span_id: str | None = None
    parent_span_id: str | None = None
    context_token_budget: int | None = None
    """Effective token budget of the turn after the model, config and agent limits."""
    context_window_source: str | None = None
    """Where the budget came from (``model``, ``config``, ``agent``...), when a lower
    limit was applied."""
    context_window_reference_tokens: int | None = None
    """The model's own context window when a lower limit was applied."""


class MessageContext(Context):
    """Correlation fields of message and delivery hooks (HOOKS.md "Messages")."""

    session_key: str | None = None
    run_id: str | None = None
    message_id: str | None = None
    sender_id: str | None = None
    channel: str | None = None
    account_id: str | None = None
    conversation_id: str | None = None
    trace: JsonMap | None = None
    trace_id: str | None = None
    span_id: str | None = None
    parent_span_id: str | None = None
    call_depth: int | None = None
    thread_id: ThreadId | None = None
    reply_to_id: str | None = None
    reply_to_id_full: str | None = None
    reply_to_body: str | None = None
    reply_to_sender: str | None = None
    reply_to_is_quote: bool | None = None


class ObserveOutcome(HookModel):
    """Outcome of an observation hook: nothing to act on (see the handler reports)."""

    kind: Literal["observe"] = "observe"


class ClaimResult(Result):
    """A claim: ``handled: true`` takes the event; a synthetic ``reply`` may come with it."""

    handled: bool = Field(default=False, strict=True)
    reply: Any = None
    metadata: JsonMap | None = None


class ClaimOutcome(HookModel):
    """Outcome of a claim hook: who handled it (if anyone) and the winning result."""

    handled: bool = False
    plugin_id: str | None = None
    reply: Any = None
    metadata: dict[str, Any] | None = None
