"""A small, durable memory log kept in the host's state store.

Built-in actions record what the agent did or said there (``RESTART_AGENT`` persists a
``"Restarting..."`` memory before it restarts, so the next run can see it). Memories live in
the namespace ``agent.memories`` of :attr:`agentplug.core.host.PluginHost.store`, keyed by a
time-ordered id, so :meth:`MemoryLog.recent` lists them in creation order.
"""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, Field

from agentplug.store import StateStore

__all__ = ["MEMORY_NAMESPACE", "Memory", "MemoryLog"]

MEMORY_NAMESPACE = "agent.memories"
"""State-store namespace of the memory log."""


class Memory(BaseModel):
    """One remembered item: what was said or done, when, and where."""

    id: str
    text: str
    kind: str = "message"
    created_at: str = Field(description="ISO 8601 timestamp (UTC)")
    room_id: str | None = None
    entity_id: str | None = None
    data: dict[str, Any] = Field(default_factory=dict)


class MemoryLog:
    """Append and read memories in ``store`` (namespace :data:`MEMORY_NAMESPACE`)."""

    def __init__(self, store: StateStore, namespace: str = MEMORY_NAMESPACE) -> None:
        self.store = store
        self.namespace = namespace

    def add(
        self,
        text: str,
        *,
        kind: str = "message",
        room_id: str | None = None,
        entity_id: str | None = None,
        data: dict[str, Any] | None = None,
    ) -> Memory:
        """Persist a memory and return it (the write is committed when this returns)."""
        now = time.time_ns()
        memory = Memory(
            id=f"{now:020d}-{uuid.uuid4().hex[:8]}",
            text=text,
            kind=kind,
            created_at=datetime.fromtimestamp(now / 1e9, UTC).isoformat(),
            room_id=room_id,
            entity_id=entity_id,
            data=dict(data or {}),
        )
        self.store.put(self.namespace, memory.id, memory.model_dump(mode="json"))
        return memory

    def all(self) -> list[Memory]:
        """Every memory, oldest first."""
        return [Memory.model_validate(value) for _, value in self.store.items(self.namespace)]

    def recent(
        self, limit: int | None = None, *, kind: str | None = None, room_id: str | None = None
    ) -> list[Memory]:
        """The latest ``limit`` memories (oldest first), optionally of one kind or room."""
        found = [
            m
            for m in self.all()
            if (kind is None or m.kind == kind) and (room_id is None or m.room_id == room_id)
        ]
        return found if limit is None else found[-limit:] if limit > 0 else []

    def clear(self) -> int:
        """Remove every memory; return how many were removed."""
        return self.store.delete_prefix(self.namespace, "")
