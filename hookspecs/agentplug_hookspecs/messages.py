"""Message and delivery hooks (HOOKS.md §3 "Messages and delivery")."""

from __future__ import annotations

from typing import Any

from pydantic import ConfigDict, Field, field_validator, model_validator

from ._model import TRUST_MARKERS, Event, FrozenList, HookModel, JsonList, JsonMap, Result
from ._semantics import Claim, HookKind, Pipeline, declare, observe
from .common import ClaimOutcome, ClaimResult, MessageContext, ThreadId

GROUP = "Messages and delivery"

MAX_CANCEL_REASON_CHARS = 500
MAX_CANCEL_METADATA_KEYS = 32


class InboundMessageEvent(Event):
    """An inbound message before agent routing."""

    content: str = ""
    body_for_agent: str | None = None
    channel: str | None = None
    sender: str | None = None
    sender_id: str | None = None
    thread_id: ThreadId | None = None
    message_id: str | None = None
    metadata: JsonMap = Field(default_factory=dict)


class PairingRequestedEvent(Event):
    """A new DM pairing request (no message body or media)."""

    channel: str
    account_id: str | None = None
    sender_id: str
    code: str
    """A live one-time approval credential: deliver it to trusted operators only."""
    metadata: JsonMap = Field(default_factory=dict)


class MessageReceivedEvent(Event):
    """Inbound content, sender, thread and metadata."""

    content: str = ""
    sender: str | None = None
    sender_id: str | None = None
    thread_id: ThreadId | None = None
    message_id: str | None = None
    run_id: str | None = None
    session_key: str | None = None
    metadata: JsonMap = Field(default_factory=dict)


class MessageSendingEvent(Event):
    """Outbound content about to be delivered."""

    content: str = ""
    to: str | None = None
    channel: str | None = None
    thread_id: ThreadId | None = None
    metadata: JsonMap = Field(default_factory=dict)


