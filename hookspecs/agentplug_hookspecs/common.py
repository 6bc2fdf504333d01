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
    """Id of the agent (persona) the run belongs to."""
    session_key: str | None = None
    """Stable key of the conversation session (channel, account and peer)."""
    session_id: str | None = None
    """Id of the current session instance (changes when the session is reset)."""
    run_id: str | None = None
    """Id of the agent run (one user turn and the model calls it makes)."""
    job_id: str | None = None
    """Id of the cron job that started the run (cron-initiated runs only)."""
    channel: str | None = None
    """Messaging channel of the conversation (``telegram``, ``discord``, ...)."""
    message_provider: str | None = None
    """Provider of the inbound message the run answers."""
    channel_id: str | None = None
    """Id of the channel, room or chat on the provider."""
    sender_id: str | None = None
    """Id of the user whose message started the run."""
    chat_id: str | None = None
    """Id of the chat (conversation) on the channel."""
    channel_context: ChannelContext | None = None
    """Channel-owned sender and chat objects; their ``id`` must equal ``sender_id`` /
    ``chat_id`` when both are given."""
    trigger: str | None = None
    """What started the run: ``user``, ``cron``, ``heartbeat``, ``subagent``, ..."""
    trace: JsonMap | None = None
    """W3C-style trace data of the request (free-form map from the host)."""
    trace_id: str | None = None
    """Trace id, for correlating with the host's tracing."""
    span_id: str | None = None
    """Span id of this step in the host's trace."""
    parent_span_id: str | None = None
    """Span id of the parent step."""
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
    """Stable key of the conversation session (channel, account and peer)."""
    run_id: str | None = None
    """Id of the agent run (one user turn and the model calls it makes)."""
    message_id: str | None = None
    """Id of the message on its channel."""
    sender_id: str | None = None
    """Id of the message's sender on the channel."""
    channel: str | None = None
    """Messaging channel (``telegram``, ``discord``, ...)."""
    account_id: str | None = None
    """Id of the bot or account on the channel that sends or receives."""
    conversation_id: str | None = None
    """Id of the conversation (chat, room, thread root) on the channel."""
    trace: JsonMap | None = None
    """W3C-style trace data of the request (free-form map from the host)."""
    trace_id: str | None = None
    """Trace id, for correlating with the host's tracing."""
    span_id: str | None = None
    """Span id of this step in the host's trace."""
    parent_span_id: str | None = None
    """Span id of the parent step."""
    call_depth: int | None = None
    """How deep this delivery is nested in other deliveries (0: top level)."""
    thread_id: ThreadId | None = None
    """Thread the message belongs to (string or integer, as the channel gives it)."""
    reply_to_id: str | None = None
    """Short id of the message this one replies to."""
    reply_to_id_full: str | None = None
    """Full (channel-native) id of the message this one replies to."""
    reply_to_body: str | None = None
    """Text of the message this one replies to, when the channel gives it."""
    reply_to_sender: str | None = None
    """Sender of the message this one replies to."""
    reply_to_is_quote: bool | None = None
    """Whether the reply quotes the earlier message rather than answering it."""


class ObserveOutcome(HookModel):
    """Outcome of an observation hook: nothing to act on (see the handler reports)."""

    kind: Literal["observe"] = "observe"
    """Always ``observe``: observation hooks return nothing to act on."""


class ClaimResult(Result):
    """A claim: ``handled: true`` takes the event; a synthetic ``reply`` may come with it."""

    handled: bool = Field(default=False, strict=True)
    """``true`` claims the event: later handlers do not run (strict boolean)."""
    reply: Any = None
    """Synthetic reply to send instead of running the normal path (optional)."""
    metadata: JsonMap | None = None
    """Extra data for the host about the claim (optional)."""


class ClaimOutcome(HookModel):
    """Outcome of a claim hook: who handled it (if anyone) and the winning result."""

    handled: bool = False
    """Whether a handler claimed the event."""
    plugin_id: str | None = None
    """Id of the plugin that claimed it (``None``: nobody did)."""
    reply: Any = None
    """The claiming handler's synthetic reply, if any."""
    metadata: dict[str, Any] | None = None
    """The claiming handler's metadata, if any."""
