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


def _fill_body_for_agent(data: Any) -> Any:
    """``body_for_agent`` defaults to ``content`` when the host gives none."""
    if (
        isinstance(data, dict)
        and data.get("body_for_agent") is None
        and data.get("bodyForAgent") is None
    ):
        return {**data, "body_for_agent": data.get("content", "")}
    return data


class InboundMessageEvent(Event):
    """An inbound message before agent routing.

    ``content`` is the channel's text, possibly wrapped in a plain-text envelope
    (``[telegram] Ana: ...``); ``body_for_agent`` is the text meant for the agent
    without it. Read ``body_for_agent``: parsing the envelope out of ``content`` is
    deprecated. When the host gives no ``body_for_agent`` it equals ``content``.
    """

    content: str = ""
    """The message text as it arrived."""
    body_for_agent: str | None = None
    """The text the agent should see (the runtime fills it with ``content`` when the host gives
    none)."""

    @model_validator(mode="before")
    @classmethod
    def _body_for_agent(cls, data: Any) -> Any:
        return _fill_body_for_agent(data)

    channel: str | None = None
    """Messaging channel the message came from."""
    sender: str | None = None
    """Display name of the sender."""
    sender_id: str | None = None
    """Id of the sender on the channel."""
    thread_id: ThreadId | None = None
    """Thread the message belongs to (string or integer)."""
    message_id: str | None = None
    """Id of the message on its channel."""
    metadata: JsonMap = Field(default_factory=dict)
    """Extra channel data from the host (free-form map)."""


class PairingRequestedEvent(Event):
    """A new DM pairing request (no message body or media)."""

    channel: str
    """Channel of the pairing request."""
    account_id: str | None = None
    """Id of the bot or account the request is for."""
    sender_id: str
    """Id of the user asking to pair."""
    code: str
    """A live one-time approval credential: deliver it to trusted operators only."""
    metadata: JsonMap = Field(default_factory=dict)
    """Extra channel data (never a message body or media)."""


class MessageReceivedEvent(Event):
    """Inbound content, sender, thread and metadata.

    ``body_for_agent`` is filled as on ``inbound_claim``: the host's envelope-free text,
    else ``content``. Parsing plain-text channel envelopes out of ``content`` is
    deprecated; read ``body_for_agent``.
    """

    content: str = ""
    """The received message text."""
    body_for_agent: str | None = None
    """The text the agent should see (``content`` when the host gives none)."""
    sender: str | None = None
    """Display name of the sender."""
    sender_id: str | None = None
    """Id of the sender on the channel."""
    thread_id: ThreadId | None = None
    """Thread the message belongs to (string or integer)."""
    message_id: str | None = None
    """Id of the message on its channel."""
    run_id: str | None = None
    """Id of the run the message starts or belongs to."""
    session_key: str | None = None
    """Stable key of the conversation session (channel, account and peer)."""
    metadata: JsonMap = Field(default_factory=dict)
    """Extra channel data from the host (free-form map)."""

    @model_validator(mode="before")
    @classmethod
    def _body_for_agent(cls, data: Any) -> Any:
        return _fill_body_for_agent(data)


class MessageSendingEvent(Event):
    """Outbound content about to be delivered."""

    content: str = ""
    """The outbound text, as higher-priority handlers left it."""
    to: str | None = None
    """Recipient (user, room or chat id)."""
    channel: str | None = None
    """Channel the message goes out on."""
    thread_id: ThreadId | None = None
    """Thread to reply in (string or integer)."""
    metadata: JsonMap = Field(default_factory=dict)
    """Extra delivery data from the host (free-form map)."""


