"""The scripted resolver: answers approvals from a script (tests and scenarios)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping

from agentplug.services.approvals.models import Decision, PendingApproval

__all__ = ["ScriptedResolver"]


class ScriptedResolver:
    """Test/scenario resolver: answers from a script, per tool name or in order."""

    by = "scripted"
    """Who its decisions are recorded as."""

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
