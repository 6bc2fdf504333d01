"""The embedded default: one SQLite file, safe with several processes on one machine."""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from agentplug.store.base import (
    SCHEMA_VERSION,
    Claimed,
    check_key,
    check_locks,
    check_name,
    dump_value,
)
from agentplug.store.records import join_records, split_records

__all__ = ["SQLiteStore"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS kv (
    namespace TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL, updated REAL NOT NULL,
    PRIMARY KEY (namespace, key)
);
CREATE TABLE IF NOT EXISTS queue (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    namespace TEXT NOT NULL, queue TEXT NOT NULL, value TEXT NOT NULL, created REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS queue_by_name ON queue (namespace, queue, seq);
CREATE TABLE IF NOT EXISTS signals (channel TEXT PRIMARY KEY, version INTEGER NOT NULL);
"""

# Columns added after version 1 (a file written by an older agentplug lacks them).
_QUEUE_COLUMNS = {"claim_owner": "TEXT", "claimed_until": "REAL NOT NULL DEFAULT 0"}

# How often a waiter looks at a channel's version (SQLite has no notifications).
_POLL_S = 0.01


class SQLiteStore:
    """Durable store in one SQLite file (WAL; safe across processes on one machine).

    Every write is one ``BEGIN IMMEDIATE`` transaction (the whole file's write lock, so
    two processes never interleave a read-modify-write); :meth:`atomic` widens one to a
    whole block. Commits use ``synchronous=FULL``: a confirmed write survives a crash.
    """

    def __init__(
        self, path: str | Path, *, busy_timeout_ms: int = 10_000, migrate: bool = True
    ) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        self._busy_timeout_ms = busy_timeout_ms
        self._connections: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self.migrated_from = self.migrate() if migrate else self.schema_version()
        """The schema version found on opening (``0``: a new file)."""

    def migrate(self) -> int:
        """Create or upgrade the schema to :data:`SCHEMA_VERSION`; return the old version.

        Safe from several processes at once: the upgrade runs under the write lock and
        each step checks what is already there. ``0`` means a new file.
        """
        with self._write() as db:
            had_kv = db.execute(
                "SELECT 1 FROM sqlite_master WHERE type='table' AND name='kv'"
            ).fetchone()
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    db.execute(statement)
            row = db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
            old = int(row[0]) if row else (1 if had_kv else 0)
            have = {r[1] for r in db.execute("PRAGMA table_info(queue)")}
            for name, decl in _QUEUE_COLUMNS.items():
                if name not in have:
                    db.execute(f"ALTER TABLE queue ADD COLUMN {name} {decl}")
            db.execute(
                "INSERT INTO meta(key, value) VALUES ('schema_version', ?) "
                "ON CONFLICT(key) DO UPDATE SET value=excluded.value",
                (str(SCHEMA_VERSION),),
            )
        return old

    def schema_version(self) -> int:
        """The layout version recorded in the file (``1``: tables without a version row,
        ``0``: no tables)."""
        db = self._db()
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        row = None
        if "meta" in tables:
            row = db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        return int(row[0]) if row else (1 if "kv" in tables else 0)

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
            db.execute(f"PRAGMA busy_timeout={int(self._busy_timeout_ms)}")
            self._enable_wal(db)
            db.execute("PRAGMA synchronous=FULL")
            self._local.db = db
            self._local.depth = 0
            with self._lock:
                self._connections.append(db)
        return db

    def _enable_wal(self, db: sqlite3.Connection) -> None:
        # WAL is recorded in the file, so usually only its creator switches it. While another
        # process opens or recovers the file, SQLite may answer "database is locked" here
        # without calling the busy handler: retry until the busy timeout runs out.
        deadline = time.monotonic() + self._busy_timeout_ms / 1000
        delay = 0.002
        while True:
            try:
                row = db.execute("PRAGMA journal_mode").fetchone()
                if row and str(row[0]).lower() != "wal":
                    db.execute("PRAGMA journal_mode=WAL")
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() >= deadline:
                    raise
                time.sleep(delay)
                delay = min(delay * 2, 0.05)

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        db = self._db()
        if self._local.depth:
            # Inside an atomic block: join its transaction.
            self._local.depth += 1
            try:
                yield db
            finally:
                self._local.depth -= 1
            return
        # IMMEDIATE takes the write lock up front: two processes never interleave a
        # read-modify-write, and a crash before COMMIT leaves the previous state intact.
        db.execute("BEGIN IMMEDIATE")
        self._local.depth = 1
        try:
            yield db
        except BaseException:
            db.execute("ROLLBACK")
            raise
        else:
            db.execute("COMMIT")
        finally:
            self._local.depth = 0

    @contextmanager
    def atomic(self, *locks: str) -> Iterator[None]:
        check_locks(locks)
        with self._write():
            yield

    def get(self, namespace: str, key: str) -> Any | None:
        check_key(namespace, key)
        row = (
            self._db()
            .execute("SELECT value FROM kv WHERE namespace=? AND key=?", (namespace, key))
            .fetchone()
        )
        return None if row is None else json.loads(row[0])

    def put(self, namespace: str, key: str, value: Any) -> None:
        check_key(namespace, key)
        raw = dump_value(value)
        with self._write() as db:
            db.execute(
                "INSERT INTO kv(namespace, key, value, updated) VALUES (?,?,?,?) "
                "ON CONFLICT(namespace, key) DO UPDATE SET value=excluded.value, "
                "updated=excluded.updated",
                (namespace, key, raw, time.time()),
            )

    def put_if_absent(self, namespace: str, key: str, value: Any) -> bool:
        check_key(namespace, key)
        raw = dump_value(value)
        with self._write() as db:
            cur = db.execute(
                "INSERT INTO kv(namespace, key, value, updated) VALUES (?,?,?,?) "
                "ON CONFLICT(namespace, key) DO NOTHING",
                (namespace, key, raw, time.time()),
            )
            return cur.rowcount > 0

    def delete(self, namespace: str, key: str) -> bool:
        check_key(namespace, key)
        with self._write() as db:
            cur = db.execute("DELETE FROM kv WHERE namespace=? AND key=?", (namespace, key))
            return cur.rowcount > 0

    def items(self, namespace: str, prefix: str = "") -> list[tuple[str, Any]]:
        check_key(namespace, prefix, field="prefix")
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
        check_key(namespace, prefix, field="prefix")
        with self._write() as db:
            cur = db.execute(
                "DELETE FROM kv WHERE namespace=? AND substr(key, 1, ?)=?",
                (namespace, len(prefix), prefix),
            )
            return cur.rowcount

    def append(self, namespace: str, queue: str, value: Any) -> int:
        check_key(namespace, queue, field="queue")
        raw = dump_value(value)
        with self._write() as db:
            cur = db.execute(
                "INSERT INTO queue(namespace, queue, value, created) VALUES (?,?,?,?)",
                (namespace, queue, raw, time.time()),
            )
            return int(cur.lastrowid or 0)

    def drain(self, namespace: str, queue: str) -> list[Any]:
        check_key(namespace, queue, field="queue")
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
        check_key(namespace, queue, field="queue")
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
        check_key(namespace, queue, field="queue")
        with self._write() as db:
            cur = db.execute("DELETE FROM queue WHERE namespace=? AND queue=?", (namespace, queue))
            return cur.rowcount

    def claim(self, namespace: str, queue: str, *, owner: str, lease_ms: int) -> list[Claimed]:
        check_key(namespace, queue, field="queue")
        check_name("owner", owner)
        now = time.time()
        with self._write() as db:
            rows = db.execute(
                "UPDATE queue SET claim_owner=?, claimed_until=? WHERE namespace=? AND queue=? "
                "AND (claim_owner IS NULL OR claimed_until < ?) RETURNING seq, value",
                (owner, now + lease_ms / 1000, namespace, queue, now),
            ).fetchall()
        return [(int(seq), json.loads(v)) for seq, v in sorted(rows)]

    def ack(self, namespace: str, queue: str, seqs: Sequence[int], *, owner: str) -> int:
        check_key(namespace, queue, field="queue")
        check_name("owner", owner)
        if not seqs:
            return 0
        removed = 0
        with self._write() as db:
            for start in range(0, len(seqs), 500):
                chunk = [int(s) for s in seqs[start : start + 500]]
                marks = ",".join("?" * len(chunk))
                cur = db.execute(
                    f"DELETE FROM queue WHERE namespace=? AND queue=? AND claim_owner=? "
                    f"AND seq IN ({marks})",
                    (namespace, queue, owner, *chunk),
                )
                removed += cur.rowcount
        return removed

    def release(self, namespace: str, queue: str, seqs: Sequence[int], *, owner: str) -> int:
        check_key(namespace, queue, field="queue")
        check_name("owner", owner)
        released = 0
        with self._write() as db:
            for start in range(0, len(seqs), 500):
                chunk = [int(s) for s in seqs[start : start + 500]]
                marks = ",".join("?" * len(chunk))
                cur = db.execute(
                    f"UPDATE queue SET claim_owner=NULL, claimed_until=0 WHERE namespace=? "
                    f"AND queue=? AND claim_owner=? AND seq IN ({marks})",
                    (namespace, queue, owner, *chunk),
                )
                released += cur.rowcount
        return released

    def notify(self, channel: str) -> int:
        check_name("channel", channel)
        with self._write() as db:
            row = db.execute(
                "INSERT INTO signals(channel, version) VALUES (?, 1) ON CONFLICT(channel) "
                "DO UPDATE SET version=version+1 RETURNING version",
                (channel,),
            ).fetchone()
        return int(row[0])

    def version(self, channel: str) -> int:
        check_name("channel", channel)
        row = (
            self._db().execute("SELECT version FROM signals WHERE channel=?", (channel,)).fetchone()
        )
        return int(row[0]) if row else 0

    def wait_change(self, channel: str, seen: int, timeout_s: float) -> int:
        check_name("channel", channel)
        deadline = time.monotonic() + max(0.0, timeout_s)
        while True:
            current = self.version(channel)
            left = deadline - time.monotonic()
            if current != seen or left <= 0:
                return current
            time.sleep(min(_POLL_S, left))

    # -- export / import (agentplug state export|import) ---------------------------------

    def dump(self) -> Iterator[dict[str, Any]]:
        """Every key, queue entry (with its claim) and channel version, from one snapshot."""
        db = sqlite3.connect(self.path, timeout=self._busy_timeout_ms / 1000, isolation_level=None)
        try:
            db.execute("BEGIN")  # one read snapshot (WAL: writers go on meanwhile)

            def rows(sql: str) -> Iterator[Any]:
                yield from db.execute(sql)  # run once the records before were taken

            yield from join_records(
                rows("SELECT namespace, key, value FROM kv ORDER BY namespace, key"),
                rows(
                    "SELECT seq, namespace, queue, value, claim_owner, claimed_until FROM queue"
                    " ORDER BY seq"
                ),
                rows("SELECT channel, version FROM signals ORDER BY channel"),
            )
            db.execute("COMMIT")
        finally:
            db.close()

    def load(self, records: Iterable[Mapping[str, Any]], *, replace: bool = False) -> int:
        """Write exported records in one transaction (see ``TransferableStore.load``)."""
        kv, queue, channels = split_records(records)
        now = time.time()
        with self._write() as db:
            if not replace:
                for table in ("kv", "queue", "signals"):
                    if db.execute(f"SELECT 1 FROM {table} LIMIT 1").fetchone():
                        raise ValueError(
                            f"the target store {self.path} is not empty (table {table})"
                        )
            for table in ("kv", "queue", "signals"):
                db.execute(f"DELETE FROM {table}")
            db.executemany(
                "INSERT INTO kv(namespace, key, value, updated) VALUES (?,?,?,?)",
                [(*row, now) for row in kv],
            )
            db.executemany(
                "INSERT INTO queue(seq, namespace, queue, value, claim_owner, claimed_until, "
                "created) VALUES (?,?,?,?,?,?,?)",
                [(*row, now) for row in queue],
            )
            db.executemany("INSERT INTO signals(channel, version) VALUES (?,?)", channels)
        return len(kv) + len(queue) + len(channels)

    def close(self) -> None:
        with self._lock:
            for db in self._connections:
                db.close()
            self._connections.clear()
        self._local = threading.local()
