"""Reinject: remove an ejected copy so the installed package loads again."""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

from agentplug.plugins.manager.checks import TreeCheck
from agentplug.plugins.manager.distributions import Distributions, InstalledDistribution
from agentplug.plugins.manager.reports import ReinjectReport
from agentplug.plugins.manager.working_copies import WorkingCopies

__all__ = ["Reinjector"]

log = logging.getLogger("agentplug.plugins")


class Reinjector:
    """Removes a working copy so the installed package loads again, once the install
    checks have passed that package."""

    def __init__(self, copies: WorkingCopies, distributions: Distributions) -> None:
        self._copies = copies
        self._distributions = distributions

    def remove(
        self, plugin_id: str, folder: Path, check: TreeCheck, found: InstalledDistribution | None
    ) -> ReinjectReport:
        """Remove the working copy ``folder`` of ``plugin_id`` (run under its lock, in a
        thread); ``found`` is the installed package that loads instead (``None``: the one
        providing ``plugin_id``)."""
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
