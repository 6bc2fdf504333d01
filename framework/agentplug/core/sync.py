"""A synchronous facade for hosts without an event loop.

``SyncHost`` owns a private event loop on a daemon thread, so handlers that outlive
their timeout keep running between calls (they are never cancelled) and every
dispatch from any thread is serialised onto that one loop.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine, Mapping
from typing import Any, Protocol, TypeVar

from agentplug_hookspecs import Context, Event, HookDecl

from agentplug.core.facade import SyncHookFacade
from agentplug.core.results import DispatchResult

__all__ = ["AsyncHost", "SyncHost"]

T = TypeVar("T")


class AsyncHost(Protocol):
    """The part of :class:`~agentplug.core.host.PluginHost` a :class:`SyncHost` drives."""

    @property
    def declarations(self) -> Mapping[str, HookDecl]: ...

    async def dispatch(
        self, hook: str, event: Any = None, ctx: Any = None, /
    ) -> DispatchResult[Any]: ...

    def call_sync(
        self, hook: str, event: Any = None, ctx: Any = None, /
    ) -> DispatchResult[Any]: ...

    async def aclose(self, timeout_s: float | None = None) -> list[str]: ...


class SyncHost:
    """Blocking API over a :class:`PluginHost`: ``SyncHost(host).hooks.before_tool_call(...)``."""

    def __init__(self, host: AsyncHost) -> None:
        self.host = host
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="agentplug-sync-host", daemon=True
        )
        self._thread.start()
        self.hooks = SyncHookFacade(self)
        """Typed blocking methods, one per built-in hook."""

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the host's loop and wait for its result."""
        if self._loop.is_closed():
            raise RuntimeError("this SyncHost is closed; create a new one")
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def dispatch(
        self,
        hook: str,
        event: Event | Mapping[str, Any] | None = None,
        ctx: Context | Mapping[str, Any] | None = None,
    ) -> DispatchResult[Any]:
        """Blocking :meth:`PluginHost.dispatch` (sync hooks run directly)."""
        decl = self.host.declarations.get(hook)
        if decl is not None and decl.kind.value == "sync":
            return self.host.call_sync(hook, event, ctx)
        return self.run(self.host.dispatch(hook, event, ctx))

    def close(self, timeout_s: float | None = None) -> list[str]:
        """Wait (bounded) for abandoned handlers, then stop the loop thread."""
        leftover = self.run(self.host.aclose(timeout_s))
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)
        self._loop.close()
        return leftover

    def __enter__(self) -> SyncHost:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
