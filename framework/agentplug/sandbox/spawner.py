"""The spawner thread that starts workers on demand and keeps a pool of ready ones."""

from __future__ import annotations

import collections
import concurrent.futures
import logging
import threading
import time

from agentplug.sandbox.errors import SandboxUnavailableError
from agentplug.sandbox.models import Language
from agentplug.sandbox.process import _spawn_ready, _Worker

_log = logging.getLogger("agentplug.sandbox.code_sandbox")


class _Spawner:
    """Long-lived thread that starts workers: on demand first, then pool refills."""

    def __init__(self, pool_size: int) -> None:
        self._pool_size = pool_size
        self._cond = threading.Condition()
        self._ready: dict[Language, collections.deque[_Worker]] = {
            "python": collections.deque(),
            "javascript": collections.deque(),
        }
        self._wanted: set[Language] = set()
        self._requests: collections.deque[tuple[Language, concurrent.futures.Future[_Worker]]] = (
            collections.deque()
        )
        self._closed = False
        self._thread = threading.Thread(
            target=self._main, name="agentplug-sandbox-spawner", daemon=True
        )
        self._thread.start()

    def acquire(self, language: Language) -> _Worker | concurrent.futures.Future[_Worker]:
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
            fut: concurrent.futures.Future[_Worker] = concurrent.futures.Future()
            self._requests.append((language, fut))
            self._cond.notify_all()
            return fut

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
    ) -> tuple[Language, concurrent.futures.Future[_Worker] | None] | None:
        with self._cond:
            while True:
                if self._closed:
                    return None
                if self._requests:
                    lang, fut = self._requests.popleft()
                    return lang, fut
                for lang in sorted(self._wanted):
                    if len(self._ready[lang]) < self._pool_size:
                        return lang, None
                self._cond.wait()

    def _main(self) -> None:
        while True:
            job = self._next_job()
            if job is None:
                break
            language, fut = job
            if fut is not None and not fut.set_running_or_notify_cancel():
                continue
            try:
                worker = _spawn_ready(language)
            except BaseException as exc:
                if fut is not None:
                    fut.set_exception(exc)
                else:
                    # Do not spin on a broken runtime: stop refilling until next use.
                    _log.warning("sandbox pool refill for %s failed: %s", language, exc)
                    with self._cond:
                        self._wanted.discard(language)
                continue
            if fut is not None:
                fut.set_result(worker)
                continue
            with self._cond:
                if not self._closed:
                    self._ready[language].append(worker)
                    self._cond.notify_all()
                    continue
            worker.destroy()
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
        """Stop the thread and destroy idle workers (the thread drains on exit)."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout=30)
