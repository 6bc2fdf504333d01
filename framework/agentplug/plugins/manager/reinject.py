"""Reinject: remove an ejected copy so the installed package loads again."""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

from agentplug.plugins.ejected import activate_ejected_source
from agentplug.plugins.manager.base import _ManagerBase
from agentplug.plugins.manager.checks import TreeCheck
from agentplug.plugins.manager.distributions import InstalledDistribution
from agentplug.plugins.manager.reports import ReinjectReport
from agentplug.plugins.manager.working_copies import check_plugin_id

log = logging.getLogger("agentplug.plugins")


class _ReinjectMixin(_ManagerBase):
    """:meth:`reinject` (and the removal itself, shared with the core)."""

    async def reinject(self, plugin_id: str, *, requested_by: str | None = None) -> ReinjectReport:
        """Remove ``plugin_id``'s ejected copy so the installed package loads again.

        The installed package that becomes importable goes through the install checks
        first; a block raises
        :class:`~agentplug.plugins.manager.checks.InstallBlockedError` and keeps the copy.
        """
        check_plugin_id(plugin_id)
        folder = self.ejected_path(plugin_id)
        check = self._checks.tree_check("reinject", plugin_id, requested_by)
        report = await self._locks.run_locked(
            f"plugin-{plugin_id}", self._remove, plugin_id, folder, check, None
        )
        activate_ejected_source(self.state_dir, plugin_id)  # drop it from sys.path
        return report

    def _remove(
        self, plugin_id: str, folder: Path, check: TreeCheck, found: InstalledDistribution | None
    ) -> ReinjectReport:
        self._copies.require(plugin_id, folder)
        installed = found or self._distributions.find_plugin(plugin_id)
        if installed is not None:  # what loads once the copy is gone
            files = [str(f) for f in installed.dist.files or []]
            where = Path(str(installed.dist.locate_file("")))
            check(where, installed.name, installed.version, str(where), files)
        trash = folder.with_name(f".trash-{folder.name}-{os.getpid()}")
        os.rename(folder, trash)  # atomic: the copy stops being used at once
        shutil.rmtree(trash, ignore_errors=True)
        log.info("reinjected %s (removed %s)", plugin_id, folder)
        return ReinjectReport(plugin_id=plugin_id, path=str(folder), removed=True)
