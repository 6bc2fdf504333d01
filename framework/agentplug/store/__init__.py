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
from agentplug.store.location import state_location
from agentplug.store.memory import MemoryStore
from agentplug.store.opening import open_store, open_store_from, open_store_url
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
    """The store :func:`~agentplug.store.location.state_location` names, opened:
    ``$AGENTPLUG_STATE_URL``, else the config's ``state.url`` (with ``state.retry_ms``),
    else SQLite in the state folder (``state_dir``, ``$AGENTPLUG_STATE_DIR``,
    ``runtime.state_dir``), else in memory. Without a URL psycopg is never imported.

    Raises :class:`StateUrlError` (one line naming the setting and the fix) for an unknown
    scheme and :class:`StateStoreUnavailable` when the database cannot be reached.
    """
    location = state_location(config, state_dir=state_dir, environ=environ)
    return location.open(migrate=migrate)


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
