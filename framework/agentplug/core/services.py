"""How services attach to a host without the core knowing them.

A *service* is anything built from a host that lives as long as the host: the state
store, session services, trusted tool policies, the action runtime. Each one is a class
(or function) that takes the host: ``SessionServices(host)``. The host keeps one instance
per factory in its :class:`ServiceRegistry`::

    sessions = host.services.get(SessionServices)     # typed: a SessionServices

The host's shortcut properties (``host.sessions``, ``host.store``, ...) resolve by
*name* through a table of ``"module:attribute"`` references. The core never fills that
table: the package root (``agentplug/__init__.py``, above every layer) does, so the
dependency runs from the services down to the core and never back. A host program can
replace a service before first use with ``host.services.put(name_or_factory, instance)``.

The same table names *outcome filters*: a reduction such as ``resolve_exec_env`` declares
a post-filter by name in its hookspec (``DictMerge(post_filter="exec_env")``) and the
security layer provides it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = [
    "ServiceRegistry",
    "outcome_filter",
    "wire_outcome_filter",
    "wire_service",
]

T = TypeVar("T")

_SERVICES: dict[str, str] = {}
"""Service name -> ``"module:factory"`` (the factory takes the host)."""
_OUTCOME_FILTERS: dict[str, str] = {}
"""Post-filter name (declared by a reduction) -> ``"module:function"``."""


def wire_service(name: str, reference: str) -> None:
    """Name the default factory of service ``name`` (``"package.module:Factory"``)."""
    _SERVICES[name] = reference


def wire_outcome_filter(name: str, reference: str) -> None:
    """Name the function behind the reduction post-filter ``name``."""
    _OUTCOME_FILTERS[name] = reference


def _resolve(reference: str) -> Any:
    # Not cached: each host caches its own instances, and the module that is current in
    # ``sys.modules`` wins (a test harness may reload modules between hosts).
    module, _, attribute = reference.partition(":")
    return getattr(importlib.import_module(module), attribute)


def outcome_filter(name: str) -> Callable[..., Any]:
    """The post-filter function wired under ``name``."""
    reference = _OUTCOME_FILTERS.get(name)
    if reference is None:
        raise LookupError(
            f"no outcome filter named {name!r} is wired (a hookspec declares it; import "
            "agentplug, which wires the built-in ones)"
        )
    function: Callable[..., Any] = _resolve(reference)
    return function


class ServiceRegistry:
    """The services of one host, created on first use (one instance per factory)."""

    __slots__ = ("_by_factory", "_by_name", "_host")

    def __init__(self, host: object) -> None:
        self._host = host
        self._by_factory: dict[Callable[..., Any], Any] = {}
        self._by_name: dict[str, Any] = {}

    def get(self, factory: Callable[[Any], T]) -> T:
        """The host's instance of ``factory``'s service (built with ``factory(host)``)."""
        service = self._by_factory.get(factory)
        if service is None:
            service = self._by_factory[factory] = factory(self._host)
        return service

    def named(self, name: str) -> Any:
        """The service wired under ``name`` (``"store"``, ``"sessions"``, ...)."""
        service = self._by_name.get(name)
        if service is None:
            reference = _SERVICES.get(name)
            if reference is None:
                raise LookupError(
                    f"no service named {name!r} is attached to this host; known: "
                    f"{', '.join(sorted(_SERVICES)) or 'none'}"
                )
            service = self.get(_resolve(reference))
            self._by_name[name] = service
        return service

    def put(self, key: str | Callable[..., Any], instance: Any) -> None:
        """Install a pre-built service under a name or a factory (before first use)."""
        if not isinstance(key, str):
            self._by_factory[key] = instance
            return
        self._by_name[key] = instance
        reference = _SERVICES.get(key)
        if reference is not None:
            self._by_factory[_resolve(reference)] = instance

    def has(self, name: str) -> bool:
        """Whether a service named ``name`` is wired (or was put)."""
        return name in self._by_name or name in _SERVICES

    def created(self, name: str) -> bool:
        """Whether the service named ``name`` exists already (without creating it)."""
        return name in self._by_name
