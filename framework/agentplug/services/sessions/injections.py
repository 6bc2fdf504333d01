"""Next-turn injection queue: enqueue, claim under a lease, acknowledge.

Every step that reads the queue and then writes it runs in one
``store.atomic("session.injections:<session_key>")`` block, so several processes that
share one store (SQLite file or PostgreSQL) behave as one gateway:

- **enqueue**: the idempotency check (pending entries and delivered markers), the
  per-plugin pending limit and the append are one transaction.
- **claim**: the turn leases every claimable entry to a fresh owner id
  (:meth:`StateStore.claim`). In the same transaction, expired entries, entries of a
  plugin whose prompt injection is disabled and entries whose idempotency key was
  already delivered (or appears twice in the claim) are acknowledged and dropped.
- **ack**: once the prompt that uses them is built, the turn removes its entries
  (:meth:`StateStore.ack`) and writes the per-key "delivered" markers in one
  transaction. A turn that crashes before that never acknowledges: its entries return
  to the queue when the lease (:data:`INJECTION_LEASE_MS`) runs out; a turn that
  fails (an exception) before its prompt is built releases them at once.

The guarantee: each injection reaches at least one prompt (nothing is lost to a
crash), and an idempotency key is delivered exactly once: after an acknowledgement the
marker drops every later entry with that key, at enqueue and at claim.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from agentplug.services.sessions.state import (
    CLAIMS_NS,
    DELIVERED_KEY_RETENTION_MS,
    DELIVERED_NS,
    INDEX_NS,
    MAX_PENDING_PER_PLUGIN,
    QUEUE_NS,
    queue_lock,
    store_key,
)
from agentplug.store import StateStore


class SessionServices(Protocol):
    """What these functions use of :class:`~agentplug.services.sessions.SessionServices`
    (a protocol, so this module does not import the class that calls it)."""

    @property
    def store(self) -> StateStore: ...

    def _now_ms(self) -> int: ...

    def prompt_injection_allowed(self, plugin_id: str) -> bool: ...


__all__ = ["InjectionClaim"]

log = logging.getLogger("agentplug.sessions")


@dataclass(frozen=True)
class InjectionClaim:
    """The injections one turn claimed (:meth:`SessionServices.claim_injections`).

    Hand it to :meth:`SessionServices.ack_injections` once the prompt that uses
    ``entries`` is built. Until then the entries stay in the store under a lease of
    ``owner``; if the turn never acknowledges (it crashed), they are claimable again
    at ``lease_until_ms``.
    """

    session_key: str
    owner: str
    """Unique per claim: what the lease is held by."""
    entries: list[dict[str, Any]] = field(default_factory=list)
    """The deliverable injections, in queue order."""
    seqs: tuple[int, ...] = ()
    """Queue sequence numbers of ``entries`` (what the acknowledgement removes)."""
    lease_until_ms: int = 0
    """Epoch milliseconds when the lease runs out."""


def _expired(entry: Mapping[str, Any], now_ms: int) -> bool:
    expires = entry.get("expires_at_ms")
    return isinstance(expires, int) and expires <= now_ms


def _delivered(services: SessionServices, session_key: str, plugin_id: str, key: str) -> Any:
    """The live delivered marker of ``key`` (``None`` when absent or past retention)."""
    marker = services.store.get(DELIVERED_NS, store_key(session_key, plugin_id, key))
    now = services._now_ms()
    if isinstance(marker, dict) and marker.get("until_ms", 0) > now:
        return marker
    return None


def enqueue(services: SessionServices, session_key: str, entry: dict[str, Any]) -> Any:
    """Append ``entry`` unless its key is pending or delivered; one transaction.

    Returns the id of the entry that already holds the key (a duplicate), ``None``
    when ``entry`` was appended, or the number of pending entries of the plugin when
    the queue is full (an ``int``).
    """
    store = services.store
    plugin_id = entry["plugin_id"]
    key = entry.get("idempotency_key")
    now = entry["enqueued_at_ms"]
    with store.atomic(queue_lock(session_key)):
        pending = [
            e
            for e in store.peek(QUEUE_NS, session_key)
            if isinstance(e, dict) and e.get("plugin_id") == plugin_id and not _expired(e, now)
        ]
        if key is not None:
            for other in pending:
                if other.get("idempotency_key") == key:
                    return str(other["id"])
            marker = _delivered(services, session_key, plugin_id, key)
            if marker is not None:
                return str(marker.get("id"))
        if len(pending) >= MAX_PENDING_PER_PLUGIN:
            return len(pending)
        store.put(INDEX_NS, store_key(session_key), True)
        store.append(QUEUE_NS, session_key, entry)
    return None


def claim(services: SessionServices, session_key: str, lease_ms: int) -> InjectionClaim:
    """Lease the deliverable injections of ``session_key`` to a new owner."""
    store = services.store
    owner = uuid.uuid4().hex
    deliver: list[tuple[int, dict[str, Any]]] = []
    with store.atomic(queue_lock(session_key)):
        now = services._now_ms()
        claimed = store.claim(QUEUE_NS, session_key, owner=owner, lease_ms=lease_ms)
        dropped: list[int] = []
        seen: set[tuple[str, str]] = set()
        for seq, entry in claimed:
            if not isinstance(entry, dict) or _expired(entry, now):
                dropped.append(seq)
                continue
            plugin_id = str(entry.get("plugin_id"))
            if not services.prompt_injection_allowed(plugin_id):
                dropped.append(seq)
                continue
            key = entry.get("idempotency_key")
            if key is not None:
                if (plugin_id, key) in seen or _delivered(services, session_key, plugin_id, key):
                    dropped.append(seq)
                    continue
                seen.add((plugin_id, key))
            deliver.append((seq, entry))
        if dropped:
            store.ack(QUEUE_NS, session_key, dropped, owner=owner)
            log.info(
                "session injections: %d expired, gated or duplicate entries dropped", len(dropped)
            )
        until = now + lease_ms
        if deliver:
            # What pending_injections() leaves out while the claim is live.
            store.put(
                CLAIMS_NS,
                store_key(session_key, owner),
                {"ids": [e["id"] for _, e in deliver], "until_ms": until},
            )
    return InjectionClaim(
        session_key=session_key,
        owner=owner,
        entries=[e for _, e in deliver],
        seqs=tuple(seq for seq, _ in deliver),
        lease_until_ms=until,
    )


def ack(services: SessionServices, claim: InjectionClaim) -> int:
    """Remove the claimed entries and mark their keys delivered; one transaction."""
    if not claim.seqs:
        return 0
    store = services.store
    session_key = claim.session_key
    with store.atomic(queue_lock(session_key)):
        removed = store.ack(QUEUE_NS, session_key, claim.seqs, owner=claim.owner)
        store.delete(CLAIMS_NS, store_key(session_key, claim.owner))
        if removed:
            # None removed: the session was reset, or the lease ran out and another turn
            # claimed them (it writes the markers when it acknowledges).
            until = services._now_ms() + DELIVERED_KEY_RETENTION_MS
            for entry in claim.entries:
                key = entry.get("idempotency_key")
                if key is not None:
                    store.put(
                        DELIVERED_NS,
                        store_key(session_key, entry["plugin_id"], key),
                        {"id": entry["id"], "until_ms": until},
                    )
    if removed < len(claim.seqs):
        log.warning(
            "session injections: %d of %d claimed entries were no longer held when the turn "
            "acknowledged them (the lease ran out, or the session was reset); they may "
            "reach another turn too",
            len(claim.seqs) - removed,
            len(claim.seqs),
        )
    return removed


def release(services: SessionServices, claim: InjectionClaim) -> int:
    """Give the claimed entries back unacknowledged; one transaction."""
    if not claim.seqs:
        return 0
    store = services.store
    with store.atomic(queue_lock(claim.session_key)):
        released = store.release(QUEUE_NS, claim.session_key, claim.seqs, owner=claim.owner)
        store.delete(CLAIMS_NS, store_key(claim.session_key, claim.owner))
    return released


def pending(services: SessionServices, session_key: str) -> list[dict[str, Any]]:
    """The entries the next claim would deliver (live claims of other turns excluded)."""
    store = services.store
    now = services._now_ms()
    held: set[str] = set()
    for _, record in store.items(CLAIMS_NS, store_key(session_key)):
        if isinstance(record, dict) and record.get("until_ms", 0) > now:
            held.update(str(i) for i in record.get("ids", ()))
    seen: set[tuple[str, str]] = set()
    out: list[dict[str, Any]] = []
    for entry in store.peek(QUEUE_NS, session_key):
        if not isinstance(entry, dict) or _expired(entry, now) or entry.get("id") in held:
            continue
        plugin_id = str(entry.get("plugin_id"))
        if not services.prompt_injection_allowed(plugin_id):
            continue
        key = entry.get("idempotency_key")
        if key is not None:
            if (plugin_id, key) in seen:
                continue
            seen.add((plugin_id, key))
        out.append(entry)
    return out
