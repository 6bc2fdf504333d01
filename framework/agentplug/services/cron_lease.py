"""The cron leader lease: which gateway of a cluster runs the scheduled jobs.

:class:`CronLease` keeps one record per lease name in the shared
:class:`~agentplug.store.StateStore` (``cron.lease`` namespace) naming its holder and the
wall-clock time it expires, read and written in one ``store.atomic`` block; tick claims
(``cron.ticks``, through ``put_if_absent``) make each tick of a job run at most once
across the cluster. :class:`~agentplug.services.cron_cluster.ClusterCron` runs jobs on it.
"""

from __future__ import annotations

import os
import secrets
import socket
import time
from collections.abc import Callable
from typing import Any

from agentplug.store.base import StateStore

__all__ = [
    "LEASE_NAMESPACE",
    "TICKS_NAMESPACE",
    "CronLease",
    "default_node_id",
    "wall_ms",
]

LEASE_NAMESPACE = "cron.lease"
"""Where lease records live (one key per lease name)."""
TICKS_NAMESPACE = "cron.ticks"
"""Where tick claims live (``<job_id>:<tick>``)."""


def wall_ms() -> int:
    """Wall-clock time in epoch milliseconds (what lease expiries and ticks compare)."""
    return int(time.time() * 1000)


def default_node_id() -> str:
    """``<hostname>-<pid>-<random>``: unique per gateway process."""
    return f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(3)}"


def _tick_key(job_id: str, tick: int) -> str:
    return f"{job_id}:{tick:016d}"


class CronLease:
    """The cron leader lease in a shared :class:`~agentplug.store.StateStore`.

    One record per ``name`` holds ``{"node", "until_ms", "term"}``. :meth:`acquire`
    takes it when it is absent, expired or already this node's, and renews it for
    ``lease_ms``; while another node holds it unexpired, it returns ``False``. A node
    trusts its own lease only ``lease_ms`` after the acquire *started* (a monotonic
    clock), so it stops running jobs before any other node may take over.

    Store errors (:class:`~agentplug.store.StateStoreUnavailable`) propagate; the lease
    then counts as not held.
    """

    def __init__(
        self,
        store: StateStore,
        node_id: str,
        *,
        lease_ms: int = 10_000,
        name: str = "cron",
        clock: Callable[[], int] = wall_ms,
    ) -> None:
        if lease_ms <= 0:
            raise ValueError("lease_ms must be positive")
        self.store = store
        self.node_id = node_id
        self.lease_ms = lease_ms
        self.name = name
        self.clock = clock
        self.term = 0
        """How many times the lease changed hands, as of this node's last acquire."""
        self.holder: str | None = None
        """The holder seen by the last :meth:`acquire` (``None`` before one, or on failure)."""
        self._valid_until = 0.0

    def _lock(self) -> str:
        return f"cron.lease:{self.name}"

    def acquire(self) -> bool:
        """Take or renew the lease; ``True`` when this node holds it now."""
        # The lease this node already holds stays trusted while the renewal runs (a job
        # claiming a tick meanwhile must not see it as lost); it is dropped only when
        # another node holds the lease or the store cannot be reached.
        started = time.monotonic()
        try:
            with self.store.atomic(self._lock()):
                record = self.store.get(LEASE_NAMESPACE, self.name)
                now = self.clock()
                if isinstance(record, dict):
                    node, until = record.get("node"), int(record.get("until_ms") or 0)
                    term = int(record.get("term") or 0)
                else:
                    node, until, term = None, 0, 0
                if node is not None and node != self.node_id and until > now:
                    self._valid_until = 0.0
                    self.holder = str(node)
                    self.term = term
                    return False
                if node != self.node_id:
                    term += 1  # the lease changes hands (or is taken for the first time)
                self.store.put(
                    LEASE_NAMESPACE,
                    self.name,
                    {"node": self.node_id, "until_ms": now + self.lease_ms, "term": term},
                )
        except BaseException:
            self._valid_until = 0.0
            self.holder = None
            raise
        self._valid_until = started + self.lease_ms / 1000
        self.holder = self.node_id
        self.term = term
        return True

    def holds(self) -> bool:
        """``True`` while the last successful :meth:`acquire` still covers this moment."""
        return time.monotonic() < self._valid_until

    def release(self) -> bool:
        """Give the lease up (when this node holds it); ``True`` when it was removed.

        Another node then takes it on its next poll instead of waiting for the expiry.
        """
        self._valid_until = 0.0
        with self.store.atomic(self._lock()):
            record = self.store.get(LEASE_NAMESPACE, self.name)
            if isinstance(record, dict) and record.get("node") == self.node_id:
                self.store.delete(LEASE_NAMESPACE, self.name)
                self.holder = None
                return True
        return False

    def leader(self) -> str | None:
        """The node holding the lease now, read from the store (``None`` when none does)."""
        record = self.store.get(LEASE_NAMESPACE, self.name)
        if not isinstance(record, dict) or int(record.get("until_ms") or 0) <= self.clock():
            return None
        node = record.get("node")
        return None if node is None else str(node)

    def claim_tick(self, job_id: str, tick: int) -> bool:
        """Claim one tick of a job; ``True`` for exactly one caller across the cluster.

        Returns ``False`` without touching the store when this node does not hold the
        lease. The claim stays: an interrupted run is never claimed (or run) again.
        """
        if not self.holds():
            return False
        record = {"node": self.node_id, "term": self.term, "claimed_ms": self.clock()}
        return self.store.put_if_absent(TICKS_NAMESPACE, _tick_key(job_id, tick), record)

    def finish_tick(self, job_id: str, tick: int, status: str, error: str | None = None) -> None:
        """Record how a claimed tick's run ended (the claim stays in place)."""
        record = {
            "node": self.node_id,
            "term": self.term,
            "finished_ms": self.clock(),
            "status": status,
            "error": error,
        }
        self.store.put(TICKS_NAMESPACE, _tick_key(job_id, tick), record)

    def tick_record(self, job_id: str, tick: int) -> Any | None:
        """The claim (or finish) record of one tick, ``None`` when it was never claimed."""
        return self.store.get(TICKS_NAMESPACE, _tick_key(job_id, tick))

    def prune(self, job_id: str, before_tick: int) -> int:
        """Delete a job's tick records older than ``before_tick``; return how many."""
        removed = 0
        for key, _value in self.store.items(TICKS_NAMESPACE, f"{job_id}:"):
            _, _, raw = key.rpartition(":")
            if raw.isdigit() and int(raw) < before_tick:
                removed += int(self.store.delete(TICKS_NAMESPACE, key))
        return removed
