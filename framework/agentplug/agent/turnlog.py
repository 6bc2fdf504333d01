"""The latest turns of a gateway, with their traces: :class:`TurnLog`.

Every runner of a gateway records into the gateway's one log (``gateway.turns``): a
turn is listed as ``running`` from the moment it starts, and replaced by its summary and
trace when it ends. The log keeps the last :data:`MAX_TURNS` finished turns, each trace
cut at :data:`MAX_TRACE_ENTRIES` entries (``trace_truncated`` says so), so a long-running
gateway holds a bounded amount. Listeners (the control room's event stream) hear of
each start and end.

Recording costs a turn almost nothing: a row's trace is turned into JSON only when the
row is read (:meth:`TurnLog.recent`, :meth:`TurnLog.get`) or a listener hears it, and
dropping the oldest finished turn does not scan the others.

What a row holds is what :class:`~agentplug.agent.turn.TurnResult` already lets out
(status, error, the blocking plugin, timings, the trace of non-confidential facts): no
transcript and no reply text.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from agentplug.core.redaction import scrub_data

if TYPE_CHECKING:
    from agentplug.agent.trace import TurnTrace
    from agentplug.agent.turn import TurnResult

__all__ = ["MAX_TRACE_ENTRIES", "MAX_TURNS", "TurnListener", "TurnLog"]

log = logging.getLogger("agentplug.agent")

MAX_TURNS = 200
"""Finished turns a :class:`TurnLog` keeps (the oldest go first)."""
MAX_TRACE_ENTRIES = 2_000
"""Trace entries kept per turn (a turn of many tool calls is cut, and marked so)."""

TurnListener = Callable[[str, dict[str, Any]], None]
"""Called with ``("turn_started" | "turn_ended", row)``; must not block."""


class TurnLog:
    """The latest turns of a gateway (see the module docstring). Thread-safe."""

    def __init__(self, keep: int = MAX_TURNS) -> None:
        self.keep = keep
        self._lock = threading.Lock()
        self._turns: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self._finished: OrderedDict[str, None] = OrderedDict()
        """The finished turns' ids, oldest first (the ones to drop past :attr:`keep`)."""
        self._traces: dict[str, TurnTrace] = {}
        """Traces of finished rows not turned into JSON yet (see :meth:`_view`)."""
        self._listeners: list[TurnListener] = []

    def subscribe(self, listener: TurnListener) -> Callable[[], None]:
        """Call ``listener`` on every turn start and end; returns the unsubscribe."""
        with self._lock:
            self._listeners.append(listener)

        def unsubscribe() -> None:
            with self._lock:
                if listener in self._listeners:
                    self._listeners.remove(listener)

        return unsubscribe

    def started(self, run_id: str, session_key: str, *, agent_id: str | None = None) -> None:
        """Turn ``run_id`` of ``session_key`` began."""
        row: dict[str, Any] = {
            "run_id": run_id,
            "session_key": session_key,
            "agent_id": agent_id,
            "status": "running",
            "started_at": time.time(),
            "trace": [],
        }
        self._put(row)
        self._tell("turn_started", row)

    def ended(
        self,
        result: TurnResult,
        *,
        agent_id: str | None = None,
        trace: TurnTrace | None = None,
    ) -> dict[str, Any]:
        """Turn ``result.run_id`` ended (a claimed message has no run id: it gets one
        here); returns the row kept. ``trace`` (the turn's own) is turned into JSON only
        when the row is read; without it the result's trace is read now."""
        run_id = result.run_id or f"claimed-{uuid.uuid4().hex[:12]}"
        with self._lock:
            before = self._turns.get(run_id)
        started_at = before["started_at"] if before else time.time() - result.duration_ms / 1000
        row: dict[str, Any] = {
            "run_id": run_id,
            "session_key": result.session_key,
            "agent_id": agent_id if agent_id is not None else (before or {}).get("agent_id"),
            "status": result.status,
            "success": result.success,
            "error": result.error,
            "blocked_by": result.blocked_by,
            "steps": result.steps,
            "duration_ms": round(result.duration_ms, 3),
            "provider": result.provider,
            "model": result.model,
            "started_at": started_at,
            "ended_at": time.time(),
        }
        if trace is None:
            _set_trace(row, result.trace)
        self._put(row, trace)
        if self._listeners:
            self._tell("turn_ended", self._view(row))
        return row

    def recent(self, limit: int = 50, *, session_key: str | None = None) -> list[dict[str, Any]]:
        """The latest turns, newest first (running ones included), at most ``limit``."""
        with self._lock:
            rows = list(reversed(self._turns.values()))
        if session_key is not None:
            rows = [r for r in rows if r["session_key"] == session_key]
        return [self._view(row) for row in rows[: max(0, limit)]]

    def get(self, run_id: str) -> dict[str, Any] | None:
        """The row of turn ``run_id`` (``None`` when unknown or forgotten)."""
        with self._lock:
            row = self._turns.get(run_id)
        return None if row is None else self._view(row)

    def _put(self, row: dict[str, Any], trace: TurnTrace | None = None) -> None:
        run_id = row["run_id"]
        with self._lock:
            self._turns.pop(run_id, None)
            self._turns[run_id] = row
            self._traces.pop(run_id, None)
            if row["status"] == "running":
                return  # running turns are never dropped: they end soon enough
            if trace is not None:
                self._traces[run_id] = trace
            self._finished.pop(run_id, None)
            self._finished[run_id] = None
            while len(self._finished) > self.keep:
                oldest, _ = self._finished.popitem(last=False)
                self._turns.pop(oldest, None)
                self._traces.pop(oldest, None)

    def _view(self, row: dict[str, Any]) -> dict[str, Any]:
        """``row`` with its trace as JSON (built once, on the first read)."""
        with self._lock:  # one reader builds it; the others wait and see it built
            trace = self._traces.pop(row["run_id"], None)
            if trace is not None:
                _set_trace(row, trace.to_json(clean=scrub_data))
        return row

    def _tell(self, kind: str, row: dict[str, Any]) -> None:
        with self._lock:
            listeners = list(self._listeners)
        for listener in listeners:
            try:
                listener(kind, row)
            except Exception as exc:  # a broken listener must not fail the turn
                log.warning("turn log listener raised %s", type(exc).__name__)


def _set_trace(row: dict[str, Any], entries: list[dict[str, Any]]) -> None:
    row["trace"] = entries[:MAX_TRACE_ENTRIES]
    row["trace_truncated"] = len(entries) > MAX_TRACE_ENTRIES
