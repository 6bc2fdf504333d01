"""``agentplug_approvals``: :class:`ApprovalScript`, a scriptable approval resolver with
a broker, and :class:`ToolCallCheck`, a ``before_tool_call`` plus approval round-trip."""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal, cast

from agentplug.testing.fixture_state import AgentplugPytestWarning

if TYPE_CHECKING:
    from agentplug_hookspecs.tools import ToolCallOutcome

    from agentplug.core.results import DispatchResult
    from agentplug.services.approvals import ApprovalBroker, ApprovalVerdict, PendingApproval
    from agentplug.testing.fixture_state import FixtureState

_DECISIONS: Final = ("allow-once", "allow-always", "deny")

Decision = Literal["allow-once", "allow-always", "deny"]


@dataclass(frozen=True)
class ToolCallCheck:
    """``before_tool_call`` plus the approval round-trip, as a host would run them."""

    result: DispatchResult[Any]
    verdict: ApprovalVerdict

    @property
    def outcome(self) -> ToolCallOutcome:
        return cast("ToolCallOutcome", self.result.outcome)

    @property
    def allowed(self) -> bool:
        """Whether the tool call may run (not blocked; approved when approval was asked)."""
        return self.verdict.allowed

    @property
    def params(self) -> dict[str, Any]:
        """The (possibly rewritten) parameters the tool would run with."""
        return self.outcome.params


class ApprovalScript:
    """``agentplug_approvals``: an approval resolver answering from a script.

    Decisions are looked up like :class:`~agentplug.services.approvals.ScriptedResolver`: by tool
    name first (kept), then from the queue (consumed), then the default. An approval
    nobody scripted makes the resolver fail, which the broker turns into a deny; the
    fixture also emits an :class:`AgentplugPytestWarning` naming the tool.
    """

    by = "scripted"
    """Who its decisions are recorded as."""

    def __init__(self, state: FixtureState) -> None:
        self._state = state
        self.by_tool: dict[str, Decision] = {}
        self.queue: list[Decision] = []
        self.default: Decision | None = None
        self.silent = False
        """When true, the resolver never answers (the request's timeout decides)."""
        self.asked: list[PendingApproval] = []
        """Every approval the resolver was asked, in order."""
        self.unscripted: list[str] = []
        """Tool names asked about with no scripted decision."""
        self._broker: ApprovalBroker | None = None

    # scripting --------------------------------------------------------------------------

    def script(
        self,
        what: str | Mapping[str, str] | Sequence[str],
        decision: str | None = None,
    ) -> ApprovalScript:
        """Script decisions; returns ``self`` so calls chain.

        ``script("web_search", "allow-once")``: that tool, every time.
        ``script({"web_search": "deny"})``: per tool.
        ``script(["allow-once", "deny"])`` or ``script("deny")``: answered in order.
        """
        if decision is not None:
            if not isinstance(what, str):
                raise TypeError("script(tool_name, decision): tool_name must be a string")
            self.by_tool[what] = _decision(decision)
        elif isinstance(what, str):
            self.queue.append(_decision(what))
        elif isinstance(what, Mapping):
            for tool, value in what.items():
                self.by_tool[str(tool)] = _decision(value)
        else:
            self.queue.extend(_decision(value) for value in what)
        return self

    def set_default(self, decision: str | None) -> ApprovalScript:
        """The decision for approvals nothing else scripted (``None``: unscripted)."""
        self.default = None if decision is None else _decision(decision)
        return self

    def never_answer(self, value: bool = True) -> ApprovalScript:
        """Never answer (to test approval timeouts; set ``timeout_ms`` in the request)."""
        self.silent = value
        return self

    # the resolver protocol --------------------------------------------------------------

    async def resolve(self, pending: PendingApproval) -> Decision:
        self.asked.append(pending)
        if self.silent:
            import asyncio

            await asyncio.Event().wait()
        if pending.tool_name in self.by_tool:
            return self.by_tool[pending.tool_name]
        if self.queue:
            return self.queue.pop(0)
        if self.default is not None:
            return self.default
        self.unscripted.append(pending.tool_name)
        warnings.warn(
            f"approval for tool {pending.tool_name!r} ({pending.request.title!r}) was asked "
            "but no decision was scripted; the broker denies it. Script one with "
            f"agentplug_approvals.script({pending.tool_name!r}, 'allow-once')",
            AgentplugPytestWarning,
            stacklevel=1,
        )
        raise LookupError(f"no scripted decision for approval of tool {pending.tool_name!r}")

    # the broker -------------------------------------------------------------------------

    @property
    def broker(self) -> ApprovalBroker:
        """The gateway's :class:`~agentplug.services.approvals.ApprovalBroker`, answering
        through this resolver."""
        if self._broker is None:
            self._broker = self._state.host.gateway.approvals
            self._broker.use_resolver(self)
        return self._broker

    async def decide(
        self, tool_name: str, outcome: ToolCallOutcome | DispatchResult[Any]
    ) -> ApprovalVerdict:
        """Run the approval round-trip of a ``before_tool_call`` outcome (or result)."""
        from agentplug.core.results import DispatchResult

        model = outcome.outcome if isinstance(outcome, DispatchResult) else outcome
        return await self.broker.decide(tool_name, cast("ToolCallOutcome", model))

    def decide_sync(
        self, tool_name: str, outcome: ToolCallOutcome | DispatchResult[Any]
    ) -> ApprovalVerdict:
        """:meth:`decide` for plain tests."""
        verdict: ApprovalVerdict = self._state.run(self.decide(tool_name, outcome))
        return verdict

    async def tool_call(
        self,
        tool_name: str,
        params: Mapping[str, Any] | None = None,
        ctx: Any = None,
        **event: Any,
    ) -> ToolCallCheck:
        """Dispatch ``before_tool_call`` on ``agentplug_host``, then ask for approval."""
        payload = {"tool_name": tool_name, "params": dict(params or {}), **event}
        result = await self._state.host.hooks.before_tool_call(payload, ctx)
        verdict = await self.decide(tool_name, result)
        return ToolCallCheck(result, verdict)

    def tool_call_sync(
        self,
        tool_name: str,
        params: Mapping[str, Any] | None = None,
        ctx: Any = None,
        **event: Any,
    ) -> ToolCallCheck:
        """:meth:`tool_call` for plain tests."""
        check: ToolCallCheck = self._state.run(self.tool_call(tool_name, params, ctx, **event))
        return check


def _decision(value: str) -> Decision:
    if value not in _DECISIONS:
        raise ValueError(f"unknown approval decision {value!r}; use one of {', '.join(_DECISIONS)}")
    return cast("Decision", value)
