"""Finding installed distributions: the one providing a plugin id, or one by name."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import importlib_metadata
from packaging.utils import canonicalize_name

from agentplug.plugins.manager.reports import PluginManagerError, UnknownPluginError

__all__ = ["Distributions", "InstalledDistribution"]


@dataclass(frozen=True)
class InstalledDistribution:
    """An installed distribution found on the search path (and the plugin module of its
    entry point, when it was found by plugin id)."""

    name: str
    version: str | None
    dist: Any  # importlib_metadata.Distribution
    entry_module: str | None = None

    def text(self, name: str) -> str | None:
        """The metadata file ``name`` (``INSTALLER``, ``direct_url.json``...), if any."""
        value = self.dist.read_text(name)
        return value if isinstance(value, str) else None

    def top_level(self) -> list[str]:
        """The top-level import names the distribution installs, sorted."""
        names: list[str] = []
        listed = self.text("top_level.txt")
        if listed:
            names = [n.strip() for n in listed.splitlines() if n.strip()]
        if not names:
            for file in self.dist.files or []:
                parts = Path(str(file)).parts
                if not parts or parts[0] in ("..", "__pycache__"):
                    continue
                first = parts[0]
                if first.endswith((".dist-info", ".egg-info", ".pth", ".data")):
                    continue
                name = first[:-3] if first.endswith(".py") else first
                if len(parts) > 1 or first.endswith(".py"):
                    names.append(name)
        if not names and self.entry_module:
            names = [self.entry_module.split(".")[0]]
        return sorted(dict.fromkeys(n for n in names if n.isidentifier()))


class Distributions:
    """Looks up installed distributions on ``sys.path`` and, first, the install target
    (``actions.plugins.target``) when there is one."""

    def __init__(self, target: str | None) -> None:
        self._target = target

    def search_path(self) -> list[str]:
        """Where to look: the install target (when set), then ``sys.path`` as it is now."""
        if self._target:
            return [str(Path(self._target).resolve()), *sys.path]
        return list(sys.path)

    def find_plugin(self, plugin_id: str) -> InstalledDistribution | None:
        """The installed distribution providing plugin ``plugin_id`` (entry point of group
        ``agentplug``), or the distribution called ``plugin_id``; ``None`` if neither.

        An installer's ``.dist-info`` wins over a build's ``.egg-info`` left in a source
        folder that is also on ``sys.path``."""
        from agentplug.core.loader import ENTRY_POINT_GROUP

        wanted = canonicalize_name(plugin_id)
        by_entry: list[InstalledDistribution] = []
        by_name: list[InstalledDistribution] = []
        for dist in importlib_metadata.distributions(path=self.search_path()):
            name = dist.metadata["Name"] if dist.metadata else None
            if not name:
                continue
            for ep in dist.entry_points:
                if ep.group == ENTRY_POINT_GROUP and ep.name == plugin_id:
                    by_entry.append(
                        InstalledDistribution(name, dist.version, dist, ep.value.split(":")[0])
                    )
                    break
            else:
                if canonicalize_name(name) == wanted:
                    by_name.append(InstalledDistribution(name, dist.version, dist))
        for group in (by_entry, by_name):
            installed = [d for d in group if d.text("INSTALLER") or d.text("direct_url.json")]
            if installed or group:
                return (installed or group)[0]
        return None

    def find(self, name: str) -> InstalledDistribution | None:
        """The installed distribution ``name``; an installer's ``.dist-info`` wins over a
        build's ``.egg-info`` left in a source folder that is also on ``sys.path``."""
        wanted = canonicalize_name(name)
        matches: list[InstalledDistribution] = []
        for dist in importlib_metadata.distributions(path=self.search_path()):
            dname = dist.metadata["Name"] if dist.metadata else None
            if dname and canonicalize_name(dname) == wanted:
                matches.append(InstalledDistribution(dname, dist.version, dist))
        installed = [m for m in matches if m.text("INSTALLER") or m.text("direct_url.json")]
        chosen = installed or matches
        return chosen[0] if chosen else None

    def installed_plugin_ids(self) -> list[str]:
        """Every plugin id an installed distribution declares (entry-point group
        ``agentplug``), sorted."""
        from agentplug.core.loader import ENTRY_POINT_GROUP

        return sorted(
            {
                ep.name
                for dist in importlib_metadata.distributions(path=self.search_path())
                for ep in dist.entry_points
                if ep.group == ENTRY_POINT_GROUP
            }
        )

    def unknown(self, plugin_id: str) -> PluginManagerError:
        """The error for an id no installed plugin has (it lists the ids that exist)."""
        known = self.installed_plugin_ids()
        listing = ", ".join(known[:20]) if known else "none"
        return UnknownPluginError(
            f"no installed plugin {plugin_id!r} (installed plugin ids: {listing}); "
            "install it first (INSTALL_PLUGIN / `agentplug plugin install`)"
        )
