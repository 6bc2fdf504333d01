"""Gateway lifecycle, cron and install hooks (HOOKS.md §3 "Lifecycle")."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, TypeVar

from pydantic import ConfigDict, Field

from ._model import Context, Event, HookModel, JsonMap, Result
from ._semantics import (
    Decide,
    Deprecation,
    FailurePolicy,
    HookKind,
    declare,
    observe,
)

_F = TypeVar("_F", bound=Callable[..., Any])

GROUP = "Lifecycle"


class GatewayContext(Context):
    """Context of gateway lifecycle hooks."""

    host: str | None = None
    """Name of the host (gateway, CLI, test) starting or stopping."""
    reason: str | None = None
    """Why (``startup``, ``shutdown``, ``restart``, ``reload``)."""


class GatewayEvent(Event):
    """The host starting or stopping its plugin services."""

    reason: str | None = None
    """Why the services start or stop (``startup``, ``shutdown``, ``restart``, ``reload``)."""


class CronContext(Context):
    """Context of cron hooks: the reconciled scheduler, its abort signal and the leader."""

    get_cron: Callable[[], Any] | None = Field(default=None, exclude=True)
    """Returns the exact scheduler instance that finished reconciling."""
    abort_signal: Any = Field(default=None, exclude=True)
    """Aborted when a newer scheduler is prepared or shutdown starts."""
    leader: str | None = None
    """The gateway that holds the cron lease, as this gateway last saw it (``None`` when
    no shared store coordinates cron, or when no gateway holds the lease)."""
    is_leader: bool = True
    """Whether this gateway runs the scheduled jobs (``True`` without a shared store)."""


class CronReconciledEvent(Event):
    """The scheduler reconciled its persistent state (startup or reload)."""

    reason: Literal["startup", "reload"]
    """``startup`` or ``reload``."""
    enabled: bool
    """Whether the scheduler is enabled."""


class CronJobState(HookModel):
    """Runtime state of a cron job snapshot."""

    model_config = ConfigDict(frozen=True)

    next_run_at_ms: int | None = None
    """When the job runs next (epoch milliseconds)."""
    last_run_status: str | None = None
    """How the last run ended."""
    last_error: str | None = None
    """Error of the last run, if it failed."""


class CronJob(HookModel):
    """A cron job snapshot."""

    model_config = ConfigDict(frozen=True)

    id: str
    """Id of the job."""
    enabled: bool = True
    """Whether the job is enabled."""
    schedule: str | None = None
    """The job's schedule (cron expression or interval), as the host stores it."""
    state: CronJobState = Field(default_factory=CronJobState)
    """The job's runtime state."""


class CronChangedEvent(Event):
    """A post-commit cron lifecycle change: a hint to re-read, not an ordered log."""

    reason: Literal["added", "updated", "removed", "started", "finished", "scheduled"]
    """``added``, ``updated``, ``removed``, ``started``, ``finished`` or ``scheduled``."""
    job: CronJob
    """Snapshot of the job after the change."""
    delivery_status: Literal["not-requested", "delivered", "not-delivered", "unknown"] = "unknown"
    """``not-requested``, ``delivered``, ``not-delivered`` or ``unknown``."""
    next_run_at_ms: int | None = None
    """When the job runs next (``scheduled``; epoch milliseconds)."""


class InstallContext(Context):
    """Context of install hooks."""

    requested_by: str | None = None
    """Who asked for it (``cli``, ``api``, a user id)."""
    source: str | None = None
    """Where the code comes from (index URL, find-links, repository)."""


class BuiltinScan(HookModel):
    """Kept for compatibility; the runtime runs no built-in scan, so it is empty ``ok``."""

    model_config = ConfigDict(frozen=True)

    status: Literal["ok"] = "ok"
    """Always ``ok``: the runtime runs no built-in scan."""
    findings: list[dict[str, Any]] = Field(default_factory=list)
    """Always empty."""


class InstallEvent(Event):
    """Prepared install material (already downloaded, not yet installed)."""

    kind: Literal["plugin", "skill"] = "plugin"
    """``plugin`` or ``skill``."""
    name: str
    """Distribution name of the package."""
    version: str | None = None
    """Its version, when known."""
    source: str | None = None
    """Where it comes from (index URL, find-links, repository, install folder)."""
    path: str | None = None
    """Where the prepared material lies (a wheel, sdist or unpacked folder)."""
    files: list[str] = Field(default_factory=list)
    """Paths of the files in the prepared material (relative)."""
    builtin_scan: BuiltinScan = Field(default_factory=BuiltinScan)
    """Kept for compatibility: always an empty ``ok`` scan."""
    operation: Literal["install", "eject", "sync", "reinject"] = "install"
    """What brings the code in: ``install`` (a downloaded file), ``eject`` (the source tree
    about to become the loaded copy), ``sync`` (the upstream tree about to be merged) or
    ``reinject`` (the installed package that loads again once the ejected copy goes)."""
    plugin_id: str | None = None
    """The plugin id the operation is about (eject, sync, reinject); ``None`` for installs."""


