"""Models shared by several hook groups."""

from __future__ import annotations

from typing import Any, Literal, Self

from pydantic import Field, model_validator

from ._model import Context, HookModel, JsonMap, Result

__all__ = [
    "AgentContext",
    "ChannelChatContext",
    "ChannelContext",
    "ChannelSenderContext",
    "ClaimOutcome",
    "ClaimResult",
    "MessageContext",
    "ObserveOutcome",
    "ThreadId",
]

ThreadId = str | int


class ChannelSenderContext(Context):
    """Who sent the message, as the channel knows them (``ctx.channel_context.sender``).

    The core defines ``id`` (equal to ``ctx.sender_id``), ``name`` and ``username``;
    channel plugins add their own keys (``union_id``, ``user_id``...), kept read-only in
    ``model_extra``. Absent on system-started runs (heartbeat, cron).
    """

    id: str | int | None = None
    name: str | None = None
    username: str | None = None


class ChannelChatContext(Context):
    """The conversation, as the channel knows it (``ctx.channel_context.chat``).

    ``id`` equals ``ctx.chat_id``; ``type`` is the channel's kind (``direct``,
    ``group``, ``channel``...); ``title`` its display name. Extra keys are kept.
    """

    id: str | int | None = None
    type: str | None = None
    title: str | None = None


class ChannelContext(Context):
    """Channel-owned context of a run: typed ``sender`` and ``chat``, extensible."""

    sender: ChannelSenderContext | None = None
    chat: ChannelChatContext | None = None


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
    channel_context: ChannelContext | None = None
    """Channel-owned sender and chat objects; their ``id`` must equal ``sender_id`` /
    ``chat_id`` when both are given."""
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

    @model_validator(mode="after")
    def _channel_ids_agree(self) -> Self:
        channel = self.channel_context
        if channel is None:
            return self
        for part, top in (("sender", "sender_id"), ("chat", "chat_id")):
            inner = getattr(channel, part)
            inner_id = inner.id if inner is not None else None
            top_id = getattr(self, top)
            if inner_id is not None and top_id is not None and str(inner_id) != str(top_id):
                raise ValueError(
                    f"channel_context.{part}.id ({inner_id!r}) does not match {top} "
                    f"({top_id!r}): they name the same {part}; pass the same id in both "
                    f"or leave channel_context.{part}.id out"
                )
        return self


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
