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

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from agentplug.store.base import (
    StateStore,
    StateStoreUnavailable,
    StateUrlError,
    StoreKeyError,
    StoreLimitError,
)
from agentplug.store.memory import MemoryStore
from agentplug.store.sqlite import SQLiteStore

__all__ = [
    "STATE_URL_ENV",
    "MemoryStore",
    "SQLiteStore",
    "StateStore",
    "StateStoreUnavailable",
    "StateUrlError",
    "StoreKeyError",
    "StoreLimitError",
    "configured_state_url",
    "host_store",
    "open_store",
    "open_store_from",
    "open_store_url",
    "store_display_url",
    "store_from_config",
]

STATE_URL_ENV = "AGENTPLUG_STATE_URL"
"""The environment variable naming the state store; it wins over the config's ``state.url``."""


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


def configured_state_url(
    config: Any = None, environ: Mapping[str, str] | None = None
) -> tuple[str | None, str]:
    """The state URL the operator chose and where it came from: ``$AGENTPLUG_STATE_URL``
    (an empty value counts as unset), else the config's ``state.url``, else ``(None, "")``."""
    env = os.environ if environ is None else environ
    if env.get(STATE_URL_ENV):
        return env[STATE_URL_ENV], f"${STATE_URL_ENV}"
    url = getattr(getattr(config, "state", None), "url", None)
    if url:
        return str(url), "state.url"
    return None, ""


def store_from_config(
    config: Any = None,
    state_dir: str | Path | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    migrate: bool = True,
) -> StateStore:
    """The one way every gateway opens its store: ``$AGENTPLUG_STATE_URL``, else the
    config's ``state.url`` (with ``state.retry_ms``), else SQLite in ``state_dir`` (else in
    ``runtime.state_dir``), else in memory. Without a URL psycopg is never imported.

    Raises :class:`StateUrlError` (one line naming the setting and the fix) for an unknown
    scheme and :class:`StateStoreUnavailable` when the database cannot be reached.
    """
    url, source = configured_state_url(config, environ)
    if url is None:
        runtime = getattr(config, "runtime", None)
        return open_store(state_dir or getattr(runtime, "state_dir", None))
    retry_ms = getattr(getattr(config, "state", None), "retry_ms", None)
    return open_store_from(url, source, retry_ms=retry_ms, migrate=migrate)


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


def store_display_url(store: Any) -> str:
    """The store's URL without credentials (``postgresql://host:port/db``, ``sqlite:///...``,
    ``memory:``), for messages and ``agentplug state check``."""
    shown = getattr(store, "display_url", None)
    if isinstance(shown, str):
        return shown
    if isinstance(store, SQLiteStore):
        return f"sqlite:///{store.path}"
    if isinstance(store, MemoryStore):
        return "memory:"
    return type(store).__name__


def host_store(host: Any) -> StateStore:
    """The store of a host that was given none (service ``store``): see
    :func:`store_from_config` (``state.url``, else under ``host.state_dir``)."""
    return store_from_config(host.config, host.state_dir)
