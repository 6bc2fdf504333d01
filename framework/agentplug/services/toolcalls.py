"""The full path a host runs before executing a tool: :class:`ToolCallGate`.

``decision = await gate.check(event, ctx)`` runs, in order:

1. trusted tool policies (:meth:`~agentplug.services.policies.TrustedToolPolicies.evaluate_all`):
   a policy block is terminal (the ordinary hooks do not run), policy ``params``
   rewrites feed into the hooks, a policy approval request is the first approval;
2. ``before_tool_call`` through ``host.dispatch`` (fail closed);
3. for ``exec`` calls (``tool_name == "exec"`` or a ``tool_kind`` ending in ``exec``),
   ``resolve_exec_env`` (merged and filtered): the decision carries the environment
   (``decision.exec_env``; run the command with exactly ``decision.exec_env.env``) and
   its audit record (``decision.metadata["exec_env"]``: kept keys with the plugin that
   contributed each, dropped keys with the reason; **no values**, they may be secrets);
4. the approval round-trip through the :class:`~agentplug.services.approvals.ApprovalBroker`
   when the host, a policy or a hook required one (standing ``allow-always`` grants
   first); the pending approval carries the same ``{"exec_env": ...}`` metadata, so the
   person sees which environment will run. An approval the host requires
   (``check(..., approval=...)``: the operator's ``agent.tools`` rule for a side-effecting
   action) is asked first; a policy's or hook's request is then asked too, on its own.

The call may run only when ``decision.allowed`` is true, with ``decision.params``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

from agentplug_hookspecs import HookModel
from agentplug_hookspecs.tools import (
    ApprovalRequest,
    ExecEnvEvent,
    ExecEnvOutcome,
    ToolCallEvent,
    ToolCallOutcome,
    ToolContext,
)
from pydantic import Field

from agentplug.core.results import HandlerReport
from agentplug.services.approvals.broker import ApprovalBroker
from agentplug.services.policies import PolicyTraceEntry, TrustedToolPolicies

if TYPE_CHECKING:
    from agentplug.core.host import HookHost

__all__ = ["ToolCallDecision", "ToolCallGate", "exec_env_metadata"]

ExecHost = Literal["gateway", "sandbox", "node"]
_EXEC_HOSTS: tuple[ExecHost, ...] = ("gateway", "sandbox", "node")


class ToolCallDecision(HookModel):
    """Whether a tool call may run, with what parameters, and why."""

    allowed: bool
    params: dict[str, Any] = Field(default_factory=dict)
    reason: str
    blocked_by: str | None = None
    """Plugin id of the policy or handler that blocked (or whose approval was refused)."""
    blocked_by_policy: str | None = None
    """Policy id when a trusted tool policy blocked."""
    approval_resolution: str | None = None
    """``allow-once``/``allow-always``/``deny``/``timeout``/``cancelled``/``no-resolver``;
    ``None`` when no approval was required."""
    approval: ApprovalRequest | None = None
    """The last approval asked (the one that refused, when one did)."""
    approval_by: str | None = None
    """Who decided the approval (``api``, ``cli``, ``chat``, ``mcp``, ``plugin:<id>``,
    ``grant``...; see :class:`~agentplug.services.approvals.ApprovalVerdict`)."""
    approval_id: str | None = None
    grant_id: str | None = None
    policy_trace: list[PolicyTraceEntry] = Field(default_factory=list)
    handlers: list[HandlerReport] = Field(default_factory=list)
    exec_env: ExecEnvOutcome | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    """Audit metadata (``{"exec_env": {...}}`` for exec calls)."""


def exec_env_metadata(
    outcome: ExecEnvOutcome, host_kind: str, session_key: str | None = None
) -> dict[str, Any]:
    """Audit record of a filtered exec env: kept keys and contributors, dropped keys.

    Values are never recorded: kept values may be credentials, and dropped values are
    what a hostile plugin tried to inject.
    """
    return {
        "host": host_kind,
        "session_key": session_key,
        "kept": {key: outcome.contributors.get(key) for key in sorted(outcome.env)},
        "dropped": [
            {"key": d.key[:128], "plugin_id": d.plugin_id, "reason": d.reason}
            for d in outcome.dropped
        ],
    }


class ToolCallGate:
    """What runs before a tool may run (see the module docstring): the decision half of
    the :class:`~agentplug.agent.pipeline.ToolCallPipeline`.

    ``policies`` are the gateway's trusted tool policies; ``broker`` its approval broker
    (a broker without a resolver blocks every approval as ``no-resolver``).
    """

    def __init__(
        self,
        host: HookHost,
        policies: TrustedToolPolicies,
        broker: ApprovalBroker,
        *,
        resolve_exec_env: bool = True,
    ) -> None:
        self.host = host
        self.policies = policies
        self.broker = broker
        self.resolve_exec_env = resolve_exec_env
        self.audit: deque[dict[str, Any]] = deque(maxlen=1_000)
        """Latest decisions and exec-env resolutions (JSON-compatible; no env values)."""

    @staticmethod
    def is_exec(event: ToolCallEvent) -> bool:
        """Whether the call runs a command (``exec`` or a code-mode exec kind)."""
        kind = event.tool_kind or ""
        return event.tool_name == "exec" or kind == "exec" or kind.endswith("_exec")

    async def exec_env(
        self,
        session_key: str | None,
        host_kind: ExecHost = "gateway",
        ctx: ToolContext | Mapping[str, Any] | None = None,
    ) -> ExecEnvOutcome:
        """Dispatch ``resolve_exec_env``; return the merged, filtered env and record it."""
        event = ExecEnvEvent(session_key=session_key, tool_name="exec", host=host_kind)
        result = await self.host.hooks.resolve_exec_env(event, ctx)
        outcome = result.outcome
        assert isinstance(outcome, ExecEnvOutcome)
        self.audit.append(
            {"kind": "exec_env", **exec_env_metadata(outcome, host_kind, session_key)}
        )
        return outcome

    async def check(
        self,
        event: ToolCallEvent | Mapping[str, Any],
        ctx: ToolContext | Mapping[str, Any] | None = None,
        *,
        exec_host: ExecHost | None = None,
        exec_env: ExecEnvOutcome | None = None,
        approval: ApprovalRequest | None = None,
    ) -> ToolCallDecision:
        """Policies -> ``before_tool_call`` -> exec env -> approvals; the final decision.

        ``exec_host`` is the exec host kind (default: the call's ``host`` parameter when
        valid, else ``gateway``); pass ``exec_env`` when the host already resolved it.
        ``approval`` is an approval the host itself requires for this call (its
        ``plugin_id`` names who requires it, e.g. ``agentplug.tools``): a block by a
        policy or a hook still wins and nothing is asked; otherwise it is asked before any
        approval a policy or hook requested, and a deny ends the check.
        """
        ev = event if isinstance(event, ToolCallEvent) else ToolCallEvent.model_validate(event)
        cx = (
            ctx
            if isinstance(ctx, ToolContext)
            else ToolContext.model_validate(dict(ctx) if ctx is not None else {})
        )
        policy = await self.policies.evaluate_all(ev, cx)
        if policy.blocked:
            return self._done(
                ev,
                ToolCallDecision(
                    allowed=False,
                    params=policy.params,
                    reason=policy.block_reason or "blocked by a trusted tool policy",
                    blocked_by=policy.blocked_by,
                    blocked_by_policy=policy.blocked_by_policy,
                    policy_trace=policy.trace,
                ),
            )
        hook_event = ev.replace(params=policy.params) if policy.params_changed_by else ev
        result = await self.host.hooks.before_tool_call(hook_event, cx)
        outcome = result.outcome
        assert isinstance(outcome, ToolCallOutcome)
        handlers = result.handlers
        if outcome.blocked:
            return self._done(
                ev,
                ToolCallDecision(
                    allowed=False,
                    params=outcome.params,
                    reason=outcome.block_reason or "blocked by a before_tool_call handler",
                    blocked_by=outcome.blocked_by,
                    policy_trace=policy.trace,
                    handlers=handlers,
                ),
            )
        requested: ApprovalRequest | None
        if policy.approval is not None:
            # The policy's request came first: parameters were frozen at that point.
            params, requested = policy.params, policy.approval
        else:
            params, requested = outcome.params, outcome.approval
        metadata: dict[str, Any] = {}
        env_outcome = exec_env
        if self.is_exec(ev) and (env_outcome is not None or self.resolve_exec_env):
            kind = exec_host or _host_kind(params)
            if env_outcome is None:
                env_outcome = await self.exec_env(cx.session_key, kind, cx)
            metadata["exec_env"] = exec_env_metadata(env_outcome, kind, cx.session_key)
        if requested is not None:
            self._warn_deprecated_fields(requested)
        # The host's requirement is its own: a plugin's approval (or a plugin's standing
        # grant) never stands in for it, so each is asked, the host's first.
        requests = [r for r in (approval, requested) if r is not None]
        if not requests:
            return self._done(
                ev,
                ToolCallDecision(
                    allowed=True,
                    params=params,
                    reason="allowed (no approval required)",
                    policy_trace=policy.trace,
                    handlers=handlers,
                    exec_env=env_outcome,
                    metadata=metadata,
                ),
            )
        for request in requests:
            verdict = await self.broker.request(
                ev.tool_name,
                params,
                request,
                metadata=metadata,
                run_id=ev.run_id or cx.run_id,
            )
            if not verdict.allowed:
                break
        return self._done(
            ev,
            ToolCallDecision(
                allowed=verdict.allowed,
                params=params,
                reason=verdict.reason,
                blocked_by=None if verdict.allowed else request.plugin_id,
                approval_resolution=verdict.resolution,
                approval=request,
                approval_by=verdict.decided_by,
                approval_id=verdict.approval_id,
                grant_id=verdict.grant_id,
                policy_trace=policy.trace,
                handlers=handlers,
                exec_env=env_outcome,
                metadata=metadata,
            ),
        )

    def _warn_deprecated_fields(self, approval: ApprovalRequest) -> None:
        """Warn (once per plugin) about ``timeout_behavior``: accepted, ignored."""
        if approval.timeout_behavior is None or not approval.plugin_id:
            return
        for record in self.host.plugins:
            if record.plugin_id == approval.plugin_id:
                self.host.warn_once(
                    record,
                    "approval.timeout_behavior",
                    f"plugin {record.plugin_id!r} sets deprecated require_approval."
                    "timeout_behavior (ignored: an unresolved approval is a deny); use "
                    "require_approval.timeout_ms to bound the wait instead",
                )
                return

    def _done(self, event: ToolCallEvent, decision: ToolCallDecision) -> ToolCallDecision:
        self.audit.append(
            {
                "kind": "tool_call",
                "tool_name": event.tool_name,
                "tool_call_id": event.tool_call_id,
                "allowed": decision.allowed,
                "reason": decision.reason,
                "blocked_by": decision.blocked_by,
                "blocked_by_policy": decision.blocked_by_policy,
                "approval_resolution": decision.approval_resolution,
                "approval_by": decision.approval_by,
                "approval_id": decision.approval_id,
                "grant_id": decision.grant_id,
                "metadata": decision.metadata,
            }
        )
        return decision


def _host_kind(params: Mapping[str, Any]) -> ExecHost:
    value = params.get("host")
    for kind in _EXEC_HOSTS:
        if value == kind:
            return kind
    return "gateway"
