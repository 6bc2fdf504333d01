"""Eject: put a plugin's source under the state folder as a git working copy."""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from pathlib import Path

from packaging.utils import canonicalize_name

from agentplug.plugins.ejected import LOCAL_BRANCH, UpstreamRecord
from agentplug.plugins.manager.archives import find_import_roots
from agentplug.plugins.manager.checks import TreeCheck
from agentplug.plugins.manager.distributions import Distributions, InstalledDistribution
from agentplug.plugins.manager.reports import EjectReport, PluginManagerError
from agentplug.plugins.manager.sources import SourceFetcher, UpstreamSource
from agentplug.plugins.manager.working_copies import WorkingCopies, write_record

__all__ = ["Ejector"]

log = logging.getLogger("agentplug.plugins")


class Ejector:
    """Ejects a plugin (or the core distribution ``core_distribution``): its upstream
    source, fetched into a temporary folder and checked, is renamed into place as a git
    working copy with its record (``source_label`` names where an sdist came from)."""

    def __init__(
        self,
        copies: WorkingCopies,
        distributions: Distributions,
        sources: SourceFetcher,
        source_label: str,
        core_distribution: str,
    ) -> None:
        self._copies = copies
        self._distributions = distributions
        self._sources = sources
        self._source_label = source_label
        self._core_distribution = core_distribution

    def eject_plugin(self, plugin_id: str, check: TreeCheck) -> EjectReport:
        """Eject the installed plugin ``plugin_id`` (run under its lock, in a thread)."""
        final = self._copies.path_of(plugin_id)
        if final.exists():
            raise PluginManagerError(
                f"plugin {plugin_id!r} is already ejected at {final}; sync it "
                "(SYNC_PLUGIN) or reinject it first (REINJECT_PLUGIN)"
            )
        found = self._distributions.find_plugin(plugin_id)
        if found is None:
            raise self._distributions.unknown(plugin_id)
        return self._eject_into(plugin_id, found, final, False, check)

    def eject_core(self, check: TreeCheck) -> EjectReport:
        """Eject the installed core distribution (run under the core's lock, in a thread)."""
        core_distribution = self._core_distribution
        final = self._copies.core_dir
        if final.exists():
            raise PluginManagerError(
                f"{core_distribution} is already ejected at {final}; sync it "
                "(SYNC_CORE) or reinject it first (REINJECT_CORE)"
            )
        found = self._distributions.find(core_distribution)
        if found is None:
            raise PluginManagerError(f"distribution {core_distribution!r} is not installed")
        name = canonicalize_name(core_distribution)
        return self._eject_into(name, found, final, True, check)

    def _eject_into(
        self,
        plugin_id: str,
        found: InstalledDistribution,
        final: Path,
        core: bool,
        check: TreeCheck,
    ) -> EjectReport:
        final.parent.mkdir(parents=True, exist_ok=True)
        # Leftovers of an interrupted eject/reinject of this id (we hold its lock).
        for stale in [
            *final.parent.glob(f".eject-{plugin_id}-*"),
            *final.parent.glob(f".trash-{plugin_id}-*"),
        ]:
            shutil.rmtree(stale, ignore_errors=True)
        temp = Path(tempfile.mkdtemp(prefix=f".eject-{plugin_id}-", dir=final.parent))
        try:
            work = temp / "work"
            source = self._sources.resolve(found)
            if source.kind == "git" and source.guessed:
                try:
                    commit = self._sources.clone(source, found, work)
                except PluginManagerError as exc:  # a project page, not a repository
                    log.info("%s is not clonable (%s); using the sdist", source.url, exc)
                    shutil.rmtree(work, ignore_errors=True)
                    source = UpstreamSource("sdist")
            elif source.kind == "git":
                commit = self._sources.clone(source, found, work)
            if source.kind == "git":
                url, ref = source.url, source.ref or self._sources.remote_default_branch(work)
            else:
                commit = self._sources.import_sdist(found, temp, work)
                url, ref = self._source_label, None
            top_level = found.top_level()
            record = UpstreamRecord(
                plugin_id=plugin_id,
                distribution=found.name,
                version=found.version,
                source_kind=source.kind,
                url=url,
                commit=commit,
                ref=ref,
                top_level=top_level,
                import_roots=find_import_roots(work, top_level, source.subdirectory),
                core=core,
            )
            check(work, found.name, found.version, url, None)  # before it can load
            write_record(work, record)
            os.rename(work, final)  # atomic: the folder appears complete or not at all
        finally:
            shutil.rmtree(temp, ignore_errors=True)
        log.info("ejected %s (%s %s) to %s", plugin_id, found.name, found.version, final)
        return EjectReport(
            plugin_id=plugin_id,
            distribution=found.name,
            version=found.version,
            path=str(final),
            branch=LOCAL_BRANCH,
            source_kind=record.source_kind,
            url=record.url,
            commit=record.commit,
        )
