"""The store an ``agentplug approvals`` command opens (shared by ``list``/``revoke`` and
``pending``/``resolve``), found by the one rule of :mod:`agentplug.store.location`:
``--state-url``, else ``$AGENTPLUG_STATE_URL``, else the config's ``state.url``, else the
SQLite file of the state folder (``--state-dir``, ``$AGENTPLUG_STATE_DIR``,
``runtime.state_dir``, else ``.agentplug-state``)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from agentplug.store.location import DEFAULT_STATE_DIR, STATE_DIR_ENV, STORE_FILE, StateLocation

__all__ = [
    "DEFAULT_STATE_DIR",
    "STATE_DIR_ENV",
    "STORE_FILE",
    "approvals_location",
    "open_configured_store",
    "state_dir",
]


def state_dir(value: str | None, configured: str | None = None) -> Path:
    """``--state-dir``, else ``$AGENTPLUG_STATE_DIR``, else ``configured`` (the config's
    ``runtime.state_dir``), else ``.agentplug-state``."""
    from types import SimpleNamespace

    from agentplug.store.location import state_location

    config = SimpleNamespace(runtime=SimpleNamespace(state_dir=configured), state=None)
    location = state_location(config, state_dir=value, default_dir=DEFAULT_STATE_DIR)
    assert location.state_dir is not None  # a default folder is given
    return location.state_dir


def approvals_location(args: argparse.Namespace) -> StateLocation:
    """Where an ``approvals`` command's state lives (the config found by the one lookup)."""
    from agentplug.cli.common import command_config, command_state

    config, _ = command_config(args)
    return command_state(args, config, url=getattr(args, "state_url", None), option="--state-url")


def open_configured_store(args: argparse.Namespace, command: str) -> tuple[Any | None, str]:
    """The store an ``approvals`` command works on, and its ``state: ...`` line.

    ``None`` when the state folder's SQLite file does not exist yet: nothing is created.
    A bad URL or an unreachable database ends the command with one line.
    """
    from agentplug.store import StateStoreUnavailable, StateUrlError

    location = approvals_location(args)
    if not location.created:
        return None, location.describe()
    try:
        store = location.open()
    except (StateUrlError, StateStoreUnavailable) as exc:
        raise SystemExit(
            f"agentplug approvals {command}: error: {location.source}: {exc}"
        ) from None
    return store, location.describe()
