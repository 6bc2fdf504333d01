"""The agentplug core itself: eject, sync and reinject its source, and where it runs from."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path

from packaging.utils import canonicalize_name

from agentplug.plugins.ejected import read_record
from agentplug.plugins.manager.checks import TreeCheck
from agentplug.plugins.manager.distributions import InstalledDistribution
from agentplug.plugins.manager.eject import _EjectMixin
from agentplug.plugins.manager.locating import path_from_url
from agentplug.plugins.manager.reinject import _ReinjectMixin
from agentplug.plugins.manager.reports import (
    CoreStatus,
    EjectReport,
    PluginManagerError,
    ReinjectReport,
    SyncReport,
)
from agentplug.plugins.manager.sync import _SyncMixin


class _CoreMixin(_EjectMixin, _SyncMixin, _ReinjectMixin):
    """``eject_core``, ``sync_core``, ``reinject_core`` and ``core_status``."""

    async def eject_core(self, *, requested_by: str | None = None) -> EjectReport:
        """Put agentplug's own source under ``<state_dir>/core/agentplug`` (git), through
        the install checks like :meth:`eject`."""
        name = canonicalize_name(self.core_distribution)
        check = self._checks.tree_check("eject", name, requested_by)
        return await self._locks.run_locked("core", self._eject_core, check)

    def _eject_core(self, check: TreeCheck) -> EjectReport:
        final = self.core_dir
        if final.exists():
            raise PluginManagerError(
                f"{self.core_distribution} is already ejected at {final}; sync it "
                "(SYNC_CORE) or reinject it first (REINJECT_CORE)"
            )
        found = self._distributions.find(self.core_distribution)
        if found is None:
            raise PluginManagerError(f"distribution {self.core_distribution!r} is not installed")
        name = canonicalize_name(self.core_distribution)
        return self._eject_into(name, found, final, True, check)

    async def sync_core(self, *, requested_by: str | None = None) -> SyncReport:
        """Fetch and merge upstream into the ejected core (upstream checked first)."""
        name = canonicalize_name(self.core_distribution)
        check = self._checks.tree_check("sync", name, requested_by)
        return await self._locks.run_locked("core", self._sync_folder, name, self.core_dir, check)

    async def reinject_core(self, *, requested_by: str | None = None) -> ReinjectReport:
        """Remove the ejected core so the installed package runs again (that package is
        checked first)."""
        name = canonicalize_name(self.core_distribution)
        check = self._checks.tree_check("reinject", name, requested_by)
        found = self._distributions.find(self.core_distribution)
        return await self._locks.run_locked("core", self._remove, name, self.core_dir, check, found)

    def core_status(self) -> CoreStatus:
        """Whether agentplug runs from the installed package or an ejected source."""
        found = self._distributions.find(self.core_distribution)
        module = sys.modules.get(self.core_module)
        location: Path | None = None
        if module is not None and getattr(module, "__file__", None):
            location = Path(str(module.__file__)).resolve().parent
        elif (spec := importlib.util.find_spec(self.core_module)) is not None and spec.origin:
            location = Path(spec.origin).resolve().parent
        installed_commit = self._installed_commit(found) if found else None
        folder = self.core_dir
        record = read_record(folder) if folder.is_dir() else None
        ejected = None if record is None else self._copies.describe(folder.name, folder)
        running_ejected = bool(
            record is not None and location is not None and location.is_relative_to(folder)
        )
        if running_ejected:
            assert ejected is not None and record is not None
            version: str | None = record.version
            commit = ejected.head
        else:
            version = found.version if found else None
            commit = installed_commit
        return CoreStatus(
            distribution=found.name if found else self.core_distribution,
            running_from="ejected" if running_ejected else "installed",
            version=version,
            commit=commit,
            location=str(location) if location else None,
            installed_version=found.version if found else None,
            installed_commit=installed_commit,
            ejected_path=str(folder) if record is not None else None,
            ejected_commit=ejected.head if ejected else None,
            ejected_branch=ejected.branch if ejected else None,
            restart_required=(record is not None) != running_ejected,
        )

    def _installed_commit(self, found: InstalledDistribution) -> str | None:
        source = self._sources.resolve(found)
        if source.commit:
            return source.commit
        path = path_from_url(source.url) if source.kind == "git" and source.url else None
        if path is not None and path.is_dir():
            probe = self._runner.git(path, "rev-parse", "HEAD", check=False)
            return probe.stdout.strip() or None
        return None
