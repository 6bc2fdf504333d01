"""Opening a store from what names it: a state folder, a URL, a URL and where it came
from (errors then name the setting the operator wrote)."""

from __future__ import annotations

from pathlib import Path

from agentplug.store.base import StateStore, StateStoreUnavailable, StateUrlError
from agentplug.store.memory import MemoryStore
from agentplug.store.sqlite import SQLiteStore

__all__ = ["open_store", "open_store_from", "open_store_url"]


def open_store(state_dir: str | Path | None) -> StateStore:
    """``SQLiteStore`` under ``state_dir`` (``state.sqlite3``), or a ``MemoryStore``."""
    if state_dir is None:
        return MemoryStore()
    return SQLiteStore(Path(state_dir) / "state.sqlite3")


def open_store_url(url: str, *, retry_ms: int | None = None, migrate: bool = True) -> StateStore:
    """The store a URL names: ``sqlite:///path/state.sqlite3``, ``memory:`` or
    ``postgresql://...`` (the ``postgres`` extra; psycopg is imported only then).

    ``retry_ms`` is PostgreSQL's retry budget for lost connections (default 5000).
    ``migrate=False`` opens a durable store without creating or upgrading its schema
    (``agentplug state check`` and ``doctor`` look without changing anything).
    Raises :class:`StateUrlError` for an unknown scheme and :class:`StateStoreUnavailable`
    when the database cannot be reached.
    """
    if url in ("memory:", "memory://"):
        return MemoryStore()
    if url.startswith("sqlite:///"):
        # sqlite:///relative/file or sqlite:////absolute/file
        return SQLiteStore(url[len("sqlite:///") :], migrate=migrate)
    if url.startswith(("postgresql://", "postgres://")):
        try:
            from agentplug.store.postgres import PostgresStore
        except ImportError as exc:
            raise StateUrlError(
                f"state.url postgresql://...: the PostgreSQL store needs the 'postgres' extra "
                f"({exc.name or exc} is missing); pip install 'agentplug[postgres]'"
            ) from None
        if retry_ms is None:
            return PostgresStore(url, migrate=migrate)
        return PostgresStore(url, retry_ms=retry_ms, migrate=migrate)
    raise StateUrlError(
        f"state.url {url.split('://')[0]!r}: unknown store scheme; use postgresql://..., "
        "sqlite:///path or memory:"
    )


def open_store_from(
    url: str, source: str, *, retry_ms: int | None = None, migrate: bool = True
) -> StateStore:
    """:func:`open_store_url`, with errors naming where the URL came from (``source``:
    ``state.url``, ``$AGENTPLUG_STATE_URL``, ``--url``...) instead of ``state.url``."""
    try:
        return open_store_url(url, retry_ms=retry_ms, migrate=migrate)
    except StateUrlError as exc:
        if source == "state.url":
            raise
        raise StateUrlError(str(exc).replace("state.url", source, 1)) from None
    except StateStoreUnavailable as exc:
        if source == "state.url":
            raise
        message = str(exc).replace("check state.url", f"check {source}")
        raise StateStoreUnavailable(message) from None
