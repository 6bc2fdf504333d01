"""Agent-turn and delivery services a host calls around the hooks.

- :func:`prepare_turn`: claim the session's next-turn injections, run
  ``agent_turn_prepare`` and ``before_prompt_build``, combine their contexts, then
  acknowledge the injections (the prompt that uses them is built).
- :func:`guard_run`: ``before_agent_run``; on a block, a :class:`TranscriptRecord`
  holding only the replacement message and non-confidential metadata. The plugin's
  ``reason`` never leaves the reduced outcome: it is not logged, stored or returned.
- :class:`FinalizeRetryTracker`: bounded ``before_agent_finalize`` revisions.
- :func:`send_message` / :func:`send_message_legacy`: ``message_sending`` (cancel means
  a suppressed delivery), then the channel, then ``message_sent``.
- :func:`send_reply_payload`: ``reply_payload_sending`` without trust markers; the
  runtime re-applies its own trust decision afterwards.
"""

from __future__ import annotations

import hashlib
import inspect
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, Literal

from agentplug_hookspecs import TRUST_MARKERS, Context
from agentplug_hookspecs.agent import AgentFinalizeOutcome, AgentRunEvent, AgentRunOutcome
from agentplug_hookspecs.common import AgentContext, MessageContext
from agentplug_hookspecs.messages import (
    MessageSendingEvent,
    MessageSendingOutcome,
    ReplyPayloadOutcome,
)
from pydantic import BaseModel, ConfigDict, Field

from agentplug.core.reducers import MAX_FINALIZE_ATTEMPTS
from agentplug.core.results import HandlerReport
from agentplug.services.sessions.injections import InjectionClaim

if TYPE_CHECKING:
    from agentplug.core.host import HookHost as PluginHost
    from agentplug.services.sessions import SessionServices

__all__ = [
    "CANCELLED_BY_MESSAGE_SENDING_HOOK",
    "DEFAULT_BLOCK_MESSAGE",
    "DeliveryResult",
    "FinalizeRetryTracker",
    "PreparedTurn",
    "ReplyDelivery",
    "RunGuard",
    "TranscriptRecord",
    "guard_run",
    "notify_sent",
    "prepare_turn",
    "send_message",
    "send_message_legacy",
    "send_reply_payload",
    "strip_trust_markers",
]

log = logging.getLogger("agentplug.turns")

DEFAULT_BLOCK_MESSAGE = "This message was blocked by a policy and was not sent to the model."
"""Transcript text of a blocked run whose blocking plugin gave no ``message``."""
CANCELLED_BY_MESSAGE_SENDING_HOOK = "cancelled_by_message_sending_hook"


def _context(
    ctx: Context | Mapping[str, Any] | None, model: type[Context], **defaults: Any
) -> Context:
    if isinstance(ctx, model):
        missing = {k: v for k, v in defaults.items() if getattr(ctx, k, None) is None}
        return ctx.model_copy(update=missing) if missing else ctx
    data = dict(ctx.model_dump() if isinstance(ctx, Context) else (ctx or {}))
    for key, value in defaults.items():
        if data.get(key) is None:
            data[key] = value
    return model.model_validate(data)


# -- prepare ---------------------------------------------------------------------------


class PreparedTurn(BaseModel):
    """The prompt of one turn with everything the prompt hooks contributed."""

    prompt: str
    messages: list[Any]
    injections: list[dict[str, Any]] = Field(default_factory=list)
    """The next-turn injections claimed for this turn (delivered to ``agent_turn_prepare``)."""
    prepend_context: str | None = None
    append_context: str | None = None
    system_prompt: str | None = None
    prepend_system_context: str | None = None
    append_system_context: str | None = None
    handlers: list[HandlerReport] = Field(default_factory=list)

    @property
    def final_prompt(self) -> str:
        """``prepend_context``, the prompt and ``append_context`` joined by blank lines."""
        parts = [self.prepend_context, self.prompt, self.append_context]
        return "\n\n".join(p for p in parts if p)

    def final_system_prompt(self, base: str | None = None) -> str | None:
        """The system prompt (``system_prompt`` or ``base``) with the system contexts."""
        core = self.system_prompt if self.system_prompt is not None else base
        parts = [self.prepend_system_context, core, self.append_system_context]
        joined = "\n\n".join(p for p in parts if p)
        return joined or None


def _join(*parts: str | None) -> str | None:
    joined = "\n\n".join(p for p in parts if p)
    return joined or None


