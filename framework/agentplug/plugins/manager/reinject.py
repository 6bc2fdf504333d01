"""Reinject: remove an ejected copy so the installed package loads again."""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

from agentplug.plugins.ejected import activate_ejected_source
from agentplug.plugins.manager.base import _ManagerBase
from agentplug.plugins.manager.reports import ReinjectReport

log = logging.getLogger("agentplug.plugins")


class _ReinjectMixin(_ManagerBase):
    """:meth:`reinject` (and the removal itself, shared with the core)."""

    async def reinject(self, plugin_id: str) -> ReinjectReport:
        """Remove ``plugin_id``'s ejected copy so the installed package loads again."""
        self._check_id(plugin_id)
        folder = self.ejected_path(plugin_id)
        report = await self._locked(f"plugin-{plugin_id}", self._remove, plugin_id, folder)
        activate_ejected_source(self.state_dir, plugin_id)  # drop it from sys.path
        return report

    def _remove(self, plugin_id: str, folder: Path) -> ReinjectReport:
        self._require_ejected(plugin_id, folder)
        trash = folder.with_name(f".trash-{folder.name}-{os.getpid()}")
        os.rename(folder, trash)  # atomic: the copy stops being used at once
        shutil.rmtree(trash, ignore_errors=True)
        log.info("reinjected %s (removed %s)", plugin_id, folder)
        return ReinjectReport(plugin_id=plugin_id, path=str(folder), removed=True)
