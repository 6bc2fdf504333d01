"""Connection outages of a shared state store, recorded where every gateway can read them.

A gateway that loses its database keeps retrying (``state.retry_ms``), then fails closed.
Once the database answers again, the gateway writes one record of the outage into the
store itself (namespace :data:`OUTAGES_NAMESPACE`), so that ``agentplug state check`` and
``agentplug doctor`` run on any machine report outages that happened in other processes.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from typing import Any

__all__ = ["OUTAGES_NAMESPACE", "OutageTracker", "outage_line"]

OUTAGES_NAMESPACE = "state.outages"
"""One record per outage, keyed ``<started_ms>-<node>``: ``node``, ``started_ms``,
``recovered_ms``, ``failures`` (failed attempts), ``failed_calls`` (calls that gave up and
raised ``StateStoreUnavailable``) and ``last_error``."""
OUTAGES_KEPT = 100
"""The newest records kept; older ones are deleted when a new one is written."""


class OutageTracker:
    """The outage one store object is living through (thread-safe).

    :meth:`saw` on every failed attempt; :meth:`take` once an attempt succeeded returns
    the finished outage record (``None`` when there was none) and starts over.
    """

    def __init__(self) -> None:
        self.node = f"{socket.gethostname()}-{os.getpid()}"
        """How this process signs the outages it records."""
        self._current: dict[str, Any] | None = None
        self._lock = threading.Lock()

    @property
    def active(self) -> bool:
        """Whether a failure was seen since the last success (a cheap, unlocked read)."""
        return self._current is not None

    def saw(self, cause: str, *, failed_call: bool = False) -> None:
        """Count one failed attempt (``failed_call``: the call gave up and raised)."""
        with self._lock:
            if self._current is None:
                self._current = {
                    "node": self.node,
                    "started_ms": int(time.time() * 1000),
                    "failures": 0,
                    "failed_calls": 0,
                }
            if not failed_call:
                self._current["failures"] += 1
            self._current["failed_calls"] += int(failed_call)
            self._current["last_error"] = cause

    def take(self) -> dict[str, Any] | None:
        """The outage that just ended, with ``recovered_ms`` set; ``None`` if none."""
        with self._lock:
            outage, self._current = self._current, None
        if outage is not None:
            outage["recovered_ms"] = int(time.time() * 1000)
        return outage


def outage_key(outage: dict[str, Any]) -> str:
    """The record key of an outage: oldest first when keys are sorted."""
    return f"{int(outage['started_ms']):013d}-{outage['node']}"


def outage_line(outage: dict[str, Any]) -> str:
    """One recorded outage in one line: when, where, how long, what failed."""
    started = int(outage.get("started_ms") or 0)
    took = int(outage.get("recovered_ms") or started) - started
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(started / 1000))
    return (
        f"{when} UTC on {outage.get('node')}: {took} ms, {outage.get('failures', 0)} failures,"
        f" {outage.get('failed_calls', 0)} calls failed ({outage.get('last_error')})"
    )
