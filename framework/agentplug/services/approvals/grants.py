"""Standing ``allow-always`` grants: their scope key and their storage.

A grant is keyed by its scope (plugin id, tool name, request title and severity; see
:func:`grant_id_for`) and kept in the state store under :data:`GRANTS_NAMESPACE`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from agentplug_hookspecs.tools import ApprovalRequest

from agentplug.store import StateStore

__all__ = ["GRANTS_NAMESPACE", "Grant", "grant_id_for", "list_grants", "revoke_grant"]

GRANTS_NAMESPACE = "approvals.grants"
"""State-store namespace of standing ``allow-always`` grants."""


@dataclass(frozen=True)
class Grant:
    """A standing ``allow-always`` decision."""

    grant_id: str
    plugin_id: str | None
    tool_name: str
    title: str
    severity: str
    created_at: float
    approval_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "grant_id": self.grant_id,
            "plugin_id": self.plugin_id,
            "tool_name": self.tool_name,
            "title": self.title,
            "severity": self.severity,
            "created_at": self.created_at,
            "approval_id": self.approval_id,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Grant:
        return cls(
            grant_id=str(data["grant_id"]),
            plugin_id=data.get("plugin_id"),
            tool_name=str(data.get("tool_name", "")),
            title=str(data.get("title", "")),
            severity=str(data.get("severity", "info")),
            created_at=float(data.get("created_at", 0.0)),
            approval_id=data.get("approval_id"),
        )


def grant_id_for(plugin_id: str | None, tool_name: str, request: ApprovalRequest) -> str:
    """The stable grant id (scope key) of a request.

    ``grant-`` + the first 24 hex digits of SHA-256 over the JSON array
    ``["v1", plugin_id, tool_name, title, severity]``. The plugin id is the one the
    runtime stamped, so a plugin cannot borrow another plugin's grant.
    """
    scope = json.dumps(
        ["v1", plugin_id or "", tool_name, request.title, request.severity],
        ensure_ascii=False,
        separators=(",", ":"),
    )
    return "grant-" + hashlib.sha256(scope.encode("utf-8")).hexdigest()[:24]


def list_grants(store: StateStore) -> list[Grant]:
    """Every standing grant in ``store`` (sorted by creation time)."""
    grants = []
    for _, value in store.items(GRANTS_NAMESPACE):
        if isinstance(value, Mapping) and "grant_id" in value:
            try:
                grants.append(Grant.from_dict(value))
            except (TypeError, ValueError, KeyError):
                continue
    return sorted(grants, key=lambda g: (g.created_at, g.grant_id))


def revoke_grant(store: StateStore, grant_id: str) -> bool:
    """Remove a grant; ``True`` when it existed."""
    return store.delete(GRANTS_NAMESPACE, grant_id)