class MessageSendingResult(Result):
    """Rewritten ``content``, or ``{cancel: true, cancel_reason?, metadata?}``."""

    content: str | None = None
    """Rewritten text (lower-priority handlers see it)."""
    cancel: bool | None = Field(default=None, strict=True)
    """``true`` suppresses the delivery (terminal); ``false`` is no decision."""
    cancel_reason: str | None = None
    """Why it is cancelled (bounded; part of the suppressed-delivery result)."""
    metadata: dict[str, Any] | None = None
    """Data attached to the cancellation (bounded)."""

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
    """The text to send (after every rewrite)."""
    cancelled: bool = False
    """Whether the delivery is suppressed."""
    cancel_reason: str | None = None
    """Why it was cancelled."""
    metadata: dict[str, Any] | None = None
    """Metadata of the cancellation."""
    cancelled_by: str | None = None
    """Id of the plugin that cancelled it."""
    changed_by: list[str] = Field(default_factory=list)
    """Ids of the plugins that rewrote the content, in order."""


class ReplyPayload(HookModel):
    """A normalised reply payload (text, presentation, delivery, media refs)."""

    # Instances are revalidated too: a handler returning ``payload.model_copy(update=...)``
    # or a ``model_construct``-ed payload must not smuggle a trust marker past the strip.
    model_config = ConfigDict(extra="allow", frozen=True, revalidate_instances="always")

    text: str | None = None
    """The reply text."""
    presentation: JsonMap | None = None
    """How to render it (buttons, formatting, ...), channel-specific."""
    delivery: JsonMap | None = None
    """Delivery options (silent, reply-to, ...), channel-specific."""
    media: JsonList = FrozenList()
    """References to media to attach (never trust markers: the runtime strips them)."""
    usage_state: JsonMap | None = None
    """Usage data shown with the reply, when the host tracks it."""

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
    """The normalised payload about to be delivered."""
    channel: str | None = None
    """Channel the reply goes out on."""
    to: str | None = None
    """Recipient (user, room or chat id)."""


class ReplyPayloadResult(Result):
    """A modified payload, or ``{"cancel": true}``. A bare payload object is accepted."""

    payload: ReplyPayload | None = None
    """The modified payload (later handlers see it)."""
    cancel: bool | None = Field(default=None, strict=True)
    """``true`` suppresses the delivery (terminal); ``false`` is no decision."""
    cancel_reason: str | None = None
    """Why it is cancelled."""

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
    """The payload that is delivered (after every change)."""
    cancelled: bool = False
    """Whether the delivery is suppressed."""
    cancel_reason: str | None = None
    """Why it was cancelled."""
    cancelled_by: str | None = None
    """Id of the plugin that cancelled it."""
    changed_by: list[str] = Field(default_factory=list)
    """Ids of the plugins that changed the payload, in order."""


class MessageSentEvent(Event):
    """Final delivery success or failure."""

    content: str = ""
    """The text that was (or failed to be) delivered."""
    to: str | None = None
    """Recipient (user, room or chat id)."""
    channel: str | None = None
    """Channel it went out on."""
    success: bool = True
    """Whether the delivery succeeded."""
    error: str | None = None
    """Why it failed (``None`` on success)."""
    message_id: str | None = None
    """Id the channel gave the delivered message."""


class DispatchEvent(Event):
    """An outbound dispatch before it is handed to the channel."""

    content: str = ""
    """The outbound text about to be handed to the channel."""
    to: str | None = None
    """Recipient (user, room or chat id)."""
    channel: str | None = None
    """Channel it goes out on."""
    thread_id: ThreadId | None = None
    """Thread to reply in (string or integer)."""
    payload: JsonMap | None = None
    """The structured reply payload, when there is one."""


class DispatchClaimResult(ClaimResult):
    """``handled: true`` takes the dispatch; ``content`` rewrites it for lower handlers."""

    content: str | None = None
    """Rewritten text for lower-priority handlers and the channel."""


class DispatchClaimOutcome(ClaimOutcome):
    """Reduced dispatch claim, with the latest (possibly rewritten) content."""

    content: str | None = None
    """The text after the handlers' rewrites."""


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