class MessageSendingResult(Result):
    """Rewritten ``content``, or ``{cancel: true, cancel_reason?, metadata?}``."""

    content: str | None = None
    cancel: bool | None = Field(default=None, strict=True)
    cancel_reason: str | None = None
    metadata: dict[str, Any] | None = None

    @field_validator("cancel_reason")
    @classmethod
    def _bound_reason(cls, value: str | None) -> str | None:
        # Cancellation reasons end up in delivery results: keep them bounded.
        if value is not None and len(value) > MAX_CANCEL_REASON_CHARS:
            return value[: MAX_CANCEL_REASON_CHARS - 1] + "\u2026"
        return value

    @field_validator("metadata")
    @classmethod
    def _bound_metadata(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value is not None and len(value) > MAX_CANCEL_METADATA_KEYS:
            raise ValueError(f"metadata may hold at most {MAX_CANCEL_METADATA_KEYS} keys")
        return value


class MessageSendingOutcome(HookModel):
    """Reduced ``message_sending``: the content to send, or a cancellation."""

    content: str = ""
    cancelled: bool = False
    cancel_reason: str | None = None
    metadata: dict[str, Any] | None = None
    cancelled_by: str | None = None
    changed_by: list[str] = Field(default_factory=list)


class ReplyPayload(HookModel):
    """A normalised reply payload (text, presentation, delivery, media refs)."""

    # Instances are revalidated too: a handler returning ``payload.model_copy(update=...)``
    # or a ``model_construct``-ed payload must not smuggle a trust marker past the strip.
    model_config = ConfigDict(extra="allow", frozen=True, revalidate_instances="always")

    text: str | None = None
    presentation: JsonMap | None = None
    delivery: JsonMap | None = None
    media: JsonList = FrozenList()
    usage_state: JsonMap | None = None

    @model_validator(mode="before")
    @classmethod
    def _strip_trust_markers(cls, data: Any) -> Any:
        # Plugins may reshape a payload but never grant trust: runtime trust markers
        # are removed from everything a handler sees and from everything it returns.
        if isinstance(data, dict):
            return {k: v for k, v in data.items() if k not in TRUST_MARKERS}
        return data


class ReplyPayloadEvent(Event):
    """The normalised payload about to be delivered."""

    payload: ReplyPayload
    channel: str | None = None
    to: str | None = None


class ReplyPayloadResult(Result):
    """A modified payload, or ``{"cancel": true}``. A bare payload object is accepted."""

    payload: ReplyPayload | None = None
    cancel: bool | None = Field(default=None, strict=True)
    cancel_reason: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _accept_bare_payload(cls, data: Any) -> Any:
        if isinstance(data, ReplyPayload):
            return {"payload": data}
        if isinstance(data, dict) and not (
            {"payload", "cancel", "cancelReason", "cancel_reason"} & data.keys()
        ):
            return {"payload": data}
        return data


class ReplyPayloadOutcome(HookModel):
    """Reduced ``reply_payload_sending``."""

    payload: ReplyPayload
    cancelled: bool = False
    cancel_reason: str | None = None
    cancelled_by: str | None = None
    changed_by: list[str] = Field(default_factory=list)


class MessageSentEvent(Event):
    """Final delivery success or failure."""

    content: str = ""
    to: str | None = None
    channel: str | None = None
    success: bool = True
    error: str | None = None
    message_id: str | None = None


class DispatchEvent(Event):
    """An outbound dispatch before it is handed to the channel."""

    content: str = ""
    to: str | None = None
    channel: str | None = None
    thread_id: ThreadId | None = None
    payload: JsonMap | None = None


class DispatchClaimResult(ClaimResult):
    """``handled: true`` takes the dispatch; ``content`` rewrites it for lower handlers."""

    content: str | None = None


class DispatchClaimOutcome(ClaimOutcome):
    """Reduced dispatch claim, with the latest (possibly rewritten) content."""

    content: str | None = None


@declare(
    kind=HookKind.CLAIM,
    event=InboundMessageEvent,
    ctx=MessageContext,
    result=ClaimResult,
    outcome=ClaimOutcome,
    reduction=Claim(),
    group=GROUP,
)
def inbound_claim(event: InboundMessageEvent, ctx: MessageContext) -> ClaimResult | None:
    """Claim an inbound message before agent routing (synthetic replies).

    Return ``{"handled": true, "reply": ...}``. Stops at the first handled result.
    """


@observe(event=PairingRequestedEvent, ctx=MessageContext, group=GROUP, default_timeout_ms=2_000)
def channel_pairing_requested(event: PairingRequestedEvent, ctx: MessageContext) -> None:
    """Observe a newly created DM pairing request (e.g. notify an operator).

    Observation only: never approves, suppresses or delays the pairing reply. Treat
    ``code`` as a live one-time credential and ``metadata`` as untrusted sender text.
    """


@observe(event=MessageReceivedEvent, ctx=MessageContext, group=GROUP)
def message_received(event: MessageReceivedEvent, ctx: MessageContext) -> None:
    """Observe inbound content, sender, thread id, message id and metadata."""


@declare(
    kind=HookKind.PIPELINE,
    event=MessageSendingEvent,
    ctx=MessageContext,
    result=MessageSendingResult,
    outcome=MessageSendingOutcome,
    reduction=Pipeline(value="content", terminal="cancel"),
    group=GROUP,
    default_timeout_ms=15_000,
)
def message_sending(event: MessageSendingEvent, ctx: MessageContext) -> MessageSendingResult | None:
    """Rewrite outbound ``content`` or cancel delivery.

    Return ``{"content": ...}`` (lower handlers see it) or ``{"cancel": true,
    "cancel_reason": ..., "metadata": {...}}`` (terminal; ``cancel: false`` is no
    decision). A failing handler is skipped and delivery continues with the latest
    content.
    """


@declare(
    kind=HookKind.PIPELINE,
    event=ReplyPayloadEvent,
    ctx=MessageContext,
    result=ReplyPayloadResult,
    outcome=ReplyPayloadOutcome,
    reduction=Pipeline(value="payload", terminal="cancel"),
    group=GROUP,
    default_timeout_ms=15_000,
)
def reply_payload_sending(
    event: ReplyPayloadEvent, ctx: MessageContext
) -> ReplyPayloadResult | None:
    """Modify or cancel a normalised reply payload before channel delivery.

    Each handler sees the latest payload. Return a modified payload (or
    ``{"payload": ...}``) or ``{"cancel": true}``. Runtime trust markers such as
    ``trusted_local_media`` are stripped from what handlers see and return.
    """


@observe(event=MessageSentEvent, ctx=MessageContext, group=GROUP)
def message_sent(event: MessageSentEvent, ctx: MessageContext) -> None:
    """Observe final delivery success or failure; never changes the delivery result."""


@declare(
    kind=HookKind.CLAIM,
    event=DispatchEvent,
    ctx=MessageContext,
    result=DispatchClaimResult,
    outcome=DispatchClaimOutcome,
    reduction=Claim(rewrite="content"),
    group=GROUP,
)
def before_dispatch(event: DispatchEvent, ctx: MessageContext) -> DispatchClaimResult | None:
    """Inspect or rewrite an outbound dispatch before it is handed to the channel.

    Return ``{"content": ...}`` to rewrite for lower handlers, or ``{"handled": true}``
    to take the dispatch. Stops at the first handled result.
    """


@declare(
    kind=HookKind.CLAIM,
    event=DispatchEvent,
    ctx=MessageContext,
    result=ClaimResult,
    outcome=ClaimOutcome,
    reduction=Claim(),
    group=GROUP,
)
def reply_dispatch(event: DispatchEvent, ctx: MessageContext) -> ClaimResult | None:
    """Take part in the final reply-dispatch pipeline. Stops at the first handled result."""
