"""Every action a host knows, enabled or not, with where it comes from and why it is off.

``agentplug actions list`` prints :func:`list_actions` of a loaded runtime: built-ins
(those left out by ``actions.disabled`` included), actions of plugins (``provide_actions``
or a plugin's ``actions = [...]``), custom actions (disabled definitions included) and the
host's own.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, Field

from agentplug.actions.model import Action
from agentplug.actions.registry import HOST_OWNER, UNAVAILABLE

if TYPE_CHECKING:
    from agentplug.actions.runtime import AgentRuntime

__all__ = ["ActionListing", "list_actions", "unavailable_reason"]

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
    side_effects: bool = True
    """What the action declares (``agent.tools`` offers side-effect-free ones by default)."""
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
        side_effects=action.side_effects,
        custom_id=meta.get("custom_action_id"),
        handler=meta.get("handler_type"),
        parameters=[p.model_dump(mode="json") for p in action.parameters],
    )


def unavailable_reason(action: Action, actions_config: Mapping[str, Any]) -> str | None:
    """Why a registered ``action`` cannot run as configured (``None`` when it can).

    ``actions_config`` is the config's ``actions`` section. The reason is the action's
    :data:`~agentplug.actions.registry.UNAVAILABLE` metadata, or, for a custom action with a
    ``shell`` handler, that ``actions.shell.enabled`` is not true. ``agentplug actions list``
    shows such an action as not enabled, and no model is offered it.
    """
    reason = action.metadata.get(UNAVAILABLE)
    if reason is not None:
        return str(reason)
    if action.metadata.get("handler_type") == "shell":
        shell = actions_config.get("shell")
        if not (isinstance(shell, Mapping) and shell.get("enabled") is True):
            return "shell disabled: set actions.shell.enabled = true"
    return None


def list_actions(runtime: AgentRuntime) -> list[ActionListing]:
    """Every action of ``runtime`` (after ``await runtime.load()``), in registration order,
    then the built-ins and custom definitions that are turned off."""
    rows = []
    for action in runtime.registry:
        owner = runtime.registry.owner_of(action.name) or HOST_OWNER
        reason = unavailable_reason(action, runtime.host.config.actions)
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
                side_effects=definition.side_effects is not False,
                custom_id=definition.id,
                handler=definition.handler.type,
                parameters=[p.model_dump(mode="json") for p in definition.parameters],
            )
        )
    return rows