async def prepare_turn(
    host: PluginHost,
    session_key: str,
    prompt: str,
    messages: list[Any],
    ctx: AgentContext | Mapping[str, Any] | None = None,
    *,
    sessions: SessionServices,
    run_id: str | None = None,
    render_injections: bool = False,
) -> PreparedTurn:
    """Claim injections, run ``agent_turn_prepare`` then ``before_prompt_build``.

    The injections are claimed once, before any prompt hook, and handed to
    ``agent_turn_prepare`` (``event.injections``). Contexts of both hooks are combined
    in that order (``agent_turn_prepare`` first), joined by a blank line. Once both
    hooks have run the injections are acknowledged (removed, their idempotency keys
    marked delivered); if a hook raises first they are released instead, back to the
    queue for the next turn (a crash leaves them to come back when the lease runs
    out). ``sessions`` are the gateway's session services holding the injections.
    (:class:`~agentplug.AgentRunner` orders these hooks itself, with
    ``before_model_resolve`` between them.)

    ``render_injections=True`` makes the runtime itself put each injection's text into
    the prepend/append context (for hosts with no plugin consuming them); leave it off
    when a plugin such as ``prompt-context`` renders them, or they appear twice.
    """
    cx = _context(ctx, AgentContext, session_key=session_key, run_id=run_id)
    assert isinstance(cx, AgentContext)
    claim: InjectionClaim = sessions.claim_injections(session_key)
    injections = claim.entries
    try:
        prepared = await host.hooks.agent_turn_prepare(
            {"prompt": prompt, "messages": messages, "injections": injections, "run_id": run_id},
            cx,
        )
        built = await host.hooks.before_prompt_build(
            {"prompt": prompt, "messages": messages, "run_id": run_id}, cx
        )
    except BaseException:
        # The prompt was never built: give the injections back for the next turn.
        sessions.release_injections(claim, after_failure=True)
        raise
    early, late = prepared.outcome, built.outcome
    before: list[str | None] = []
    after: list[str | None] = []
    if render_injections:
        before = [i["text"] for i in injections if i.get("placement") != "append"]
        after = [i["text"] for i in injections if i.get("placement") == "append"]
    sessions.ack_injections(claim)
    return PreparedTurn(
        prompt=prompt,
        messages=list(messages),
        injections=injections,
        prepend_context=_join(*before, early.prepend_context, late.prepend_context),
        append_context=_join(*after, early.append_context, late.append_context),
        system_prompt=late.system_prompt,
        prepend_system_context=late.prepend_system_context,
        append_system_context=late.append_system_context,
        handlers=prepared.handlers + built.handlers,
    )


# -- before_agent_run ------------------------------------------------------------------


class TranscriptRecord(BaseModel):
    """What the transcript keeps of a blocked run: the replacement message only.

    Stands in for the user's turn; the original user text is not kept. ``metadata``
    holds only non-confidential fields (who blocked, when). There is deliberately no
    field for the plugin's ``reason``.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    role: Literal["user"] = "user"
    content: str
    metadata: dict[str, Any]


class RunGuard(BaseModel):
    """Result of :func:`guard_run`. Safe to log, store and broadcast."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    allowed: bool
    blocked_by: str | None = None
    message: str | None = None
    """The user-facing replacement message (blocked runs only)."""
    record: TranscriptRecord | None = None
    """Write this to the transcript instead of the user's message (blocked runs only)."""
    handlers: list[HandlerReport] = Field(default_factory=list)


async def guard_run(
    host: PluginHost,
    event: AgentRunEvent | Mapping[str, Any],
    ctx: AgentContext | Mapping[str, Any] | None = None,
    *,
    now: Callable[[], float] = time.time,
) -> RunGuard:
    """Run ``before_agent_run``; on a block build the transcript record.

    The blocking plugin's ``reason`` is confidential: it stays in the reduced outcome,
    which this function drops; nothing here logs or returns it.
    """
    result = await host.hooks.before_agent_run(event, ctx)
    outcome: AgentRunOutcome = result.outcome
    handlers = result.handlers
    if outcome.outcome != "block":
        return RunGuard(allowed=True, handlers=handlers)
    message = outcome.message if outcome.message and outcome.message.strip() else None
    content = message or DEFAULT_BLOCK_MESSAGE
    record = TranscriptRecord(
        content=content,
        metadata={
            "blocked": True,
            "hook": "before_agent_run",
            "blocked_by": outcome.blocked_by,
            "blocked_at_ms": int(now() * 1000),
        },
    )
    log.info("before_agent_run: run blocked by plugin %s", outcome.blocked_by)
    return RunGuard(
        allowed=False,
        blocked_by=outcome.blocked_by,
        message=content,
        record=record,
        handlers=handlers,
    )