class InstallFinding(HookModel):
    """One finding about prepared install material."""

    severity: Literal["info", "warning", "critical"] = "warning"
    """``info``, ``warning`` or ``critical``."""
    message: str
    """What was found."""
    plugin_id: str | None = None
    """Id of the plugin that reported it (the runtime stamps it)."""


class InstallResult(Result):
    """Extra findings, or ``{"block": true, "block_reason": ...}``."""

    findings: list[InstallFinding] = Field(default_factory=list)
    """Findings to add (accumulate in priority order)."""
    block: bool | None = Field(default=None, strict=True)
    """``true`` blocks the operation (terminal); ``false`` is no decision."""
    block_reason: str | None = None
    """Why it is blocked."""


class InstallOutcome(HookModel):
    """Reduced ``before_install``."""

    blocked: bool = False
    """Whether the operation is blocked (a failed handler blocks: fail closed)."""
    block_reason: str | None = None
    """Why it was blocked."""
    blocked_by: str | None = None
    """Id of the plugin that blocked it."""
    findings: list[InstallFinding] = Field(default_factory=list)
    """Every handler's findings, in priority order."""


@observe(event=GatewayEvent, ctx=GatewayContext, group=GROUP)
def gateway_start(event: GatewayEvent, ctx: GatewayContext) -> None:
    """Start plugin-owned services with the host.

    The cron scheduler may still be loading: do not use this as the baseline of an
    external cron projection (use ``cron_reconciled``).
    """


@observe(event=GatewayEvent, ctx=GatewayContext, group=GROUP, default_timeout_ms=5_000)
def gateway_stop(event: GatewayEvent, ctx: GatewayContext) -> None:
    """Stop plugin-owned services and release long-lived resources (5 s budget)."""


@observe(
    event=GatewayEvent,
    ctx=GatewayContext,
    group=GROUP,
    default_timeout_ms=5_000,
    deprecation=Deprecation(replacement="gateway_stop", alias_of="gateway_stop", removed_in="1.0"),
)
def deactivate(event: GatewayEvent, ctx: GatewayContext) -> None:
    """Deprecated alias of ``gateway_stop``: runs with it and warns once per plugin."""


@observe(event=CronReconciledEvent, ctx=CronContext, group=GROUP)
def cron_reconciled(event: CronReconciledEvent, ctx: CronContext) -> None:
    """The scheduler reconciled its persistent state, at startup and on reload.

    ``ctx.get_cron()`` returns that scheduler snapshot; ``ctx.abort_signal`` is aborted
    when a newer scheduler is prepared or shutdown starts: pass it to every durable
    side effect and do not accept the snapshot after it aborted. With several gateways
    on one shared store, ``ctx.leader`` names the gateway holding the cron lease and
    ``ctx.is_leader`` says whether it is this one; it fires again when the lease moves.
    """


@observe(event=CronChangedEvent, ctx=CronContext, group=GROUP)
def cron_changed(event: CronChangedEvent, ctx: CronContext) -> None:
    """A cron job was added, updated, removed, started, finished or (re)scheduled.

    Post-commit hint to re-read the scheduler adopted from ``cron_reconciled``; never
    an ordered log, and never a scheduler to adopt.
    """


@declare(
    kind=HookKind.DECIDE,
    event=InstallEvent,
    ctx=InstallContext,
    result=InstallResult,
    outcome=InstallOutcome,
    reduction=Decide(terminal="block", reason="block_reason", accumulate=("findings",)),
    group=GROUP,
    failure=FailurePolicy.FAIL_CLOSED,
)
def before_install(event: InstallEvent, ctx: InstallContext) -> InstallResult | None:
    """Inspect prepared plugin or skill material before it is installed.

    Runs after the operator's ``security.install_policy``. Return extra ``findings``
    (accumulated in priority order) or ``{"block": true, "block_reason": ...}``
    (terminal). A failing handler blocks the install (fail closed).
    """


__all__ = [
    "BuiltinScan",
    "CronChangedEvent",
    "CronContext",
    "CronJob",
    "CronJobState",
    "CronReconciledEvent",
    "GatewayContext",
    "GatewayEvent",
    "InstallContext",
    "InstallEvent",
    "InstallFinding",
    "InstallOutcome",
    "InstallResult",
    "JsonMap",
    "before_install",
    "cron_changed",
    "cron_reconciled",
    "deactivate",
    "gateway_start",
    "gateway_stop",
]
