"""Trusted tool policies: host-level controls that run before ``before_tool_call``.

A plugin registers one with ``api.register_trusted_tool_policy(id, evaluate,
description=...)``. ``evaluate(event, ctx)`` or ``evaluate(event)`` (sync or async;
any other signature is refused at registration) returns ``None`` (no decision) or a
``before_tool_call``-shaped result: ``{"block": true, "block_reason": ...}``,
``{"params": {...}}`` or ``{"require_approval": {...}}``.

Registration rules (HOOKS.md "Tools"):

* bundled plugins may register any policy id;
* an installed plugin must be explicitly enabled (``plugins.entries.<id>.enabled =
  true``: the entry must exist and say so) and must declare every policy id in
  ``plugins.entries.<id>.contracts.trusted_tool_policies``; anything else is rejected
  *before* registration with :class:`TrustedPolicyError` (a ``PluginLoadError``);
* ids are scoped per plugin: two plugins may both use ``budget``; one plugin
  registering the same id twice is an error.

Order: bundled plugins' policies first, then installed plugins' in plugin load
(registration) order; within a plugin, in registration order.

How policies combine with the ordinary ``before_tool_call`` handlers
(:meth:`TrustedToolPolicies.evaluate_all`, used by
:class:`~agentplug.services.toolcalls.ToolCallGate`):

1. policies run first, one after another, each seeing the latest parameters;
2. a policy ``block: true`` is terminal: later policies and the ordinary hooks do not
   run (``block: false`` is no decision);
3. a policy ``params`` rewrite feeds into later policies and the ordinary hooks;
4. the first approval request (policy or hook) wins, stamped with the requesting
   plugin's id; once a policy asked for approval the parameters are frozen (later
   rewrites, including the ordinary hooks', are ignored) but a later ``block`` still
   blocks;
5. a policy that raises, times out (the plugin's ``before_tool_call`` budget:
   ``plugins.entries.<id>.hooks.timeouts.before_tool_call``, else ``hooks.timeout_ms``,
   else the hook default of 15 s) or returns a wrong shape blocks the call (fail
   closed), like a failed ``before_tool_call`` handler.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from agentplug_hookspecs import bind_handler_context, thaw
from agentplug_hookspecs._model import HANDLER_CONTEXT as _HANDLER_CONTEXT
from agentplug_hookspecs.tools import ApprovalRequest, ToolCallEvent, ToolCallResult, ToolContext
from pydantic import ValidationError

from agentplug.core.errors import PluginLoadError
from agentplug.core.registration import call_shape

if TYPE_CHECKING:
    from agentplug.core.host import PluginHost, PluginRecord

__all__ = [
    "PolicyOutcome",
    "PolicyTraceEntry",
    "TrustedPolicyError",
    "TrustedToolPolicies",
    "TrustedToolPolicy",
]

log = logging.getLogger("agentplug.policies")

_POLICY_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}\Z")
DEFAULT_POLICY_TIMEOUT_MS = 15_000

PolicyStatus = Literal["pass", "params", "approval", "block", "error", "timeout", "skipped"]


def _called_with_event_and_ctx(evaluate: Callable[..., Any]) -> Callable[[Any, Any], Any]:
    """Adapt ``evaluate(event)``, ``evaluate(ctx)``, ``evaluate()`` or ``evaluate(event, ctx)``
    to the ``(event, ctx)`` call policies get; raise ``TypeError`` for any other shape
    (refused at registration, so that no call ever fails on the arity). Only parameters
    without a default count: ``lambda event, pid=pid: ...`` keeps its ``pid``."""
    shape = call_shape(evaluate)
    if shape is None:  # a builtin without a signature: trust the docs
        return evaluate
    if len(shape.required) > 2 or shape.keyword_only:
        extra = [*shape.required[2:], *shape.keyword_only]
        raise TypeError(
            f"evaluate requires argument(s) {extra} that a policy is never given; write "
            "evaluate(event, ctx) or evaluate(event)"
        )
    if len(shape.required) == 2 or shape.var_positional:
        return evaluate
    if not shape.required:
        return lambda event, ctx: evaluate()
    if shape.required[0] == "ctx":
        return lambda event, ctx: evaluate(ctx)
    return lambda event, ctx: evaluate(event)


class TrustedPolicyError(PluginLoadError):
    """A trusted tool policy registration was refused (names plugin, id and config key)."""


@dataclass(frozen=True)
class TrustedToolPolicy:
    """One registered policy."""

    plugin_id: str
    policy_id: str
    evaluate: Callable[..., Any]
    description: str
    bundled: bool
    seq: int
    record: PluginRecord = field(repr=False, compare=False)

    @property
    def qualified_id(self) -> str:
        """``<plugin_id>/<policy_id>`` (ids are scoped per plugin)."""
        return f"{self.plugin_id}/{self.policy_id}"


@dataclass(frozen=True)
class PolicyTraceEntry:
    """What one policy did in one evaluation."""

    plugin_id: str
    policy_id: str
    status: PolicyStatus
    duration_ms: float
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "plugin_id": self.plugin_id,
            "policy_id": self.policy_id,
            "status": self.status,
            "duration_ms": self.duration_ms,
            "error": self.error,
        }


@dataclass
class PolicyOutcome:
    """The combined result of every policy (the partial state the ordinary hooks continue)."""

    params: dict[str, Any]
    blocked: bool = False
    block_reason: str | None = None
    blocked_by: str | None = None
    """Plugin id of the blocking policy."""
    blocked_by_policy: str | None = None
    """Policy id of the blocking policy."""
    approval: ApprovalRequest | None = None
    """The first approval request (``plugin_id`` stamped with the policy's plugin)."""
    approval_policy: str | None = None
    params_changed_by: list[str] = field(default_factory=list)
    trace: list[PolicyTraceEntry] = field(default_factory=list)


class TrustedToolPolicies:
    """The host's registry of trusted tool policies (``host.trusted_policies``)."""

    def __init__(self, host: PluginHost) -> None:
        self._host = host
        self._policies: dict[tuple[str, str], TrustedToolPolicy] = {}
        self._seq = 0

    # -- registration -------------------------------------------------------------------

    def register(
        self,
        record: PluginRecord,
        policy_id: str,
        evaluate: Callable[..., Any],
        *,
        description: str = "",
    ) -> TrustedToolPolicy:
        """Register ``evaluate`` as policy ``policy_id`` of ``record``'s plugin."""
        pid = record.plugin_id
        where = f"trusted tool policy {policy_id!r}"
        if not isinstance(policy_id, str) or not _POLICY_ID.match(policy_id):
            raise TrustedPolicyError(
                pid,
                f"{where}: a policy id must be 1-128 characters of letters, digits, "
                "'_', '.', ':' or '-' starting with a letter or digit",
            )
        if not callable(evaluate):
            raise TrustedPolicyError(pid, f"{where}: evaluate must be callable")
        if not isinstance(description, str):
            raise TrustedPolicyError(pid, f"{where}: description must be a string")
        if not record.bundled:
            entry = self._host.config.plugins.entries.get(pid)
            if entry is None or "enabled" not in entry.model_fields_set or not entry.enabled:
                raise TrustedPolicyError(
                    pid,
                    f"{where} refused: installed plugins may register trusted tool policies "
                    f"only when explicitly enabled; set plugins.entries.{pid}.enabled = true "
                    f"and declare the id in plugins.entries.{pid}.contracts."
                    "trusted_tool_policies",
                )
            if policy_id not in entry.contracts.trusted_tool_policies:
                declared = entry.contracts.trusted_tool_policies
                raise TrustedPolicyError(
                    pid,
                    f"{where} refused: it is not declared in plugins.entries.{pid}.contracts."
                    f"trusted_tool_policies (declared: {declared or 'none'}); the operator "
                    "must add it there",
                )
        key = (pid, policy_id)
        existing = self._policies.get(key)
        if existing is not None and self._alive(existing):
            raise TrustedPolicyError(
                pid, f"{where} is already registered by this plugin; policy ids must be unique"
            )
        try:
            adapted = _called_with_event_and_ctx(evaluate)
        except TypeError as exc:
            raise TrustedPolicyError(pid, f"{where}: {exc}") from None
        self._seq += 1
        policy = TrustedToolPolicy(
            plugin_id=pid,
            policy_id=policy_id,
            evaluate=adapted,
            description=description,
            bundled=record.bundled,
            seq=self._seq,
            record=record,
        )
        self._policies.pop(key, None)
        self._policies[key] = policy
        log.info("plugin %s registered trusted tool policy %s", pid, policy_id)
        return policy

    def unregister(self, plugin_id: str, policy_id: str | None = None) -> int:
        """Remove a plugin's policies (one, or all); return how many."""
        doomed = [
            k
            for k in self._policies
            if k[0] == plugin_id and (policy_id is None or k[1] == policy_id)
        ]
        for k in doomed:
            del self._policies[k]
        return len(doomed)

    def _alive(self, policy: TrustedToolPolicy) -> bool:
        # A plugin that failed to load or was unregistered leaves no policy behind.
        return self._host._records.get(policy.plugin_id) is policy.record

    @property
    def policies(self) -> list[TrustedToolPolicy]:
        """Live policies in evaluation order."""
        order = {pid: i for i, pid in enumerate(self._host._records)}
        live = [p for p in self._policies.values() if self._alive(p)]
        live.sort(key=lambda p: (not p.bundled, order.get(p.plugin_id, 1 << 30), p.seq))
        return live

    # -- evaluation ---------------------------------------------------------------------

    def _timeout_s(self, plugin_id: str) -> float:
        """The plugin's ``before_tool_call`` budget (operator config, else the hook default)."""
        settings = self._host.config.entry(plugin_id).hooks
        ms = settings.timeouts.get("before_tool_call") or settings.timeout_ms
        if ms is None:
            decl = self._host.declarations.get("before_tool_call")
            ms = (decl.default_timeout_ms if decl is not None else None) or (
                DEFAULT_POLICY_TIMEOUT_MS
            )
        return ms / 1000

    async def evaluate_all(
        self,
        event: ToolCallEvent | dict[str, Any],
        ctx: ToolContext | dict[str, Any] | None = None,
    ) -> PolicyOutcome:
        """Run every live policy in order and combine their decisions (module docstring)."""
        ev = event if isinstance(event, ToolCallEvent) else ToolCallEvent.model_validate(event)
        cx = (
            ctx
            if isinstance(ctx, ToolContext)
            else ToolContext.model_validate(ctx if ctx is not None else {})
        )
        outcome = PolicyOutcome(params=thaw(ev.params))
        policies = self.policies
        for index, policy in enumerate(policies):
            started = time.perf_counter()
            status: PolicyStatus
            error: str | None = None
            try:
                value = await self._run_one(policy, ev, cx)
            except TimeoutError:
                status = "timeout"
                error = f"timed out after {self._timeout_s(policy.plugin_id) * 1000:.0f} ms"
                value = None
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                status, error, value = "error", f"raised {type(exc).__name__}", None
            else:
                status = "pass"
                if value is not None:
                    try:
                        value = (
                            value
                            if isinstance(value, ToolCallResult)
                            else ToolCallResult.model_validate(value)
                        )
                    except ValidationError as exc:
                        first = exc.errors()[0]
                        loc = ".".join(str(p) for p in first["loc"]) or "<result>"
                        status, value = "error", None
                        error = f"invalid policy result: {loc}: {first['msg']}"
            elapsed = round((time.perf_counter() - started) * 1000.0, 3)
            if status in ("error", "timeout"):
                log.warning(
                    "trusted tool policy %s of plugin %s failed (%s); blocking (fail closed)",
                    policy.policy_id,
                    policy.plugin_id,
                    error,
                )
                outcome.trace.append(
                    PolicyTraceEntry(policy.plugin_id, policy.policy_id, status, elapsed, error)
                )
                outcome.blocked = True
                outcome.block_reason = (
                    f"trusted tool policy {policy.qualified_id!r} failed: {error}"
                )
                outcome.blocked_by = policy.plugin_id
                outcome.blocked_by_policy = policy.policy_id
                self._skip_rest(policies, index, outcome)
                break
            assert value is None or isinstance(value, ToolCallResult)
            if value is not None and value.block is True:
                outcome.trace.append(
                    PolicyTraceEntry(policy.plugin_id, policy.policy_id, "block", elapsed)
                )
                outcome.blocked = True
                outcome.block_reason = value.block_reason or (
                    f"blocked by trusted tool policy {policy.qualified_id!r}"
                )
                outcome.blocked_by = policy.plugin_id
                outcome.blocked_by_policy = policy.policy_id
                self._skip_rest(policies, index, outcome)
                break
            if value is not None:
                if value.params is not None and outcome.approval is None:
                    outcome.params = thaw(value.params)
                    outcome.params_changed_by.append(policy.qualified_id)
                    ev = ev.replace(params=outcome.params)
                    status = "params"
                if value.require_approval is not None and outcome.approval is None:
                    outcome.approval = value.require_approval.model_copy(
                        update={"plugin_id": policy.plugin_id}
                    )
                    outcome.approval_policy = policy.policy_id
                    status = "approval"
            outcome.trace.append(
                PolicyTraceEntry(policy.plugin_id, policy.policy_id, status, elapsed)
            )
        return outcome

    @staticmethod
    def _skip_rest(policies: list[TrustedToolPolicy], index: int, outcome: PolicyOutcome) -> None:
        for later in policies[index + 1 :]:
            outcome.trace.append(PolicyTraceEntry(later.plugin_id, later.policy_id, "skipped", 0.0))

    async def _run_one(
        self, policy: TrustedToolPolicy, event: ToolCallEvent, ctx: ToolContext
    ) -> Any:
        token = bind_handler_context(self._host._handler_context(policy.plugin_id))
        try:
            value = policy.evaluate(event, ctx)
        finally:
            _HANDLER_CONTEXT.reset(token)
        if not inspect.isawaitable(value):
            return value
        host_ctx = self._host._handler_context(policy.plugin_id)

        async def bound() -> Any:
            bind_handler_context(host_ctx)
            return await value

        task = asyncio.ensure_future(bound())
        try:
            done, _ = await asyncio.wait((task,), timeout=self._timeout_s(policy.plugin_id))
        except asyncio.CancelledError:
            self._host.tracker.track(task, f"{policy.plugin_id}:policy:{policy.policy_id}")
            raise
        if not done:
            # Like hook handlers: stop waiting, do not cancel, track it for shutdown.
            self._host.tracker.track(task, f"{policy.plugin_id}:policy:{policy.policy_id}")
            raise TimeoutError
        return task.result()
