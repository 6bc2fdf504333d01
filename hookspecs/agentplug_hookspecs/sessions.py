"""Session, compaction and subagent hooks (HOOKS.md §3 "Sessions", "Subagents")."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, TypeVar

from pydantic import Field

from ._model import Context, Event, JsonMap
from ._semantics import Claim, Deprecation, HookKind, declare, observe
from .common import ClaimOutcome, ClaimResult

_F = TypeVar("_F", bound=Callable[..., Any])

GROUP = "Sessions and compaction"
SUB_GROUP = "Subagents"

SessionReason = Literal[
    "new", "reset", "idle", "daily", "compaction", "deleted", "shutdown", "restart", "unknown"
]


class SessionContext(Context):
    """Correlation context of session hooks."""

    agent_id: str | None = None
    """Id of the agent (persona) the run belongs to."""
    session_key: str | None = None
    """Stable key of the conversation session (channel, account and peer)."""
    session_id: str | None = None
    """Id of the current session instance (changes when the session is reset)."""
    channel: str | None = None
    """Messaging channel of the session."""


class SessionEvent(Event):
    """A session boundary."""

    session_key: str
    """Stable key of the conversation session (channel, account and peer)."""
    session_id: str | None = None
    """Id of the current session instance (changes when the session is reset)."""
    reason: SessionReason = "unknown"
    """Why the session starts or ends: ``new``, ``reset``, ``idle``, ``daily``, ``compaction``,
    ``deleted``, ``shutdown``, ``restart`` or ``unknown``."""


class CompactionEvent(Event):
    """A compaction cycle."""

    session_key: str
    """Stable key of the conversation session (channel, account and peer)."""
    message_count: int | None = None
    """How many messages the session holds (before or after compaction)."""
    token_count: int | None = None
    """How many tokens they take, when known."""
    summary: str | None = None
    """The compaction summary (``after_compaction``)."""


class ResetEvent(Event):
    """A session reset (``/reset`` or programmatic)."""

    session_key: str
    """Stable key of the conversation session (channel, account and peer)."""
    source: str | None = None
    """What asked for the reset (``command`` for ``/reset``, ``api``, ...)."""


class SubagentContext(Context):
    """Correlation context of subagent hooks."""

    agent_id: str | None = None
    """Id of the agent (persona) the run belongs to."""
    session_key: str | None = None
    """Stable key of the conversation session (channel, account and peer)."""
    run_id: str | None = None
    """Id of the agent run (one user turn and the model calls it makes)."""


class SubagentSpawnedEvent(Event):
    """A subagent started."""

    child_session_key: str
    """Session key of the new subagent."""
    agent_id: str | None = None
    """Id of the agent the subagent runs as."""
    label: str | None = None
    """Human label of the subagent task."""
    resolved_model: str | None = None
    """Model the subagent uses, when known."""
    resolved_provider: str | None = None
    """Provider the subagent uses, when known."""
    run_id: str | None = None
    """Id of the run that spawned it."""


class SubagentEndedEvent(Event):
    """A subagent finished. Correlate with ``target_session_key`` (no ``agent_id``)."""

    target_session_key: str
    """Session key of the subagent (the spawned ``child_session_key``)."""
    target_kind: Literal["subagent", "acp"] = "subagent"
    """``subagent`` or ``acp``."""
    reason: str | None = None
    """Why it ended, as the host reports it."""
    outcome: Literal["ok", "error", "timeout", "killed", "reset", "deleted"] | None = None
    """``ok``, ``error``, ``timeout``, ``killed``, ``reset`` or ``deleted``."""
    error: str | None = None
    """Why it failed, if it did."""
    run_id: str | None = None
    """Id of the subagent's run."""
    ended_at: float | str | None = None
    """When it ended (epoch seconds or an ISO 8601 string)."""
    account_id: str | None = None
    """Id of the account the subagent delivered through."""
    send_farewell: bool | None = None
    """Whether a farewell message is sent to the requester."""


