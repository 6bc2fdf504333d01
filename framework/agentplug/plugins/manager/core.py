"""Where the agentplug core runs from: the installed package or its ejected source, with
versions and commits of both."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path

from agentplug.plugins.ejected import read_record
from agentplug.plugins.manager.distributions import Distributions, InstalledDistribution
from agentplug.plugins.manager.locating import path_from_url
from agentplug.plugins.manager.reports import CoreStatus
from agentplug.plugins.manager.runner import CommandRunner
from agentplug.plugins.manager.sources import SourceFetcher
from agentplug.plugins.manager.working_copies import WorkingCopies

__all__ = ["CoreLocator"]


class CoreLocator:
    """Tells where the core distribution ``core_distribution`` (imported as
    ``core_module``) runs from, and what the installed and the ejected copy are."""

    def __init__(
        self,
        core_distribution: str,
        core_module: str,
        distributions: Distributions,
        sources: SourceFetcher,
        copies: WorkingCopies,
        runner: CommandRunner,
    ) -> None:
        self._core_distribution = core_distribution
        self._core_module = core_module
        self._distributions = distributions
        self._sources = sources
        self._copies = copies
        self._runner = runner

    def status(self) -> CoreStatus:
        """Whether the core runs from the installed package or an ejected source."""
        found = self._distributions.find(self._core_distribution)
        module = sys.modules.get(self._core_module)
        location: Path | None = None
        if module is not None and getattr(module, "__file__", None):
            location = Path(str(module.__file__)).resolve().parent
        elif (spec := importlib.util.find_spec(self._core_module)) is not None and spec.origin:
            location = Path(spec.origin).resolve().parent
        installed_commit = self._installed_commit(found) if found else None
        folder = self._copies.core_dir
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
            distribution=found.name if found else self._core_distribution,
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
        """The commit ``found`` was installed from (recorded, or the head of the local
        repository it was installed from)."""
        source = self._sources.resolve(found)
        if source.commit:
            return source.commit
        path = path_from_url(source.url) if source.kind == "git" and source.url else None
        if path is not None and path.is_dir():
            probe = self._runner.git(path, "rev-parse", "HEAD", check=False)
            return probe.stdout.strip() or None
        return None
