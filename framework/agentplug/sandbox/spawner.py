"""The spawner threads that start workers on demand and keep a pool of ready ones.

Starting a hardened worker takes a fresh interpreter (about a hundred milliseconds of CPU),
so a burst that empties the pool would otherwise run at cold-start speed: ``parallel``
threads start workers at the same time, on-demand requests first, then pool refills. Each
thread lives as long as the spawner, because a worker's parent-death signal is tied to the
thread that forked it.
"""

from __future__ import annotations

import collections
import concurrent.futures
import logging
import threading
import time

from agentplug.sandbox.errors import SandboxUnavailableError
from agentplug.sandbox.models import Language
from agentplug.sandbox.process import Worker, spawn_ready

__all__ = ["Spawner"]

_log = logging.getLogger("agentplug.sandbox.code_sandbox")


# A refill waits while runs are in flight (starting an interpreter costs a burst's runs
# their CPU), but never longer than this after it became due.
_REFILL_DEFER_S = 0.25


class Spawner:
    """Long-lived threads that start workers: on demand first, then pool refills."""

    def __init__(self, pool_size: int, parallel: int = 1) -> None:
        self._pool_size = pool_size
        self._busy = 0
        """Runs in flight (see :meth:`run_started`); refills yield to them for a moment."""
        self._due: float | None = None
        """When the pool first fell short of its size (``None``: it is full)."""
        self._cond = threading.Condition()
        self._ready: dict[Language, collections.deque[Worker]] = {
            "python": collections.deque(),
            "javascript": collections.deque(),
        }
        self._starting: dict[Language, int] = {"python": 0, "javascript": 0}
        """Refills in progress, per language (so that threads do not overfill the pool)."""
        self.peak_starting = 0
        """The most refills seen in progress at once (how parallel the refill really was)."""
        self._wanted: set[Language] = set()
        self._requests: collections.deque[tuple[Language, concurrent.futures.Future[Worker]]] = (
            collections.deque()
        )
        self._closed = False
        self._running = max(1, parallel)
        self._threads = [
            threading.Thread(target=self._main, name=f"agentplug-sandbox-spawner-{n}", daemon=True)
            for n in range(self._running)
        ]
        for thread in self._threads:
            thread.start()

    def acquire(self, language: Language) -> Worker | concurrent.futures.Future[Worker]:
        """A ready worker, or a future that the spawner thread will complete."""
        with self._cond:
            if self._closed:
                raise SandboxUnavailableError("the sandbox is closed")
            self._wanted.add(language)
            queue = self._ready[language]
            while queue:
                worker = queue.popleft()
                if worker.alive():
                    self._cond.notify_all()
                    return worker
                stale = worker
                threading.Thread(target=stale.destroy, daemon=True).start()
            fut: concurrent.futures.Future[Worker] = concurrent.futures.Future()
            self._requests.append((language, fut))
            self._cond.notify_all()
            return fut

    def run_started(self) -> None:
        """A run took a worker: refills wait until runs end (bounded)."""
        with self._cond:
            self._busy += 1

    def run_ended(self) -> None:
        """A run ended: refills may go on once no run is in flight."""
        with self._cond:
            self._busy -= 1
            if not self._busy:
                self._cond.notify_all()

    def ready_count(self, language: Language) -> int:
        """Ready workers of ``language``."""
        with self._cond:
            return len(self._ready[language])

    def prewarm(self, languages: tuple[Language, ...]) -> None:
        """Start keeping ready workers for ``languages``."""
        with self._cond:
            self._wanted.update(languages)
            self._cond.notify_all()

    def wait_warm(self, language: Language, timeout: float) -> bool:
        """Block until ``pool_size`` workers of ``language`` are ready (or timeout)."""
        deadline = time.monotonic() + timeout
        with self._cond:
            self._wanted.add(language)
            self._cond.notify_all()
            while len(self._ready[language]) < self._pool_size:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self._closed:
                    return False
                self._cond.wait(remaining)
            return True

    def _next_job(
        self,
    ) -> tuple[Language, concurrent.futures.Future[Worker] | None] | None:
        with self._cond:
            while True:
                if self._closed:
                    return None
                if self._requests:
                    lang, fut = self._requests.popleft()
                    return lang, fut
                short = [
                    lang
                    for lang in sorted(self._wanted)
                    if len(self._ready[lang]) + self._starting[lang] < self._pool_size
                ]
                if not short:
                    self._due = None
                    self._cond.wait()
                    continue
                now = time.monotonic()
                if self._due is None:
                    self._due = now
                wait = self._due + _REFILL_DEFER_S - now
                if self._busy and wait > 0:
                    self._cond.wait(wait)  # a run ending (or the deadline) wakes us
                    continue
                lang = short[0]
                self._starting[lang] += 1
                self.peak_starting = max(self.peak_starting, sum(self._starting.values()))
                return lang, None

    def _main(self) -> None:
        while True:
            job = self._next_job()
            if job is None:
                break
            language, fut = job
            if fut is not None and not fut.set_running_or_notify_cancel():
                continue
            try:
                worker = spawn_ready(language)
            except BaseException as exc:
                if fut is not None:
                    fut.set_exception(exc)
                else:
                    # Do not spin on a broken runtime: stop refilling until next use.
                    _log.warning("sandbox pool refill for %s failed: %s", language, exc)
                    with self._cond:
                        self._starting[language] -= 1
                        self._wanted.discard(language)
                continue
            if fut is not None:
                fut.set_result(worker)
                continue
            with self._cond:
                self._starting[language] -= 1
                if not self._closed:
                    self._ready[language].append(worker)
                    self._cond.notify_all()
                    continue
            worker.destroy()
        with self._cond:
            self._running -= 1
            last = self._running == 0
        if last:
            self._drain()

    def _drain(self) -> None:
        with self._cond:
            idle = [w for q in self._ready.values() for w in q]
            for q in self._ready.values():
                q.clear()
            requests = list(self._requests)
            self._requests.clear()
        for worker in idle:
            worker.destroy()
        for _, fut in requests:
            if fut.set_running_or_notify_cancel():
                fut.set_exception(SandboxUnavailableError("the sandbox is closed"))

    def close(self) -> None:
        """Stop the threads and destroy idle workers (the last thread drains on exit)."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        for thread in self._threads:
            if threading.current_thread() is not thread:
                thread.join(timeout=30)
