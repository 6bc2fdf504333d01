"""The plugin-facing session API (``api.session``) and what it hands out.

:class:`SessionApi` bundles ``state`` (``register_session_extension``), ``workflow``
(``enqueue_next_turn_injection``) and ``on_cleanup`` for one plugin; each call goes to
the host side (:class:`~agentplug.services.sessions.services.SessionServices`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypeVar

from pydantic import BaseModel, ConfigDict

__all__ = ["ExtensionSpec", "InjectionReceipt", "SessionApi", "SessionExtension"]

_C = TypeVar("_C", bound=Callable[..., Any])


@dataclass(frozen=True, slots=True)
class ExtensionSpec:
    """A registered session extension: owner, name, default state and cleanup callback."""

    plugin_id: str
    name: str
    default: Any
    description: str
    cleanup: Callable[..., Any] | None


class InjectionReceipt(BaseModel):
    """What ``enqueue_next_turn_injection`` returns."""

    model_config = ConfigDict(frozen=True)

    accepted: bool
    """``False`` when the plugin's prompt injection is disabled (nothing was queued)."""
    id: str | None = None
    """The queued entry (the first one, for a collapsed duplicate)."""
    duplicate: bool = False
    """``True`` when an entry with the same ``idempotency_key`` already existed."""
    reason: str | None = None


class _SessionBackend(Protocol):
    """What the plugin-facing objects call on the host side (``SessionServices``)."""

    def register_extension(
        self,
        plugin_id: str,
        name: str,
        *,
        default: Any = None,
        description: str = "",
        cleanup: Callable[..., Any] | None = None,
    ) -> SessionExtension: ...

    def get_state(self, session_key: str, plugin_id: str, name: str) -> Any: ...

    def patch(
        self, session_key: str, plugin_id: str, name: str, patch: Mapping[str, Any]
    ) -> Any: ...

    def enqueue_injection(
        self,
        plugin_id: str,
        session_key: str,
        text: str,
        *,
        placement: Literal["prepend", "append"] = "prepend",
        ttl_ms: int | None = None,
        idempotency_key: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> InjectionReceipt: ...

    def add_cleanup(self, plugin_id: str, callback: Callable[..., Any]) -> None: ...


class SessionExtension:
    """A registered extension: read and patch this plugin's state in one session."""

    def __init__(self, services: _SessionBackend, spec: ExtensionSpec) -> None:
        self._services = services
        self._spec = spec

    @property
    def name(self) -> str:
        """The extension name (unique per plugin)."""
        return self._spec.name

    @property
    def description(self) -> str:
        """What the state means (for UIs listing ``plugin_extensions``)."""
        return self._spec.description

    def get(self, session_key: str) -> Any:
        """The state in ``session_key`` (the default when never set)."""
        return self._services.get_state(session_key, self._spec.plugin_id, self._spec.name)

    def patch(self, session_key: str, patch: Mapping[str, Any]) -> Any:
        """Apply a JSON merge patch; return the new state."""
        return self._services.patch(session_key, self._spec.plugin_id, self._spec.name, patch)


class _StateApi:
    def __init__(self, services: _SessionBackend, plugin_id: str) -> None:
        self._services = services
        self._plugin_id = plugin_id

    def register_session_extension(
        self,
        name: str,
        *,
        default: Any = None,
        description: str = "",
        cleanup: Callable[..., Any] | None = None,
    ) -> SessionExtension:
        """Declare small JSON-compatible per-session state owned by this plugin.

        ``default`` is what a session shows before the first patch. ``cleanup``, when
        given, is called like an ``on_cleanup`` callback (``reason``, ``session_key``).
        """
        return self._services.register_extension(
            self._plugin_id, name, default=default, description=description, cleanup=cleanup
        )


class _WorkflowApi:
    def __init__(self, services: _SessionBackend, plugin_id: str) -> None:
        self._services = services
        self._plugin_id = plugin_id

    def enqueue_next_turn_injection(
        self,
        session_key: str,
        text: str,
        placement: Literal["prepend", "append"] = "prepend",
        ttl_ms: int | None = None,
        idempotency_key: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> InjectionReceipt:
        """Deliver ``text`` to the next model turn of ``session_key``, exactly once."""
        return self._services.enqueue_injection(
            self._plugin_id,
            session_key,
            text,
            placement=placement,
            ttl_ms=ttl_ms,
            idempotency_key=idempotency_key,
            metadata=metadata,
        )


class SessionApi:
    """``api.session``: ``state``, ``workflow`` and ``on_cleanup`` for one plugin."""

    def __init__(self, services: _SessionBackend, plugin_id: str) -> None:
        self.plugin_id = plugin_id
        self.state = _StateApi(services, plugin_id)
        """``register_session_extension(...)``."""
        self.workflow = _WorkflowApi(services, plugin_id)
        """``enqueue_next_turn_injection(...)``."""
        self._services = services

    def on_cleanup(self, callback: _C) -> _C:
        """Call ``callback(reason, session_key)`` on reset/delete/disable/restart.

        ``session_key`` is ``None`` for plugin-wide cleanups (``disable``, ``restart``).
        A callback taking one argument gets ``reason`` only. Returns ``callback`` (so
        it works as a decorator). Failures are logged.
        """
        self._services.add_cleanup(self.plugin_id, callback)
        return callback
