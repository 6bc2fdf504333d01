"""What a host declares and what its plugins registered, as JSON-compatible rows.

:func:`hook_summary` describes one declared hook (``agentplug hooks --json``, the hook
reference, the control room's hook catalogue); :func:`plugin_rows` describes every
registered or failed plugin with each handler's effective priority, timeout (and where
the timeout came from) and gate (``agentplug plugins --json``, ``GET /api/plugins``).
Both live here, under the command line and the control API that show them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agentplug_hookspecs import HookDecl

from agentplug.core.overruns import overrun_notes

if TYPE_CHECKING:
    from agentplug.core.host import HookHost

__all__ = ["hook_summary", "plugin_rows"]


def hook_summary(decl: HookDecl) -> dict[str, Any]:
    """Machine-readable summary of one hook (``agentplug hooks --json``)."""
    dep = decl.deprecation
    return {
        "name": decl.name,
        "group": decl.group,
        "kind": decl.kind.value,
        "firstresult": decl.firstresult,
        "default_timeout_ms": decl.default_timeout_ms,
        "failure": decl.failure.value,
        "conversation_gate": decl.conversation_gate,
        "prompt_gate": decl.prompt_gate,
        "deprecated": dep is not None,
        "replacement": dep.replacement if dep else None,
        "alias_of": dep.alias_of if dep else None,
        "removed_in": dep.removed_in if dep else None,
        "reduction": decl.reduction.describe(),
        "event": decl.event.__name__,
        "ctx": decl.ctx.__name__,
        "result": decl.result.__name__ if decl.result else None,
        "outcome": decl.outcome.__name__,
    }


def plugin_rows(host: HookHost) -> list[dict[str, Any]]:
    """One row per registered or failed plugin, with its handlers' effective settings."""
    rows = []
    for record in host.plugins:
        hooks = []
        for hook in record.hooks + record.refused_hooks:
            decl = host.declarations[hook]
            target = (
                decl.deprecation.alias_of
                if decl.deprecation and decl.deprecation.alias_of
                else hook
            )
            for h in host.plan(target):
                if h.plugin_id == record.plugin_id and h.hook == hook:
                    hooks.append(
                        {
                            "hook": hook,
                            "priority": h.priority,
                            "timeout_ms": None
                            if h.timeout_s is None
                            else round(h.timeout_s * 1000),
                            "timeout_source": h.timeout_source,
                            "gate": h.gate,
                        }
                    )
        row = {**record.model_dump(mode="json", exclude={"hooks"}), "hooks": hooks}
        row["warnings"] = row["warnings"] + overrun_notes(record.plugin_id)
        rows.append(row)
    rows += [r.model_dump(mode="json") for r in host.failed_plugins]
    return rows
