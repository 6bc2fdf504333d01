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

from pathlib import Path
from typing import Any

from agentplug.store.base import StateStore, StateStoreUnavailable
from agentplug.store.memory import MemoryStore
from agentplug.store.sqlite import SQLiteStore

__all__ = [
    "MemoryStore",
    "SQLiteStore",
    "StateStore",
    "StateStoreUnavailable",
    "host_store",
    "open_store",
    "open_store_url",
]


def open_store(state_dir: str | Path | None) -> StateStore:
    """``SQLiteStore`` under ``state_dir`` (``state.sqlite3``), or a ``MemoryStore``."""
    if state_dir is None:
        return MemoryStore()
    return SQLiteStore(Path(state_dir) / "state.sqlite3")


def open_store_url(url: str) -> StateStore:
    """The store a URL names: ``sqlite:///path/state.sqlite3``, ``memory:`` or
    ``postgresql://...`` (the ``postgres`` extra; psycopg is imported only then)."""
    if url in ("memory:", "memory://"):
        return MemoryStore()
    if url.startswith("sqlite:///"):
        # sqlite:///relative/file or sqlite:////absolute/file
        return SQLiteStore(url[len("sqlite:///") :])
    if url.startswith(("postgresql://", "postgres://")):
        from agentplug.store.postgres import PostgresStore

        return PostgresStore(url)
    raise ValueError(
        f"state.url {url.split('://')[0]!r}: unknown store scheme; use postgresql://..., "
        "sqlite:///path or memory:"
    )


def host_store(host: Any) -> StateStore:
    """The store of a host that was given none: under ``host.state_dir`` (service ``store``)."""
    return open_store(host.state_dir)
