"""Entry-point discovery with a fingerprint cache, and isolated loading.

A fresh ``importlib.metadata`` scan reads every installed distribution's metadata.
The cache stores the scan keyed by a fingerprint of the environment (interpreter,
``sys.path`` and each path entry's modification time: installing or removing a
distribution changes its directory's mtime), so a warm start only ``stat``s the path
entries. Names are filtered by config *before* any plugin code is imported.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sys
import tempfile
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

import importlib_metadata

__all__ = [
    "DISABLE_PLUGINS_ENV",
    "ENTRY_POINT_GROUP",
    "HOOKSPEC_GROUP",
    "DiscoveredPlugin",
    "default_cache_dir",
    "discover",
    "environment_fingerprint",
    "installed_plugins_disabled",
]

log = logging.getLogger("agentplug.loader")

ENTRY_POINT_GROUP = "agentplug"
"""Entry-point group of installed plugins: ``name = "module"`` or ``"module:object"``."""
HOOKSPEC_GROUP = "agentplug.hookspecs"
"""Entry-point group of third-party hookspec modules."""
_CACHE_VERSION = 2
DISABLE_PLUGINS_ENV = "AGENTPLUG_DISABLE_PLUGINS"
"""Set (to anything but ``0``, ``false``, ``no``, ``off`` or nothing) to load no installed
plugin and no third-party hookspecs anywhere: every command (``--no-plugins`` sets it for
one command), ``Gateway.from_config(load_plugins=True)``, the pytest fixtures. Plugins
passed by name or object (a scenario's ``plugins``, ``register(...)``) still load."""


def installed_plugins_disabled(environ: dict[str, str] | None = None) -> bool:
    """Whether :data:`DISABLE_PLUGINS_ENV` turns installed plugins off."""
    value = (os.environ if environ is None else environ).get(DISABLE_PLUGINS_ENV, "")
    return value.strip().lower() not in ("", "0", "false", "no", "off")


@dataclass(frozen=True)
class DiscoveredPlugin:
    """An entry point found in the environment (nothing imported yet)."""

    name: str
    value: str
    group: str
    distribution: str | None
    version: str | None
    summary: str | None = None
    """The distribution's one-line summary (a plugin's description by default)."""

    def load(self) -> object:
        """Import and return the entry point's object."""
        ep = importlib_metadata.EntryPoint(name=self.name, value=self.value, group=self.group)
        return ep.load()


def default_cache_dir() -> Path:
    """``$AGENTPLUG_CACHE_DIR``, else ``$XDG_CACHE_HOME/agentplug``, else ``~/.cache/agentplug``."""
    explicit = os.environ.get("AGENTPLUG_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "agentplug"


def environment_fingerprint(path: Iterable[str] | None = None) -> str:
    """Hash of the interpreter, ``sys.path`` and each entry's mtime."""
    digest = hashlib.sha256()
    digest.update(sys.executable.encode())
    digest.update(sys.version.encode())
    for entry in path if path is not None else sys.path:
        digest.update(entry.encode("utf-8", "surrogateescape"))
        try:
            digest.update(str(os.stat(entry or ".").st_mtime_ns).encode())
        except OSError:
            digest.update(b"-")
    return digest.hexdigest()


def _scan(group: str) -> list[DiscoveredPlugin]:
    found: list[DiscoveredPlugin] = []
    seen: set[str] = set()
    for ep in importlib_metadata.entry_points(group=group):
        if ep.name in seen:  # first on sys.path wins, like the import system
            continue
        seen.add(ep.name)
        dist = getattr(ep, "dist", None)
        meta = dist.metadata if dist is not None else None
        found.append(
            DiscoveredPlugin(
                name=ep.name,
                value=ep.value,
                group=group,
                distribution=meta["Name"] if meta is not None else None,
                version=dist.version if dist is not None else None,
                summary=(meta.get("Summary") or None) if meta is not None else None,
            )
        )
    # Deterministic load order whatever the filesystem lists first.
    found.sort(key=lambda p: p.name)
    return found


def discover(
    group: str = ENTRY_POINT_GROUP,
    *,
    use_cache: bool = True,
    cache_dir: Path | None = None,
) -> list[DiscoveredPlugin]:
    """Entry points of ``group``, from the warm cache when the environment is unchanged."""
    if not use_cache:
        return _scan(group)
    fingerprint = environment_fingerprint()
    directory = cache_dir or default_cache_dir()
    cache_file = directory / f"entry-points-{hashlib.sha256(group.encode()).hexdigest()[:12]}.json"
    try:
        cached = json.loads(cache_file.read_text(encoding="utf-8"))
        if cached.get("version") == _CACHE_VERSION and cached.get("fingerprint") == fingerprint:
            return [DiscoveredPlugin(**item) for item in cached["entry_points"]]
    except (OSError, ValueError, TypeError, KeyError):
        pass
    found = _scan(group)
    payload = {
        "version": _CACHE_VERSION,
        "fingerprint": fingerprint,
        "entry_points": [asdict(p) for p in found],
    }
    try:
        directory.mkdir(parents=True, exist_ok=True)
        # Atomic replace: a concurrent reader sees the old or the new file, never half.
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".ep-", suffix=".json")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(payload, fh)
        os.replace(tmp, cache_file)
    except OSError as exc:
        log.debug("entry-point cache not written (%s); discovery still works", exc)
    return found
