"""Pending approvals in the state store: listed and decided from any process sharing it.

The broker publishes each approval it waits on as a row of :data:`PENDING_NAMESPACE`
(``approvals.pending``, keyed by approval id). Any process that opens the same store (another
gateway, ``agentplug approvals pending|resolve``, the control API, chat ``/approve``)
lists those rows with :func:`list_pending` and decides one with :func:`resolve_pending`.

**Exactly once.** A decision is a row of :data:`DECISIONS_NAMESPACE` written with
``put_if_absent`` inside one ``atomic`` block that also removes the pending row, appends
the audit entry (queue ``audit`` of :data:`AUDIT_NAMESPACE`) and notifies the approval's
change channel (:func:`channel_for`). Of several processes deciding the same approval, one
wins; the others are told who did. A timeout is a decision too (``"timeout"``): the waiting
broker records it at its deadline, any process may record it for a row past its
``expires_at`` (:func:`expire_pending`), and whoever records first wins, so it fires once
however many gateways are up. A decision arriving after it is refused with
``approval X already timed out at ...; the tool call was blocked``.

Decision rows are kept (they are what makes the refusal possible), with the title, tool,
plugin and severity of what was decided (a history to show); ``expire_pending`` also drops
decision rows older than a day.

**The feed.** Publishing a pending approval and recording a decision both notify
:data:`FEED_CHANNEL`, so a watcher in any process sharing the store (the control room's
live inbox) learns of every change without polling the rows.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from agentplug.services.approvals.models import (
    PendingApproval,
    ResolveReply,
    decided_reply,
    parse_decision,
)
from agentplug.store import StateStore

__all__ = [
    "AUDIT_NAMESPACE",
    "DECISIONS_NAMESPACE",
    "FEED_CHANNEL",
    "PENDING_NAMESPACE",
    "channel_for",
    "expire_pending",
    "list_pending",
    "publish_pending",
    "record_decision",
    "resolve_pending",
    "stored_decision",
    "unknown_reply",
]

PENDING_NAMESPACE = "approvals.pending"
"""State-store namespace of approvals awaiting a decision (one row per approval id)."""
DECISIONS_NAMESPACE = "approvals.decisions"
"""State-store namespace of recorded decisions (``put_if_absent``: the first one wins)."""
AUDIT_NAMESPACE = "approvals"
"""Namespace of the ``audit`` queue: one entry per recorded decision."""
FEED_CHANNEL = "approvals.feed"
"""Change channel notified whenever an approval is published or decided (any approval)."""
_SHOWN_FIELDS = ("title", "tool_name", "plugin_id", "severity", "run_id")
_KEEP_DECISIONS_S = 86_400.0


def channel_for(approval_id: str) -> str:
    """The change channel notified when ``approval_id`` is decided."""
    return f"approvals:{approval_id}"


def publish_pending(store: StateStore, pending: PendingApproval, *, gateway: str) -> None:
    """Publish ``pending`` so that any process sharing ``store`` can list and decide it."""
    row = {
        **pending.summary(),
        "params": _plain(pending.params),
        "created_at": pending.created_at,
        "expires_at": pending.created_at + pending.timeout_s,
        "gateway": gateway,
    }
    with store.atomic():
        store.put(PENDING_NAMESPACE, pending.id, row)
        store.notify(FEED_CHANNEL)


def list_pending(store: StateStore) -> list[dict[str, Any]]:
    """Every published approval still awaiting a decision, oldest first."""
    rows = [v for _, v in store.items(PENDING_NAMESPACE) if isinstance(v, Mapping)]
    return sorted((dict(r) for r in rows), key=lambda r: (r.get("created_at", 0.0), r["id"]))


def stored_decision(store: StateStore, approval_id: str) -> dict[str, Any] | None:
    """The decision recorded for ``approval_id`` (``None`` while undecided)."""
    value = store.get(DECISIONS_NAMESPACE, approval_id)
    return dict(value) if isinstance(value, Mapping) else None


def record_decision(
    store: StateStore,
    approval_id: str,
    resolution: str,
    *,
    by: str,
    gateway: str | None = None,
) -> tuple[bool, dict[str, Any]]:
    """Record ``resolution`` for ``approval_id`` unless one is recorded already.

    ``by`` is who decided (the entrance: ``api``, ``cli``, ``chat``, ``plugin:<id>``...,
    or the recording gateway for a timeout); ``gateway`` the broker that recorded it, when
    that is another thing. Returns ``(won, decision)``: ``decision`` is the one that
    stands (this call's when ``won``). One atomic block: the decision row, removing the
    pending row, the audit entry and the channel notification commit together.
    """
    now = time.time()
    decision: dict[str, Any] = {
        "approval_id": approval_id,
        "resolution": resolution,
        "by": by,
        "at": now,
    }
    if gateway is not None and gateway != by:
        decision["gateway"] = gateway
    with store.atomic(channel_for(approval_id)):
        row = store.get(PENDING_NAMESPACE, approval_id)
        if isinstance(row, Mapping):  # what was decided, for a history to show
            decision.update({name: row.get(name) for name in _SHOWN_FIELDS})
        if not store.put_if_absent(DECISIONS_NAMESPACE, approval_id, decision):
            existing = stored_decision(store, approval_id)
            return False, existing if existing is not None else decision
        store.delete(PENDING_NAMESPACE, approval_id)
        audit = dict(decision)
        store.append(AUDIT_NAMESPACE, "audit", audit)
        store.notify(channel_for(approval_id))
        store.notify(FEED_CHANNEL)
    return True, decision


def resolve_pending(
    store: StateStore, approval_id: str, decision: str, *, by: str = "store"
) -> ResolveReply:
    """Decide a published approval from any process (exactly once; see the module doc).

    The reply's message is one line fit to show a person: unknown id, bad or unoffered
    decision, already decided (by whom), already timed out. Raises
    :class:`~agentplug.store.StateStoreUnavailable` when the store cannot be reached.
    """
    existing = stored_decision(store, approval_id)
    if existing is not None:
        return decided_reply(approval_id, existing)
    row = store.get(PENDING_NAMESPACE, approval_id)
    if not isinstance(row, Mapping):
        # The winner of a race removes the pending row in the transaction that records
        # its decision: a row gone since the first read is a decision to report.
        existing = stored_decision(store, approval_id)
        if existing is not None:
            return decided_reply(approval_id, existing)
        return unknown_reply(approval_id, [r["id"] for r in list_pending(store)])
    offered = [str(d) for d in row.get("allowed_decisions") or []]
    chosen = parse_decision(decision) if isinstance(decision, str) else None
    if chosen is None:
        return ResolveReply(
            False,
            f"{decision!r} is not a decision; answer one of {', '.join(offered)}",
            "invalid",
        )
    if chosen not in offered:
        return ResolveReply(
            False,
            f"{chosen!r} was not offered for approval {approval_id!r} ({row.get('title')!r}); "
            f"offered: {', '.join(offered)}",
            "invalid",
        )
    if time.time() >= float(row.get("expires_at", float("inf"))):
        _, stands = _record_timeout(store, row, noticed_by=by)
        return decided_reply(approval_id, stands)
    won, stands = record_decision(store, approval_id, chosen, by=by)
    if not won:
        return decided_reply(approval_id, stands)
    return ResolveReply(
        True,
        f"approval {approval_id!r} ({row.get('title')!r}): {chosen}",
        "resolved",
        by,
        float(stands["at"]),
    )


def _record_timeout(
    store: StateStore, row: Mapping[str, Any], *, noticed_by: str
) -> tuple[bool, dict[str, Any]]:
    """Record the timeout of the published ``row``: the asking gateway's (a timeout is
    its broker's decision, whoever happened to notice it), ``noticed_by`` as the gateway
    that wrote it down."""
    asker = str(row.get("gateway") or "timeout")
    return record_decision(store, str(row["id"]), "timeout", by=asker, gateway=noticed_by)


def unknown_reply(approval_id: str, pending_ids: list[str]) -> ResolveReply:
    """The refusal for an id nothing knows (listing what is pending instead)."""
    known = ", ".join(pending_ids)
    return ResolveReply(
        False,
        f"no pending approval with id {approval_id!r}"
        + (f"; pending: {known}" if known else "; nothing is pending"),
        "unknown",
    )


def expire_pending(store: StateStore, *, by: str = "store", now: float | None = None) -> int:
    """Record ``timeout`` for every published approval past its ``expires_at``.

    Returns how many timeouts *this call* recorded (a gateway that lost the race to
    another one counts none). Also drops decision rows older than a day.
    """
    now = time.time() if now is None else now
    fired = 0
    for row in list_pending(store):
        if now >= float(row.get("expires_at", float("inf"))):
            won, _ = _record_timeout(store, row, noticed_by=by)
            fired += won
    for key, value in store.items(DECISIONS_NAMESPACE):
        if isinstance(value, Mapping) and now - float(value.get("at", now)) > _KEEP_DECISIONS_S:
            store.delete(DECISIONS_NAMESPACE, key)
    return fired


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return repr(value)