class SubagentDeliveryEvent(Event):
    """Completion delivery with no session binding able to route it."""

    target_session_key: str
    """Session key of the subagent whose completion is delivered."""
    content: str = ""
    """The completion text to deliver."""
    requester: JsonMap | None = None
    """Who asked for the subagent (channel, account, peer), when known."""


class SubagentSpawningEvent(Event):
    """Deprecated compatibility: a subagent about to spawn."""

    child_session_key: str | None = None
    """Session key the subagent will get, when known."""
    agent_id: str | None = None
    """Id of the agent the subagent will run as."""
    thread: bool | None = None
    """Whether the host would open a thread for it (deprecated routing)."""
    metadata: JsonMap = Field(default_factory=dict)
    """Extra spawn data from the host."""


class DeliveryTargetResult(ClaimResult):
    """A claimed delivery target."""

    target: dict[str, Any] | None = None
    """Where to deliver the completion (channel, to, thread, ...)."""


class DeliveryTargetOutcome(ClaimOutcome):
    """The delivery target chosen by the first handling plugin."""

    target: dict[str, Any] | None = None
    """The claiming handler's delivery target."""


@observe(event=SessionEvent, ctx=SessionContext, group=GROUP)
def session_start(event: SessionEvent, ctx: SessionContext) -> None:
    """Observe a session starting (``reason``: new, reset, idle, daily, ...)."""


@observe(event=SessionEvent, ctx=SessionContext, group=GROUP)
def session_end(event: SessionEvent, ctx: SessionContext) -> None:
    """Observe a session ending.

    ``shutdown``/``restart`` fire from the host's bounded shutdown finalizer when the
    process stops with active sessions, so plugins can close orphaned rows; a slow
    plugin cannot hold SIGTERM/SIGINT.
    """


@observe(event=CompactionEvent, ctx=SessionContext, group=GROUP)
def before_compaction(event: CompactionEvent, ctx: SessionContext) -> None:
    """Observe or annotate the start of a compaction cycle."""


@observe(event=CompactionEvent, ctx=SessionContext, group=GROUP)
def after_compaction(event: CompactionEvent, ctx: SessionContext) -> None:
    """Observe the end of a compaction cycle."""


@observe(event=ResetEvent, ctx=SessionContext, group=GROUP)
def before_reset(event: ResetEvent, ctx: SessionContext) -> None:
    """Observe a session reset (``/reset`` or programmatic)."""


@observe(event=SubagentSpawnedEvent, ctx=SubagentContext, group=SUB_GROUP)
def subagent_spawned(event: SubagentSpawnedEvent, ctx: SubagentContext) -> None:
    """Observe a subagent start (``resolved_model``/``resolved_provider`` when known)."""


@observe(event=SubagentEndedEvent, ctx=SubagentContext, group=SUB_GROUP)
def subagent_ended(event: SubagentEndedEvent, ctx: SubagentContext) -> None:
    """Observe a subagent end; ``target_session_key`` equals the spawned child key."""


@declare(
    kind=HookKind.CLAIM,
    event=SubagentDeliveryEvent,
    ctx=SubagentContext,
    result=DeliveryTargetResult,
    outcome=DeliveryTargetOutcome,
    reduction=Claim(),
    group=SUB_GROUP,
)
def subagent_delivery_target(
    event: SubagentDeliveryEvent, ctx: SubagentContext
) -> DeliveryTargetResult | None:
    """Compatibility: route completion delivery when no session binding can.

    Return ``{"handled": true, "target": {...}}``. Stops at the first handled result.
    """


@declare(
    kind=HookKind.CLAIM,
    event=SubagentSpawningEvent,
    ctx=SubagentContext,
    result=ClaimResult,
    outcome=ClaimOutcome,
    reduction=Claim(),
    group=SUB_GROUP,
    deprecation=Deprecation(replacement="subagent_spawned", removed_in="1.0"),
)
def subagent_spawning(event: SubagentSpawningEvent, ctx: SubagentContext) -> ClaimResult | None:
    """Deprecated compatibility hook; new plugins must not return thread routing from it.

    Stops at the first handled result. The host prepares ``thread: true`` bindings
    itself before ``subagent_spawned`` fires.
    """
