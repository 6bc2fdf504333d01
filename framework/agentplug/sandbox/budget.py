"""A bound on the memory of every sandboxed run together: :class:`SandboxBudget`.

Each code run asks for its own address-space limit (``memory_mb``) and the worker is
killed when it goes over. Without a shared bound, N concurrent runs may use N times that
limit: 200 concurrent ``code`` tests started 200 workers. A budget holds the sum of the
limits of the runs in progress under ``max_memory_mb``; a run that does not fit waits for
one to end (:meth:`SandboxBudget.reserve`) or is refused at once (:meth:`try_reserve`).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator

__all__ = ["DEFAULT_SANDBOX_MEMORY_MB", "SandboxBudget"]

DEFAULT_SANDBOX_MEMORY_MB = 1024
"""Default total: four runs at the default 256 MB limit each."""


class SandboxBudget:
    """The memory (in MB) that the sandboxed runs in progress may use together.

    Thread-safe; waiters are woken on their own event loop.
    """

    def __init__(self, max_memory_mb: int = DEFAULT_SANDBOX_MEMORY_MB) -> None:
        if max_memory_mb < 16:
            raise ValueError("max_memory_mb must be >= 16")
        self.max_memory_mb = max_memory_mb
        self._used = 0
        self._lock = threading.Lock()
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = []

    @property
    def in_use_mb(self) -> int:
        """The memory limits of the runs holding a reservation, added up."""
        with self._lock:
            return self._used

    def _check(self, memory_mb: int) -> None:
        if memory_mb > self.max_memory_mb:
            raise ValueError(
                f"a run limited to {memory_mb} MB can never fit the sandbox budget of "
                f"{self.max_memory_mb} MB; lower memory_mb or raise the budget"
            )

    def try_reserve(self, memory_mb: int) -> bool:
        """Reserve ``memory_mb`` now if it fits (then :meth:`release` it); else ``False``."""
        self._check(memory_mb)
        with self._lock:
            if self._used + memory_mb > self.max_memory_mb:
                return False
            self._used += memory_mb
            return True

    def release(self, memory_mb: int) -> None:
        """Give back a reservation and wake the runs waiting for room."""
        with self._lock:
            self._used = max(0, self._used - memory_mb)
            waiters, self._waiters = self._waiters, []
        for loop, event in waiters:
            with contextlib.suppress(RuntimeError):  # that waiter's loop is gone
                loop.call_soon_threadsafe(event.set)

    @contextlib.asynccontextmanager
    async def reserve(self, memory_mb: int) -> AsyncIterator[None]:
        """Hold ``memory_mb`` of the budget for the duration, waiting for room first."""
        self._check(memory_mb)
        loop = asyncio.get_running_loop()
        while True:
            with self._lock:
                if self._used + memory_mb <= self.max_memory_mb:
                    self._used += memory_mb
                    break
                event = asyncio.Event()
                self._waiters.append((loop, event))
            await event.wait()
        try:
            yield
        finally:
            self.release(memory_mb)
