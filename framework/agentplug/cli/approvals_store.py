"""The store an ``agentplug approvals`` command opens (shared by ``list``/``revoke`` and
``pending``/``resolve``): ``--state-url``, else ``$AGENTPLUG_STATE_URL``, else the config's
``state.url``, else the SQLite file of the state directory."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

__all__ = ["DEFAULT_STATE_DIR", "STATE_DIR_ENV", "STORE_FILE", "open_configured_store", "state_dir"]

STATE_DIR_ENV = "AGENTPLUG_STATE_DIR"
DEFAULT_STATE_DIR = ".agentplug-state"
STORE_FILE = "state.sqlite3"


def state_dir(value: str | None, configured: str | None = None) -> Path:
    """``--state-dir``, else ``$AGENTPLUG_STATE_DIR``, else ``configured`` (the config's
    ``runtime.state_dir``), else ``.agentplug-state``."""
    return Path(value or os.environ.get(STATE_DIR_ENV) or configured or DEFAULT_STATE_DIR)


def open_configured_store(args: argparse.Namespace, command: str) -> tuple[Any | None, str]:
    """The store an ``approvals`` command works on, and how to name it in messages.

    ``--state-url``, else ``$AGENTPLUG_STATE_URL``, else the config's ``state.url``, else
    ``<state dir>/state.sqlite3`` (``None`` when that file does not exist: nothing is
    created). A bad URL or an unreachable database ends the command with one line.
    """
    from agentplug.config.lookup import resolve_config
    from agentplug.store import (
        StateStoreUnavailable,
        StateUrlError,
        configured_state_url,
        open_store_from,
        store_display_url,
    )

    config, _ = resolve_config(
        getattr(args, "config", None), verbose=bool(getattr(args, "verbose", 0))
    )
    url, source = getattr(args, "state_url", None), "--state-url"
    if not url:
        url, source = configured_state_url(config)
    if url:
        try:
            store = open_store_from(url, source, retry_ms=config.state.retry_ms)
        except (StateUrlError, StateStoreUnavailable) as exc:
            raise SystemExit(f"agentplug approvals {command}: error: {source}: {exc}") from None
        return store, str(store_display_url(store))
    folder = state_dir(args.state_dir, config.runtime.state_dir)
    path = folder / STORE_FILE
    from agentplug.store import SQLiteStore

    return (SQLiteStore(path) if path.exists() else None), str(folder)
