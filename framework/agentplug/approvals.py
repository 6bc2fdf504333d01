"""Approval of tool calls that a ``before_tool_call`` handler asked to approve.

The broker asks a resolver (terminal prompt, chat ``/approve`` command, API, test
double) and waits within the request's budget. Only an *offered* ``allow-once`` or
``allow-always`` lets the call run; deny, timeout, a missing resolver and a cancelled
run each block with their own user-readable reason.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal, Protocol

from agentplug_hookspecs.tools import (
    DEFAULT_APPROVAL_TIMEOUT_MS,
    ApprovalRequest,
    ApprovalResolution,
    ToolCallOutcome,
)

__all__ = [
    "ApprovalBroker",
    "ApprovalResolver",
    "ApprovalVerdict",
    "PendingApproval",
    "ScriptedResolver",
]

log = logging.getLogger("agentplug.approvals")

Decision = Literal["allow-once", "allow-always", "deny"]


@dataclass(frozen=True)
class PendingApproval:
    """What a resolver is asked to decide."""

    id: str
    tool_name: str
    params: Mapping[str, object]
    request: ApprovalRequest


class ApprovalResolver(Protocol):
    """Decides pending approvals (a person behind a terminal, chat or API)."""

    async def resolve(self, pending: PendingApproval) -> Decision:
        """Return the person's decision; may take as long as it needs (the broker times out)."""
        ...


@dataclass(frozen=True)
class ApprovalVerdict:
    """The result of an approval round-trip."""

    allowed: bool
    resolution: ApprovalResolution | Literal["no-resolver"]
    reason: str
    """User-readable; distinct per resolution."""


class ScriptedResolver:
    """Test/scenario resolver: answers from a script, per tool name or in order."""

    def __init__(
        self,
        decisions: Iterable[Decision] | Mapping[str, Decision] = (),
        *,
        default: Decision | None = None,
        never_answer: bool = False,
    ) -> None:
        self._by_tool = dict(decisions) if isinstance(decisions, Mapping) else {}
        self._queue = [] if isinstance(decisions, Mapping) else list(decisions)
        self._default = default
        self._never = never_answer
        self.asked: list[PendingApproval] = []
        """Every approval this resolver was asked, in order."""

    async def resolve(self, pending: PendingApproval) -> Decision:
        self.asked.append(pending)
        if self._never:
            await asyncio.Event().wait()
        if pending.tool_name in self._by_tool:
            decision: Decision = self._by_tool[pending.tool_name]
            return decision
        if self._queue:
            return self._queue.pop(0)
        if self._default is not None:
            return self._default
        raise LookupError(f"no scripted decision for approval of tool {pending.tool_name!r}")


class ApprovalBroker:
    """Runs approval round-trips for ``before_tool_call`` outcomes."""

    def __init__(self, resolver: ApprovalResolver | None = None) -> None:
        self.resolver = resolver
        self._counter = 0

    async def decide(self, tool_name: str, outcome: ToolCallOutcome) -> ApprovalVerdict:
        """Resolve ``outcome.approval`` (if any) into an allow/block verdict."""
        if outcome.blocked:
            return ApprovalVerdict(False, "deny", outcome.block_reason or "blocked")
        request = outcome.approval
        if request is None:
            return ApprovalVerdict(True, "allow-once", "no approval required")
        self._counter += 1
        pending = PendingApproval(f"approval-{self._counter}", tool_name, outcome.params, request)
        verdict = await self._round_trip(pending)
        await _notify(request, verdict.resolution)
        return verdict

    async def _round_trip(self, pending: PendingApproval) -> ApprovalVerdict:
        request = pending.request
        who = request.plugin_id or "a plugin"
        if self.resolver is None:
            return ApprovalVerdict(
                False,
                "no-resolver",
                f"{request.title!r} needs approval (asked by {who}) but no approver is "
                "connected; the tool call was not run",
            )
        timeout_s = (request.timeout_ms or DEFAULT_APPROVAL_TIMEOUT_MS) / 1000
        try:
            decision = await asyncio.wait_for(self.resolver.resolve(pending), timeout_s)
        except TimeoutError:
            return ApprovalVerdict(
                False,
                "timeout",
                f"approval for {request.title!r} was not answered within {timeout_s:g} s; "
                "the tool call was not run",
            )
        except asyncio.CancelledError:
            await _notify(request, "cancelled")
            raise
        except Exception as exc:
            log.warning("approval resolver failed (%s); denying", type(exc).__name__)
            return ApprovalVerdict(
                False, "deny", f"approval for {request.title!r} could not be obtained; denied"
            )
        if decision not in request.allowed_decisions:
            return ApprovalVerdict(
                False,
                "deny",
                f"decision {decision!r} was not offered for {request.title!r}; denied",
            )
        if decision == "deny":
            return ApprovalVerdict(False, "deny", f"{request.title!r} was denied by the approver")
        return ApprovalVerdict(True, decision, f"{request.title!r} approved ({decision})")


async def _notify(request: ApprovalRequest, resolution: str) -> None:
    callback = request.on_resolution
    if callback is None:
        return
    try:
        returned = callback(resolution)  # type: ignore[arg-type]
        if inspect.isawaitable(returned):
            await returned
    except Exception as exc:  # failures of on_resolution are only logged
        log.warning("on_resolution of %s raised %s", request.plugin_id, type(exc).__name__)
