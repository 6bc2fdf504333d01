"""What an approvals inbox shows: :func:`approvals_snapshot` and :func:`feed_version`.

A snapshot is the approvals awaiting a decision (oldest first, with the requesting
plugin's title, description and severity, the tool call's parameters and when it times
out) and the latest settled ones (newest first, with who decided and when). A shared
broker (a durable store) reads both from the store, so an approval pending on any gateway
sharing it is in the snapshot; an unshared one reads its own in-flight approvals and
history.

Every change notifies the store's :data:`~agentplug.services.approvals.shared.FEED_CHANNEL`
(the shared rows do it themselves, an unshared broker does it for its own), so a watcher
blocks in ``store.wait_change(FEED_CHANNEL, seen, timeout)`` and takes a new snapshot when
it returns a new version: no polling of the rows.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from agentplug_hookspecs import thaw

from agentplug.services.approvals.broker import ApprovalBroker
from agentplug.services.approvals.models import PendingApproval
from agentplug.services.approvals.shared import (
    DECISIONS_NAMESPACE,
    FEED_CHANNEL,
    expire_pending,
    list_pending,
)

__all__ = ["HISTORY_LIMIT", "approvals_snapshot", "feed_version", "pending_row"]

HISTORY_LIMIT = 50
"""Settled approvals a snapshot holds (the newest)."""


def feed_version(broker: ApprovalBroker) -> int:
    """The feed channel's version now (pass it to ``wait_change`` to wait for the next)."""
    return broker.store.version(FEED_CHANNEL)


def pending_row(pending: PendingApproval, *, gateway: str | None = None) -> dict[str, Any]:
    """The JSON row of one approval awaiting a decision (the same shape the shared store
    publishes)."""
    return {
        **pending.summary(),
        "params": thaw(pending.params),
        "created_at": pending.created_at,
        "expires_at": pending.created_at + pending.timeout_s,
        "gateway": gateway,
    }


def approvals_snapshot(broker: ApprovalBroker, *, history: int = HISTORY_LIMIT) -> dict[str, Any]:
    """``{"pending": [...], "history": [...], "shared": bool, "at": epoch}`` (see the
    module docstring). Raises :class:`~agentplug.store.StateStoreUnavailable` when a
    shared store cannot be reached."""
    if broker.shared:
        store = broker.store
        expire_pending(store, by=broker.gateway)  # rows of gateways that died waiting
        pending = list_pending(store)
        decided = [dict(v) for _, v in store.items(DECISIONS_NAMESPACE) if isinstance(v, Mapping)]
        decided.sort(key=lambda row: float(row.get("at", 0.0)), reverse=True)
        settled = [_settled_row(row) for row in decided[:history]]
    else:
        pending = [pending_row(p, gateway=broker.gateway) for p in broker.pending]
        latest = list(broker.history)[-history:] if history > 0 else []
        settled = [_settled_row(row) for row in reversed(latest)]
    return {"pending": pending, "history": settled, "shared": broker.shared, "at": time.time()}


def _settled_row(row: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "id": row.get("approval_id"),
        "title": row.get("title"),
        "tool_name": row.get("tool_name"),
        "plugin_id": row.get("plugin_id"),
        "severity": row.get("severity"),
        "run_id": row.get("run_id"),
        "resolution": row.get("resolution"),
        "by": row.get("by"),
        "at": row.get("at"),
        "gateway": row.get("gateway"),
    }
