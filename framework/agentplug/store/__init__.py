"""One state store for grants, session-extension state and injection queues.

Two implementations: :class:`SQLiteStore` (the embedded default; survives restarts,
safe with several processes on one machine through SQLite's WAL and ``BEGIN
IMMEDIATE`` write transactions, and never loses data between two writes because every
write commits with ``synchronous=FULL``) and :class:`MemoryStore` (tests).

Values are JSON-compatible. Keys live in namespaces (``approvals.grants``,
``session.ext``, ``session.injections`` ...). A host may replace the store with its
own implementation of :class:`StateStore`.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

__all__ = ["MemoryStore", "SQLiteStore", "StateStore", "host_store", "open_store"]


@runtime_checkable
class StateStore(Protocol):
    """Namespaced JSON key/value store with atomic batches and append-only queues."""

    def get(self, namespace: str, key: str) -> Any | None:
        """The value at ``key`` or ``None``."""
        ...

    def put(self, namespace: str, key: str, value: Any) -> None:
        """Store ``value`` (JSON-compatible) at ``key``."""
        ...

    def delete(self, namespace: str, key: str) -> bool:
        """Remove ``key``; ``True`` when it existed."""
        ...

    def items(self, namespace: str, prefix: str = "") -> list[tuple[str, Any]]:
        """``(key, value)`` pairs whose key starts with ``prefix``, sorted by key."""
        ...

    def delete_prefix(self, namespace: str, prefix: str) -> int:
        """Remove every key starting with ``prefix``; return how many."""
        ...

    def append(self, namespace: str, queue: str, value: Any) -> int:
        """Append ``value`` to ``queue``; return its sequence number."""
        ...

    def drain(self, namespace: str, queue: str) -> list[Any]:
        """Remove and return every value of ``queue`` in append order (atomically)."""
        ...

    def peek(self, namespace: str, queue: str) -> list[Any]:
        """Every value of ``queue`` in order, without removing it."""
        ...

    def clear_queue(self, namespace: str, queue: str) -> int:
        """Remove every value of ``queue``; return how many."""
        ...

    def close(self) -> None:
        """Release resources."""
        ...


def _dump(value: Any) -> str:
    try:
        return json.dumps(value, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"state values must be JSON-compatible: {exc}") from None


class MemoryStore:
    """In-process store for tests (same semantics, nothing persisted)."""

    def __init__(self) -> None:
        self._kv: dict[tuple[str, str], str] = {}
        self._queues: dict[tuple[str, str], list[tuple[int, str]]] = {}
        self._seq = 0
        self._lock = threading.Lock()

    def get(self, namespace: str, key: str) -> Any | None:
        with self._lock:
            raw = self._kv.get((namespace, key))
        return None if raw is None else json.loads(raw)

    def put(self, namespace: str, key: str, value: Any) -> None:
        raw = _dump(value)
        with self._lock:
            self._kv[(namespace, key)] = raw

    def delete(self, namespace: str, key: str) -> bool:
        with self._lock:
            return self._kv.pop((namespace, key), None) is not None

    def items(self, namespace: str, prefix: str = "") -> list[tuple[str, Any]]:
        with self._lock:
            rows = [
                (k, json.loads(v))
                for (ns, k), v in self._kv.items()
                if ns == namespace and k.startswith(prefix)
            ]
        return sorted(rows, key=lambda kv: kv[0])

    def delete_prefix(self, namespace: str, prefix: str) -> int:
        with self._lock:
            doomed = [k for k in self._kv if k[0] == namespace and k[1].startswith(prefix)]
            for k in doomed:
                del self._kv[k]
        return len(doomed)

    def append(self, namespace: str, queue: str, value: Any) -> int:
        raw = _dump(value)
        with self._lock:
            self._seq += 1
            self._queues.setdefault((namespace, queue), []).append((self._seq, raw))
            return self._seq

    def drain(self, namespace: str, queue: str) -> list[Any]:
        with self._lock:
            rows = self._queues.pop((namespace, queue), [])
        return [json.loads(raw) for _, raw in rows]

    def peek(self, namespace: str, queue: str) -> list[Any]:
        with self._lock:
            rows = list(self._queues.get((namespace, queue), []))
        return [json.loads(raw) for _, raw in rows]

    def clear_queue(self, namespace: str, queue: str) -> int:
        with self._lock:
            return len(self._queues.pop((namespace, queue), []))

    def close(self) -> None:
        return None


_SCHEMA = """
CREATE TABLE IF NOT EXISTS kv (
    namespace TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL, updated REAL NOT NULL,
    PRIMARY KEY (namespace, key)
);
CREATE TABLE IF NOT EXISTS queue (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    namespace TEXT NOT NULL, queue TEXT NOT NULL, value TEXT NOT NULL, created REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS queue_by_name ON queue (namespace, queue, seq);
"""


class SQLiteStore:
    """Durable store in one SQLite file (WAL; safe across processes on one machine)."""

    def __init__(self, path: str | Path, *, busy_timeout_ms: int = 10_000) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        self._busy_timeout_ms = busy_timeout_ms
        self._connections: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        # executescript manages its own transaction; IF NOT EXISTS makes it safe to run
        # from several processes at once.
        self._db().executescript(_SCHEMA)

    def _db(self) -> sqlite3.Connection:
        db: sqlite3.Connection | None = getattr(self._local, "db", None)
        if db is None:
            # One connection per thread; autocommit mode so transactions are explicit.
            db = sqlite3.connect(
                self.path,
                timeout=self._busy_timeout_ms / 1000,
                isolation_level=None,
                check_same_thread=False,
            )
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=FULL")
            db.execute(f"PRAGMA busy_timeout={int(self._busy_timeout_ms)}")
            self._local.db = db
            with self._lock:
                self._connections.append(db)
        return db

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        db = self._db()
        # IMMEDIATE takes the write lock up front: two processes never interleave a
        # read-modify-write, and a crash before COMMIT leaves the previous state intact.
        db.execute("BEGIN IMMEDIATE")
        try:
            yield db
        except BaseException:
            db.execute("ROLLBACK")
            raise
        else:
            db.execute("COMMIT")

    def get(self, namespace: str, key: str) -> Any | None:
        row = (
            self._db()
            .execute("SELECT value FROM kv WHERE namespace=? AND key=?", (namespace, key))
            .fetchone()
        )
        return None if row is None else json.loads(row[0])

    def put(self, namespace: str, key: str, value: Any) -> None:
        raw = _dump(value)
        with self._write() as db:
            db.execute(
                "INSERT INTO kv(namespace, key, value, updated) VALUES (?,?,?,?) "
                "ON CONFLICT(namespace, key) DO UPDATE SET value=excluded.value, "
                "updated=excluded.updated",
                (namespace, key, raw, time.time()),
            )

    def delete(self, namespace: str, key: str) -> bool:
        with self._write() as db:
            cur = db.execute("DELETE FROM kv WHERE namespace=? AND key=?", (namespace, key))
            return cur.rowcount > 0

    def items(self, namespace: str, prefix: str = "") -> list[tuple[str, Any]]:
        rows = (
            self._db()
            .execute(
                "SELECT key, value FROM kv WHERE namespace=? AND substr(key, 1, ?)=? ORDER BY key",
                (namespace, len(prefix), prefix),
            )
            .fetchall()
        )
        return [(k, json.loads(v)) for k, v in rows]

    def delete_prefix(self, namespace: str, prefix: str) -> int:
        with self._write() as db:
            cur = db.execute(
                "DELETE FROM kv WHERE namespace=? AND substr(key, 1, ?)=?",
                (namespace, len(prefix), prefix),
            )
            return cur.rowcount

    def append(self, namespace: str, queue: str, value: Any) -> int:
        raw = _dump(value)
        with self._write() as db:
            cur = db.execute(
                "INSERT INTO queue(namespace, queue, value, created) VALUES (?,?,?,?)",
                (namespace, queue, raw, time.time()),
            )
            return int(cur.lastrowid or 0)

    def drain(self, namespace: str, queue: str) -> list[Any]:
        with self._write() as db:
            rows = db.execute(
                "SELECT seq, value FROM queue WHERE namespace=? AND queue=? ORDER BY seq",
                (namespace, queue),
            ).fetchall()
            if rows:
                db.execute(
                    "DELETE FROM queue WHERE namespace=? AND queue=? AND seq<=?",
                    (namespace, queue, rows[-1][0]),
                )
        return [json.loads(v) for _, v in rows]

    def peek(self, namespace: str, queue: str) -> list[Any]:
        rows = (
            self._db()
            .execute(
                "SELECT value FROM queue WHERE namespace=? AND queue=? ORDER BY seq",
                (namespace, queue),
            )
            .fetchall()
        )
        return [json.loads(v) for (v,) in rows]

    def clear_queue(self, namespace: str, queue: str) -> int:
        with self._write() as db:
            cur = db.execute("DELETE FROM queue WHERE namespace=? AND queue=?", (namespace, queue))
            return cur.rowcount

    def close(self) -> None:
        with self._lock:
            for db in self._connections:
                db.close()
            self._connections.clear()
        self._local = threading.local()


def open_store(state_dir: str | Path | None) -> StateStore:
    """``SQLiteStore`` under ``state_dir`` (``state.sqlite3``), or a ``MemoryStore``."""
    if state_dir is None:
        return MemoryStore()
    return SQLiteStore(Path(state_dir) / "state.sqlite3")


def host_store(host: Any) -> StateStore:
    """The store of a host that was given none: under ``host.state_dir`` (service ``store``)."""
    return open_store(host.state_dir)
