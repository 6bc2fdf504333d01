"""Every action a host knows, enabled or not, with where it comes from and why it is off.

``agentplug actions list`` prints :func:`list_actions` of a loaded runtime: built-ins
(those left out by ``actions.disabled`` included), actions of plugins (``provide_actions``
or a plugin's ``actions = [...]``), custom actions (disabled definitions included) and the
host's own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, Field

from agentplug.actions.model import Action
from agentplug.actions.registry import HOST_OWNER, UNAVAILABLE

if TYPE_CHECKING:
    from agentplug.actions.runtime import AgentRuntime

__all__ = ["ActionListing", "list_actions"]

BUILTIN_OWNER = "builtin"
CUSTOM_OWNER = "custom-actions"

Source = Literal["builtin", "plugin", "custom", "host"]


class ActionListing(BaseModel):
    """One action as ``agentplug actions list`` shows it."""

    name: str
    description: str
    source: Source
    """``builtin``, ``plugin``, ``custom`` or ``host``."""
    owner: str
    """``builtin``, the plugin id, ``custom-actions`` or ``host``."""
    enabled: bool
    reason: str | None = None
    """Why it is not enabled (names the setting that turns it on)."""
    custom_id: str | None = None
    handler: str | None = None
    """``http``, ``shell`` or ``code`` for custom actions."""
    parameters: list[dict[str, Any]] = Field(default_factory=list)


def _source(owner: str) -> Source:
    if owner == BUILTIN_OWNER:
        return "builtin"
    if owner == CUSTOM_OWNER:
        return "custom"
    if owner == HOST_OWNER:
        return "host"
    return "plugin"


def _listing(action: Action, owner: str, enabled: bool, reason: str | None) -> ActionListing:
    meta = action.metadata
    return ActionListing(
        name=action.name,
        description=action.description,
        source=_source(owner),
        owner=owner,
        enabled=enabled,
        reason=reason,
        custom_id=meta.get("custom_action_id"),
        handler=meta.get("handler_type"),
        parameters=[p.model_dump(mode="json") for p in action.parameters],
    )


def list_actions(runtime: AgentRuntime) -> list[ActionListing]:
    """Every action of ``runtime`` (after ``await runtime.load()``), in registration order,
    then the built-ins and custom definitions that are turned off."""
    shell_on = (runtime.host.config.actions.get("shell") or {}).get("enabled") is True
    rows = []
    for action in runtime.registry:
        owner = runtime.registry.owner_of(action.name) or HOST_OWNER
        reason = action.metadata.get(UNAVAILABLE)
        if reason is None and action.metadata.get("handler_type") == "shell" and not shell_on:
            reason = "shell disabled: set actions.shell.enabled = true"
        rows.append(_listing(action, owner, reason is None, reason))
    for action in runtime.disabled_builtins:
        reason = f"disabled by actions.disabled (remove {action.name!r} from it)"
        rows.append(_listing(action, BUILTIN_OWNER, False, reason))
    for definition in runtime.custom.disabled if runtime.custom else []:
        rows.append(
            ActionListing(
                name=definition.name,
                description=definition.description,
                source="custom",
                owner=CUSTOM_OWNER,
                enabled=False,
                reason=f"disabled in customActions (id {definition.id!r}: set enabled = true)",
                custom_id=definition.id,
                handler=definition.handler.type,
                parameters=[p.model_dump(mode="json") for p in definition.parameters],
            )
        )
    return rows
