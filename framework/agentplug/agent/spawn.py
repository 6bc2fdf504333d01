"""Who spawned a sub-agent's turn (:class:`Spawn`) and how a spawn went (:class:`SubagentRun`).

Kept apart from :mod:`agentplug.agent.subagents` so that the turn's own types can name
them (:mod:`agentplug.agent.turn` imports this module, never the runner's).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, Field

__all__ = ["Spawn", "SubagentRun"]


@dataclass(frozen=True)
class Spawn:
    """Who started a sub-agent's turn, and how deep it is (1: a sub-agent of a top turn)."""

    agent_id: str
    """The sub-agent's id."""
    depth: int
    parent_agent_id: str | None = None
    parent_run_id: str | None = None
    parent_session_key: str | None = None

    def trace(self) -> dict[str, Any]:
        """What the sub-agent's hook contexts carry in ``ctx.trace``."""
        return {
            "parent_agent_id": self.parent_agent_id,
            "parent_run_id": self.parent_run_id,
            "parent_session_key": self.parent_session_key,
            "subagent_depth": self.depth,
        }


class SubagentRun(BaseModel):
    """One spawn, as its parent's turn result reports it."""

    agent_id: str
    session_key: str
    """The child's session (``agentplug sessions show`` prints it)."""
    run_id: str | None = None
    status: str
    """The child turn's status (``replied``, ``failed``, ``cancelled``...), ``started``
    for a background spawn, ``claimed`` when ``subagent_spawning`` answered instead."""
    outcome: str | None = None
    """``subagent_ended``'s outcome: ``ok``, ``error``, ``timeout``, ``killed``."""
    background: bool = False
    steps: int = 0
    """Model calls of the child's turn (its own sub-agents' in :attr:`subagents`)."""
    tool_calls: int = 0
    duration_ms: float = 0.0
    usage: dict[str, int] | None = None
    """The child turn's token usage when turns account it (``None`` until then)."""
    subagents: list[SubagentRun] = Field(default_factory=list)
    """The child's own spawns."""

    @property
    def total_steps(self) -> int:
        """Model calls of this spawn and of every spawn under it."""
        return self.steps + sum(run.total_steps for run in self.subagents)