# -- before_agent_finalize -------------------------------------------------------------


class FinalizeRetryTracker:
    """Counts ``revise`` decisions per idempotency key and stops at ``max_attempts``.

    One tracker per run. The key is the retry's ``idempotency_key`` (the reducer
    defaults it to a hash of the instruction); a ``revise`` without ``retry`` is keyed by
    a hash of its reason. ``max_attempts`` defaults to 1 and is capped at 3.
    """

    def __init__(self) -> None:
        self._attempts: dict[str, int] = {}

    @staticmethod
    def key_of(outcome: AgentFinalizeOutcome) -> str:
        """The idempotency key an outcome counts against."""
        retry = outcome.retry
        if retry is not None:
            if retry.idempotency_key:
                return retry.idempotency_key
            return hashlib.sha256(retry.instruction.encode("utf-8")).hexdigest()[:16]
        text = outcome.reason or ""
        return "reason:" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]

    @staticmethod
    def max_attempts_of(outcome: AgentFinalizeOutcome) -> int:
        """``retry.max_attempts`` clamped to 1..3 (1 when absent)."""
        wanted = outcome.retry.max_attempts if outcome.retry is not None else None
        return max(1, min(MAX_FINALIZE_ATTEMPTS, wanted or 1))

    def attempts(self, key: str) -> int:
        """How many extra passes were granted for ``key``."""
        return self._attempts.get(key, 0)

    @property
    def revisions(self) -> int:
        """How many extra passes were granted in this run, over every key."""
        return sum(self._attempts.values())

    def should_revise(self, outcome: AgentFinalizeOutcome) -> bool:
        """``True`` (and count it) when the harness should run one more model pass."""
        if outcome.action != "revise":
            return False
        key = self.key_of(outcome)
        if self._attempts.get(key, 0) >= self.max_attempts_of(outcome):
            log.info("before_agent_finalize: retry budget of %s used up; finalizing", key)
            return False
        self._attempts[key] = self._attempts.get(key, 0) + 1
        return True

    @staticmethod
    def revision_prompt(outcome: AgentFinalizeOutcome) -> str:
        """The revision text for the harness: the reasons, then the retry instruction."""
        parts = [outcome.reason, outcome.retry.instruction if outcome.retry else None]
        return "\n\n".join(p for p in parts if p)


# -- message_sending -------------------------------------------------------------------


class DeliveryResult(BaseModel):
    """Result of :func:`send_message`."""

    status: Literal["ready", "delivered", "failed", "suppressed"]
    """``ready``: no channel given, send ``content``; ``suppressed``: a hook cancelled."""
    content: str | None = None
    reason: str | None = None
    """``cancelled_by_message_sending_hook`` for a suppressed delivery."""
    cancel_reason: str | None = None
    cancelled_by: str | None = None
    metadata: dict[str, Any] | None = None
    error: str | None = None
    receipt: Any = None
    changed_by: list[str] = Field(default_factory=list)
    payload: dict[str, Any] | None = None
    """The reply payload handed to the channel (reply dispatcher deliveries only)."""
    dispatched_by: str | None = None
    """The plugin whose ``before_dispatch`` or ``reply_dispatch`` handler took the
    dispatch and sent the reply itself (the channel was not called)."""

    @property
    def suppressed(self) -> bool:
        """``True`` when a ``message_sending`` handler cancelled the delivery."""
        return self.status == "suppressed"


Deliver = Callable[[str], Awaitable[Any] | Any]


