"""Where state lives: one rule, one function (:func:`state_location`), used by the gateway
and by every ``agentplug`` command, and one way to say it (:meth:`StateLocation.describe`).

The store, first match wins:

1. the command's URL option (``--url``, ``--state-url``);
2. ``$AGENTPLUG_STATE_URL``;
3. the config's ``state.url``;
4. SQLite, ``state.sqlite3`` in the state folder.

The state folder (also where the control API token, plugin installs and a plugin's own
files go), first match wins:

1. the command's ``--state-dir`` (``state_dir=`` of a gateway built in code);
2. ``$AGENTPLUG_STATE_DIR``;
3. the config's ``runtime.state_dir``;
4. the default: ``.agentplug-state`` in the current folder for the ``agentplug``
   commands; none for a gateway built in code, whose state is then in memory (a test or
   an embedding program writes no file it did not ask for).

Looking never creates anything: a SQLite file that does not exist yet is "not created
yet" (the first gateway that keeps state creates it), not an error.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentplug.store.base import StateStore
from agentplug.store.opening import open_store_from
from agentplug.store.pg_urls import redact_url

__all__ = [
    "DEFAULT_STATE_DIR",
    "STATE_DIR_ENV",
    "STATE_DIR_HELP",
    "STORE_FILE",
    "StateLocation",
    "state_location",
]

STATE_DIR_ENV = "AGENTPLUG_STATE_DIR"
"""The environment variable naming the state folder; it wins over ``runtime.state_dir``."""
DEFAULT_STATE_DIR = ".agentplug-state"
"""The state folder of the ``agentplug`` commands when none is chosen."""
STORE_FILE = "state.sqlite3"
"""The SQLite file in the state folder."""
STATE_DIR_HELP = (
    "state folder, where the SQLite store and other state files are (default: "
    f"${STATE_DIR_ENV}, else the config's runtime.state_dir, else {DEFAULT_STATE_DIR})"
)
"""The help text of every command's ``--state-dir`` option."""

_URL_ENV = "AGENTPLUG_STATE_URL"


@dataclass(frozen=True)
class StateLocation:
    """Where one command's or gateway's state lives, and why."""

    url: str
    """``memory:``, ``sqlite:///<path>`` or ``postgresql://...`` (may hold a password:
    show :attr:`display_url`)."""
    source: str
    """What chose it: ``--url``, ``$AGENTPLUG_STATE_URL``, ``state.url``, ``--state-dir``,
    ``$AGENTPLUG_STATE_DIR``, ``runtime.state_dir``, ``default`` or ``none``."""
    state_dir: Path | None
    """The state folder (``None``: none, state in memory)."""
    retry_ms: int | None = None
    """PostgreSQL's retry budget (``state.retry_ms``)."""
    by_url: bool = False
    """Whether a URL chose the store (a URL names a store that should exist; a state
    folder is where one is created when first needed)."""

    @property
    def kind(self) -> str:
        """``memory``, ``sqlite`` or ``postgresql``."""
        if self.url.startswith("sqlite:///"):
            return "sqlite"
        if self.url.startswith(("postgresql://", "postgres://")):
            return "postgresql"
        return "memory"

    @property
    def display_url(self) -> str:
        """The URL without its password."""
        return redact_url(self.url) if self.kind == "postgresql" else self.url

    @property
    def sqlite_path(self) -> Path | None:
        """The SQLite file (``None`` for another backend)."""
        return Path(self.url[len("sqlite:///") :]) if self.kind == "sqlite" else None

    @property
    def created(self) -> bool:
        """Whether the store exists (a SQLite file that was never written does not)."""
        path = self.sqlite_path
        return path is None or path.exists()

    def _why(self) -> str:
        if self.source == "default":
            return f"the default: {DEFAULT_STATE_DIR} in the current folder"
        if self.source == "none":
            return (
                "nothing is kept after the process ends; set runtime.state_dir, "
                f"${STATE_DIR_ENV} or state.url to keep it"
            )
        return f"from {self.source}"

    def describe(self) -> str:
        """One line, the same in every command: ``state: <url> (<why>)``, with ``; not
        created yet`` for a SQLite file that does not exist."""
        line = f"state: {self.display_url} ({self._why()}"
        if not self.created:
            line += "; not created yet"
        return line + ")"

    def open(self, *, migrate: bool = True) -> StateStore:
        """Open the store (creating a SQLite file and its folder when ``migrate``).

        Raises :class:`~agentplug.store.base.StateUrlError` (naming :attr:`source`) and
        :class:`~agentplug.store.base.StateStoreUnavailable` when unreachable.
        """
        return open_store_from(self.url, self.source, retry_ms=self.retry_ms, migrate=migrate)


def _text(value: str | os.PathLike[str] | None) -> str | None:
    text = os.fspath(value) if value is not None else None
    return text if text else None


def state_location(
    config: Any = None,
    *,
    state_dir: str | os.PathLike[str] | None = None,
    url: str | None = None,
    default_dir: str | os.PathLike[str] | None = None,
    environ: Mapping[str, str] | None = None,
    url_option: str = "--url",
) -> StateLocation:
    """Where state lives (see the module docstring for the rule).

    ``state_dir`` and ``url`` are what the caller was told (a command's options, a
    gateway's ``state_dir=``); ``default_dir`` is the folder used when nothing chose one
    (:data:`DEFAULT_STATE_DIR` for commands, ``None`` in code: memory). Nothing is opened
    or created.
    """
    env = os.environ if environ is None else environ
    retry_ms = getattr(getattr(config, "state", None), "retry_ms", None)
    folder: Path | None = None
    folder_source = "none"
    for value, source in (
        (_text(state_dir), "--state-dir"),
        (_text(env.get(STATE_DIR_ENV)), f"${STATE_DIR_ENV}"),
        (_text(getattr(getattr(config, "runtime", None), "state_dir", None)), "runtime.state_dir"),
        (_text(default_dir), "default"),
    ):
        if value is not None:
            folder, folder_source = Path(value), source
            break
    for chosen, source in (
        (url, url_option),
        (env.get(_URL_ENV) or None, f"${_URL_ENV}"),
        (getattr(getattr(config, "state", None), "url", None), "state.url"),
    ):
        if chosen:
            return StateLocation(str(chosen), source, folder, retry_ms, by_url=True)
    if folder is None:
        return StateLocation("memory:", "none", None, retry_ms)
    return StateLocation(f"sqlite:///{folder / STORE_FILE}", folder_source, folder, retry_ms)
