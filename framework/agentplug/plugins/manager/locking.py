"""Serialising the operations on one plugin (or the core): an :class:`asyncio.Lock` per
key inside the process, and an exclusive file lock under ``<state_dir>/locks/`` across
processes."""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, TypeVar

__all__ = ["OperationLocks"]

_T = TypeVar("_T")


class OperationLocks:
    """One lock per key (``plugin-<id>``, ``dist-<name>``, ``core``), held across the
    processes that share ``state_dir``."""

    def __init__(self, state_dir: Path) -> None:
        self._state_dir = state_dir
        self._locks: dict[str, asyncio.Lock] = {}

    @contextlib.asynccontextmanager
    async def serialized(self, key: str) -> AsyncIterator[None]:
        """Hold ``key``'s lock: first the one of this process, then the file lock (taken
        in a worker thread, so waiting for another process does not block the loop)."""
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock:
            safe = re.sub(r"[^A-Za-z0-9._-]", "_", key)
            file_lock = _FileLock(self._state_dir / "locks" / f"{safe}.lock")
            await asyncio.to_thread(file_lock.acquire)
            try:
                yield
            finally:
                file_lock.release()

    async def run_locked(self, key: str, fn: Callable[..., _T], *args: Any) -> _T:
        """``fn(*args)`` in a worker thread while holding ``key``'s lock."""
        async with self.serialized(key):
            return await asyncio.to_thread(fn, *args)


class _FileLock:
    """Exclusive ``flock`` on a file (no-op where ``fcntl`` is unavailable)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fh: Any = None

    def acquire(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fh = open(self.path, "a+")  # noqa: SIM115 - held until release()
        try:
            import fcntl

            fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        except ImportError:  # pragma: no cover - Windows
            pass
        self._fh = fh

    def release(self) -> None:
        fh, self._fh = self._fh, None
        if fh is not None:
            with contextlib.suppress(Exception):
                import fcntl

                fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
            fh.close()
