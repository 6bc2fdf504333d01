"""Sub-agents: another configured agent, called by a model as a tool.

(Filled in by the sub-agent commit; this first part names who spawned a turn.)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["Spawn"]


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
