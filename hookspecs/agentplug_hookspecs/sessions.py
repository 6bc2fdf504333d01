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
    session_key: str | None = None
    session_id: str | None = None
    channel: str | None = None


class SessionEvent(Event):
    """A session boundary."""

    session_key: str
    session_id: str | None = None
    reason: SessionReason = "unknown"


class CompactionEvent(Event):
    """A compaction cycle."""

    session_key: str
    message_count: int | None = None
    token_count: int | None = None
    summary: str | None = None


class ResetEvent(Event):
    """A session reset (``/reset`` or programmatic)."""

    session_key: str
    source: str | None = None


class SubagentContext(Context):
    """Correlation context of subagent hooks."""

    agent_id: str | None = None
    session_key: str | None = None
    run_id: str | None = None


class SubagentSpawnedEvent(Event):
    """A subagent started."""

    child_session_key: str
    agent_id: str | None = None
    label: str | None = None
    resolved_model: str | None = None
    resolved_provider: str | None = None
    run_id: str | None = None


class SubagentEndedEvent(Event):
    """A subagent finished. Correlate with ``target_session_key`` (no ``agent_id``)."""

    target_session_key: str
    target_kind: Literal["subagent", "acp"] = "subagent"
    reason: str | None = None
    outcome: Literal["ok", "error", "timeout", "killed", "reset", "deleted"] | None = None
    error: str | None = None
    run_id: str | None = None
    ended_at: float | str | None = None
    account_id: str | None = None
    send_farewell: bool | None = None


class SubagentDeliveryEvent(Event):
    """Completion delivery with no session binding able to route it."""

    target_session_key: str
    content: str = ""
    requester: JsonMap | None = None


class SubagentSpawningEvent(Event):
    """Deprecated compatibility: a subagent about to spawn."""

    child_session_key: str | None = None
    agent_id: str | None = None
    thread: bool | None = None
    metadata: JsonMap = Field(default_factory=dict)


class DeliveryTargetResult(ClaimResult):
    """A claimed delivery target."""

    target: dict[str, Any] | None = None


class DeliveryTargetOutcome(ClaimOutcome):
    """The delivery target chosen by the first handling plugin."""

    target: dict[str, Any] | None = None


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
    deprecation=Deprecation(replacement="subagent_spawned"),
)
def subagent_spawning(event: SubagentSpawningEvent, ctx: SubagentContext) -> ClaimResult | None:
    """Deprecated compatibility hook; new plugins must not return thread routing from it.

    Stops at the first handled result. The host prepares ``thread: true`` bindings
    itself before ``subagent_spawned`` fires.
    """
