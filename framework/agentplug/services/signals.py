"""Abort signals: the seed's ``AbortController`` / ``AbortSignal`` for asyncio code.

A signal is aborted at most once, with a ``reason``. Code holding it can poll
``signal.aborted``, ``await signal.wait()``, register ``add_callback(fn)`` or call
``throw_if_aborted()``. ``AbortSignal.any([...])`` aborts as soon as one source does
(the seed's ``AbortSignal.any``). Only an :class:`AbortController` (or the runtime)
aborts a signal: a handler that receives one can observe it but not trigger it.

Thread safety: ``abort`` may be called from any thread; waiters are woken on their own
event loop through ``call_soon_threadsafe`` and callbacks run in the aborting thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import weakref
from collections.abc import Callable, Iterable
from typing import Any

__all__ = ["AbortController", "AbortError", "AbortSignal", "abortable_sleep"]

log = logging.getLogger("agentplug.signals")


class AbortError(Exception):
    """Raised by :meth:`AbortSignal.throw_if_aborted` and :func:`abortable_sleep`."""

    def __init__(self, reason: Any = None) -> None:
        self.reason = reason
        super().__init__("the operation was aborted" if reason is None else str(reason))


AbortCallback = Callable[["AbortSignal"], Any]


class _Link:
    """A source->combined-signal link that does not keep the combined signal alive."""

    __slots__ = ("target",)

    def __init__(self, target: AbortSignal) -> None:
        self.target: weakref.ReferenceType[AbortSignal] = weakref.ref(target)

    @property
    def alive(self) -> bool:
        target = self.target()
        return target is not None and not target.aborted

    def __call__(self, source: AbortSignal) -> None:
        target = self.target()
        if target is not None:
            target._abort(source.reason)


class AbortSignal:
    """Observable side of an abort: ``aborted``, ``reason``, ``wait()``, callbacks."""

    __slots__ = ("__weakref__", "_aborted", "_callbacks", "_lock", "_reason", "_waiters")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._aborted = False
        self._reason: Any = None
        self._callbacks: list[AbortCallback] = []
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[Any]]] = []

    def __repr__(self) -> str:
        state = f"aborted reason={self._reason!r}" if self._aborted else "pending"
        return f"<AbortSignal {state}>"

    @property
    def aborted(self) -> bool:
        """``True`` once the signal was aborted."""
        return self._aborted

    @property
    def reason(self) -> Any:
        """Why it was aborted (``None`` while pending)."""
        return self._reason

    async def sleep(self, delay_s: float) -> None:
        """Sleep ``delay_s`` seconds; raise :class:`AbortError` as soon as this aborts."""
        await abortable_sleep(delay_s, self)

    def throw_if_aborted(self) -> None:
        """Raise :class:`AbortError` (or the reason itself, if an exception) when aborted."""
        if not self._aborted:
            return
        if isinstance(self._reason, BaseException):
            raise self._reason
        raise AbortError(self._reason)

    def add_callback(self, callback: AbortCallback) -> Callable[[], None]:
        """Call ``callback(signal)`` once on abort (at once if already aborted).

        Failures are logged, never raised. Returns a function that unregisters it.
        """
        with self._lock:
            if not self._aborted:
                if isinstance(callback, _Link):
                    self._callbacks = [
                        c for c in self._callbacks if not isinstance(c, _Link) or c.alive
                    ]
                self._callbacks.append(callback)
                return lambda: self.remove_callback(callback)
        _run_callback(callback, self)
        return lambda: None

    def remove_callback(self, callback: AbortCallback) -> None:
        """Forget ``callback`` (no error when it is not registered)."""
        with self._lock:
            self._callbacks = [c for c in self._callbacks if c is not callback]

    async def wait(self) -> Any:
        """Wait until the signal is aborted; return the reason."""
        loop = asyncio.get_running_loop()
        with self._lock:
            if self._aborted:
                return self._reason
            future: asyncio.Future[Any] = loop.create_future()
            self._waiters.append((loop, future))
        try:
            return await future
        finally:
            with self._lock:
                self._waiters = [(lp, f) for lp, f in self._waiters if f is not future]

    def _abort(self, reason: Any = None) -> bool:
        with self._lock:
            if self._aborted:
                return False
            self._aborted = True
            self._reason = AbortError() if reason is None else reason
            callbacks, self._callbacks = self._callbacks, []
            waiters, self._waiters = self._waiters, []
        for loop, future in waiters:
            # A closed loop raises RuntimeError: nobody is waiting there any more.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(_resolve, future, self._reason)
        for callback in callbacks:
            _run_callback(callback, self)
        return True

    @staticmethod
    def any(signals: Iterable[AbortSignal]) -> AbortSignal:
        """A signal aborted as soon as one of ``signals`` is (with that one's reason)."""
        combined = AbortSignal()
        sources = list(signals)
        for source in sources:
            if source.aborted:
                combined._abort(source.reason)
                return combined
        for source in sources:
            source.add_callback(_Link(combined))
        return combined

    @staticmethod
    def aborted_with(reason: Any = None) -> AbortSignal:
        """An already-aborted signal (the seed's ``AbortSignal.abort(reason)``)."""
        signal = AbortSignal()
        signal._abort(reason)
        return signal


class AbortController:
    """Owns a signal and aborts it: ``controller.abort(reason)``."""

    __slots__ = ("signal",)

    def __init__(self) -> None:
        self.signal = AbortSignal()
        """The signal to hand to the code that must stop."""

    def abort(self, reason: Any = None) -> bool:
        """Abort the signal; ``False`` when it was already aborted (the first reason stays)."""
        return self.signal._abort(reason)

    @property
    def aborted(self) -> bool:
        """Whether :attr:`signal` is aborted."""
        return self.signal.aborted


def _resolve(future: asyncio.Future[Any], reason: Any) -> None:
    if not future.done():
        future.set_result(reason)


def _run_callback(callback: AbortCallback, signal: AbortSignal) -> None:
    try:
        callback(signal)
    except Exception as exc:
        # Type only: an abort reason may be arbitrary text.
        log.warning(
            "abort callback %s failed: %s",
            getattr(callback, "__qualname__", type(callback).__name__),
            type(exc).__name__,
        )


async def abortable_sleep(delay_s: float, signal: AbortSignal | None = None) -> None:
    """Sleep ``delay_s`` seconds; raise :class:`AbortError` as soon as ``signal`` aborts."""
    if signal is None:
        await asyncio.sleep(delay_s)
        return
    signal.throw_if_aborted()
    waiter = asyncio.ensure_future(signal.wait())
    try:
        done, _ = await asyncio.wait((waiter,), timeout=delay_s)
    finally:
        if not waiter.done():
            waiter.cancel()
    if done:
        signal.throw_if_aborted()
