"""``LISTEN/NOTIFY`` for :meth:`PostgresStore.wait_change`: one background connection
that wakes the waiters of this process when any gateway notifies a change channel.

The listener only counts notifications; waiters re-read the channel's version, and poll
every :data:`POLL_S` so a notification lost while reconnecting never hangs them.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

import psycopg

__all__ = ["NOTIFY_CHANNEL", "POLL_S", "ChangeListener"]

NOTIFY_CHANNEL = "agentplug_signals"
"""The PostgreSQL channel ``notify`` signals on (its payload is the change channel)."""
POLL_S = 0.25
"""A waiter re-reads the version at least this often."""

_log = logging.getLogger("agentplug.store.postgres")


class ChangeListener:
    """Counts notifications on :data:`NOTIFY_CHANNEL`, from a thread started on first use.

    ``describe`` turns a connection error into a line without secrets; ``name`` is the
    store as logs show it.
    """

    def __init__(
        self, url: str, *, connect_s: int, describe: Callable[[BaseException], str], name: str
    ) -> None:
        self._url = url
        self._connect_s = connect_s
        self._describe = describe
        self._name = name
        self._changed = threading.Condition()
        self._generation = 0
        self._thread: threading.Thread | None = None
        self._closed = threading.Event()

    def generation(self) -> int:
        """How many notifications arrived so far (starts listening on the first call)."""
        with self._changed:
            if self._thread is None and not self._closed.is_set():
                self._thread = threading.Thread(
                    target=self._listen, name="agentplug-state-listen", daemon=True
                )
                self._thread.start()
            return self._generation

    def wait(self, generation: int, timeout_s: float) -> None:
        """Block until a notification after ``generation`` or ``timeout_s`` passes."""
        with self._changed:
            if self._generation == generation:
                self._changed.wait(timeout_s)

    def _listen(self) -> None:
        while not self._closed.is_set():
            try:
                with psycopg.connect(
                    self._url, autocommit=True, connect_timeout=self._connect_s
                ) as conn:
                    conn.execute(f"LISTEN {NOTIFY_CHANNEL}")
                    while not self._closed.is_set():
                        for _ in conn.notifies(timeout=POLL_S, stop_after=1):
                            with self._changed:
                                self._generation += 1
                                self._changed.notify_all()
            except psycopg.Error as exc:
                # Waiters keep polling meanwhile; reconnect shortly.
                _log.warning("state store %s listener: %s", self._name, self._describe(exc))
                self._closed.wait(POLL_S)

    def close(self) -> None:
        """Stop listening (waits up to 2 s for the thread)."""
        self._closed.set()
        if self._thread is not None:
            self._thread.join(timeout=2)
