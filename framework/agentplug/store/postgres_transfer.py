"""The SQL of ``agentplug state export`` / ``import`` on PostgreSQL.

:class:`agentplug.store.postgres.PostgresStore` runs these inside one transaction: the
export reads every table from one ``REPEATABLE READ`` snapshot, the import empties and
fills them together, so a reader never sees half of either.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import psycopg

from agentplug.store.records import join_records

__all__ = ["read_tables", "records_of", "write_tables"]

_TABLES = ("agentplug_kv", "agentplug_queue", "agentplug_signals")
_NOW = "extract(epoch from clock_timestamp())"

Rows = list[list[tuple[Any, ...]]]


def read_tables(conn: psycopg.Connection[Any]) -> Rows:
    """The rows of every table, from one read-only snapshot (in a new transaction)."""
    conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
    return [
        conn.execute(sql).fetchall()
        for sql in (
            "SELECT namespace, key, value FROM agentplug_kv ORDER BY namespace, key",
            "SELECT seq, namespace, queue, value, claim_owner, claimed_until"
            " FROM agentplug_queue ORDER BY seq",
            "SELECT channel, version FROM agentplug_signals ORDER BY channel",
        )
    ]


def records_of(rows: Rows) -> Iterator[dict[str, Any]]:
    """The export records (JSON-ready dicts) of what :func:`read_tables` returned."""
    kv, queue, channels = rows
    return join_records(kv, queue, channels)


def write_tables(
    conn: psycopg.Connection[Any],
    kv: Sequence[Sequence[Any]],
    queue: Sequence[Sequence[Any]],
    channels: Sequence[Sequence[Any]],
    *,
    replace: bool,
    name: str,
) -> int:
    """Replace every table's rows with the split records; how many were written.

    Without ``replace``, a table that holds a row is refused with a ``ValueError`` naming
    the store (``name``) and the table.
    """
    # Gateways writing meanwhile wait for this transaction: none of their rows is
    # deleted or collides with an imported one between the check and the inserts.
    conn.execute(f"LOCK TABLE {', '.join(_TABLES)} IN EXCLUSIVE MODE")
    if not replace:
        for table in _TABLES:
            if conn.execute(f"SELECT 1 FROM {table} LIMIT 1").fetchone():
                raise ValueError(f"the target store {name} is not empty (table {table})")
    else:
        for table in _TABLES:
            conn.execute(f"DELETE FROM {table}")
    with conn.cursor() as cur:
        cur.executemany(
            f"INSERT INTO agentplug_kv(namespace, key, value, updated) VALUES (%s, %s, %s, {_NOW})",
            kv,
        )
        cur.executemany(
            "INSERT INTO agentplug_queue(seq, namespace, queue, value, claim_owner,"
            f" claimed_until, created) VALUES (%s, %s, %s, %s, %s, %s, {_NOW})",
            queue,
        )
        cur.executemany("INSERT INTO agentplug_signals(channel, version) VALUES (%s, %s)", channels)
    # New entries continue after the highest imported sequence number.
    conn.execute(
        "SELECT setval(pg_get_serial_sequence('agentplug_queue', 'seq'),"
        " COALESCE((SELECT max(seq) FROM agentplug_queue), 0) + 1, false)"
    )
    return len(kv) + len(queue) + len(channels)