async def send_message(
    host: PluginHost,
    event: MessageSendingEvent | Mapping[str, Any],
    ctx: MessageContext | Mapping[str, Any] | None = None,
    *,
    deliver: Deliver | None = None,
) -> DeliveryResult:
    """Run ``message_sending``; deliver the (rewritten) content; then ``message_sent``.

    A cancel yields ``status="suppressed"`` with reason
    ``cancelled_by_message_sending_hook`` and the bounded ``cancel_reason`` and
    ``metadata``; nothing is delivered and ``message_sent`` does not fire. Without
    ``deliver`` the result is ``ready`` and the host sends ``content`` itself.
    ``message_sent`` handlers never change the result.
    """
    result = await host.hooks.message_sending(event, ctx)
    outcome: MessageSendingOutcome = result.outcome
    if outcome.cancelled:
        return DeliveryResult(
            status="suppressed",
            reason=CANCELLED_BY_MESSAGE_SENDING_HOOK,
            cancel_reason=outcome.cancel_reason,
            cancelled_by=outcome.cancelled_by,
            metadata=outcome.metadata,
        )
    if deliver is None:
        return DeliveryResult(
            status="ready", content=outcome.content, changed_by=outcome.changed_by
        )
    base = event if isinstance(event, Mapping) else event.model_dump()
    try:
        receipt = deliver(outcome.content)
        if inspect.isawaitable(receipt):
            receipt = await receipt
    except Exception as exc:
        error = type(exc).__name__
        delivery = DeliveryResult(
            status="failed", content=outcome.content, error=error, changed_by=outcome.changed_by
        )
    else:
        delivery = DeliveryResult(
            status="delivered",
            content=outcome.content,
            receipt=receipt,
            changed_by=outcome.changed_by,
        )
    await notify_sent(host, delivery, base, ctx)
    return delivery


async def notify_sent(
    host: PluginHost,
    delivery: DeliveryResult,
    event: Mapping[str, Any],
    ctx: MessageContext | Mapping[str, Any] | None = None,
) -> None:
    """Dispatch ``message_sent`` for a finished delivery (its handlers change nothing)."""
    await host.hooks.message_sent(
        {
            "content": delivery.content or "",
            "to": event.get("to"),
            "channel": event.get("channel"),
            "success": delivery.status == "delivered",
            "error": delivery.error,
        },
        ctx,
    )


async def send_message_legacy(
    host: PluginHost,
    event: MessageSendingEvent | Mapping[str, Any],
    ctx: MessageContext | Mapping[str, Any] | None = None,
    *,
    deliver: Deliver | None = None,
) -> list[DeliveryResult]:
    """The legacy direct-delivery API: ``[]`` when a hook cancelled, else one result."""
    delivery = await send_message(host, event, ctx, deliver=deliver)
    return [] if delivery.suppressed else [delivery]


# -- reply_payload_sending -------------------------------------------------------------


class ReplyDelivery(BaseModel):
    """Result of :func:`send_reply_payload`."""

    cancelled: bool = False
    cancel_reason: str | None = None
    cancelled_by: str | None = None
    payload: dict[str, Any] | None = None
    """The payload to deliver, carrying only the runtime's own trust markers."""
    changed_by: list[str] = Field(default_factory=list)
    trust_dropped: list[str] = Field(default_factory=list)
    """Runtime trust markers not re-applied because a plugin changed the media."""


def strip_trust_markers(value: Any) -> Any:
    """A copy of ``value`` without trust-marker keys at any depth."""
    if isinstance(value, Mapping):
        return {k: strip_trust_markers(v) for k, v in value.items() if k not in TRUST_MARKERS}
    if isinstance(value, list | tuple):
        return [strip_trust_markers(v) for v in value]
    return value


async def send_reply_payload(
    host: PluginHost,
    payload: Mapping[str, Any],
    ctx: MessageContext | Mapping[str, Any] | None = None,
    *,
    channel: str | None = None,
    to: str | None = None,
) -> ReplyDelivery:
    """Run ``reply_payload_sending`` on a normalised payload without trust markers.

    ``payload`` is what the runtime built, including its own top-level trust markers
    (``trusted_local_media``). Handlers never see them, and markers in what they return
    are dropped at any depth. Afterwards the runtime re-applies the markers it had
    set itself, and only while the media references are unchanged: trust was granted
    to those media, not to whatever a plugin put in their place.
    """
    trust = {k: v for k, v in payload.items() if k in TRUST_MARKERS}
    clean = strip_trust_markers(dict(payload))
    result = await host.hooks.reply_payload_sending(
        {"payload": clean, "channel": channel, "to": to}, ctx
    )
    outcome: ReplyPayloadOutcome = result.outcome
    if outcome.cancelled:
        return ReplyDelivery(
            cancelled=True,
            cancel_reason=outcome.cancel_reason,
            cancelled_by=outcome.cancelled_by,
            changed_by=outcome.changed_by,
        )
    final = strip_trust_markers(outcome.payload.model_dump(mode="json", exclude_none=True))
    dropped: list[str] = []
    if trust:
        same_media = strip_trust_markers(clean.get("media") or []) == (final.get("media") or [])
        if same_media:
            final.update(trust)
        else:
            dropped = sorted(trust)
            log.info("reply payload: media changed by a plugin; runtime trust not re-applied")
    return ReplyDelivery(payload=final, changed_by=outcome.changed_by, trust_dropped=dropped)
