"""The embedded default: one SQLite file, safe with several processes on one machine."""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from agentplug.store.base import _dump

__all__ = ["SQLiteStore"]

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
