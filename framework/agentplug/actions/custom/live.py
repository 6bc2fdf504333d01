"""Live registration: adding a custom action to a running runtime, without a restart.

The host binds its runtime with :func:`bind_runtime`; :func:`register_custom_action_live`
uses it when no runtime is given.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from agentplug.actions.custom.convert import def_to_action
from agentplug.actions.custom.models import CustomActionDef
from agentplug.actions.custom.services import CustomActionServices
from agentplug.actions.model import Action, ActionRuntime

__all__ = ["bind_runtime", "register_custom_action_live"]

logger = logging.getLogger("agentplug.actions")

_bound_runtime: ActionRuntime | None = None


def bind_runtime(runtime: ActionRuntime | None) -> None:
    """Set (or clear with ``None``) the runtime live registration uses by default.

    The host binds its runtime once it is started and clears it when it stops, so a UI
    creating an action between runs gets ``None`` rather than an action on a dead runtime.
    """
    global _bound_runtime
    _bound_runtime = runtime


def register_custom_action_live(
    defn: CustomActionDef | Mapping[str, Any],
    runtime: ActionRuntime | None = None,
    *,
    services: CustomActionServices | None = None,
) -> Action | None:
    """Convert ``defn`` and register it on ``runtime`` now, without a restart.

    Uses the runtime bound with :func:`bind_runtime` when ``runtime`` is omitted, and returns
    ``None`` when there is none. A name clash raises
    :class:`~agentplug.actions.registry.ActionConflictError` from the runtime.
    """
    target = runtime if runtime is not None else _bound_runtime
    if target is None:
        logger.warning(
            "custom action not registered live: no runtime is running; it will load from "
            "the config at the next start"
        )
        return None
    action = def_to_action(defn, services=services)
    target.register_action(action)
    return action
