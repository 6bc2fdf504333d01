"""A minimal action runtime: a service map plus an action registry."""

from __future__ import annotations

from collections.abc import Mapping

from agentplug.actions.model import Action
from agentplug.actions.registry import HOST_OWNER, ActionRegistry

__all__ = ["SimpleActionRuntime"]


class SimpleActionRuntime:
    """A minimal :class:`ActionRuntime`: a service map plus an :class:`ActionRegistry`.

    ``register_action`` registers under ``owner`` (``"host"`` by default), so an action
    registered live clashes like any other.
    """

    def __init__(
        self,
        registry: ActionRegistry | None = None,
        services: Mapping[str, object] | None = None,
        *,
        owner: str = HOST_OWNER,
    ) -> None:
        self.registry = registry if registry is not None else ActionRegistry()
        self.owner = owner
        self._services: dict[str, object] = dict(services or {})

    def get_service(self, name: str) -> object | None:
        """Return the service registered under ``name``, or ``None``."""
        return self._services.get(name)

    def register_service(self, name: str, service: object) -> None:
        """Register (or replace) the service called ``name``."""
        self._services[name] = service

    def register_action(self, action: Action) -> None:
        """Register ``action`` in this runtime's registry under :attr:`owner`."""
        self.registry.register(action, self.owner)
