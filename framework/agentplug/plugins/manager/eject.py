"""Eject: put a plugin's source under the state folder as a git working copy."""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from pathlib import Path

from agentplug.plugins.ejected import LOCAL_BRANCH, UpstreamRecord
from agentplug.plugins.manager.archives import find_import_roots
from agentplug.plugins.manager.base import _ManagerBase
from agentplug.plugins.manager.checks import TreeCheck
from agentplug.plugins.manager.distributions import InstalledDistribution
from agentplug.plugins.manager.reports import EjectReport, PluginManagerError
from agentplug.plugins.manager.sources import UpstreamSource
from agentplug.plugins.manager.working_copies import check_plugin_id, write_record

log = logging.getLogger("agentplug.plugins")


class _EjectMixin(_ManagerBase):
    """:meth:`eject` (and the ejection itself, shared with the core)."""

    async def eject(self, plugin_id: str, *, requested_by: str | None = None) -> EjectReport:
        """Put ``plugin_id``'s source under ``<state_dir>/plugins/<plugin_id>/`` (git).

        The source tree goes through the install checks (``security.install_policy``,
        then ``before_install``) before it is moved into place; a block raises
        :class:`~agentplug.plugins.manager.checks.InstallBlockedError` and leaves nothing.
        """
        check_plugin_id(plugin_id)
        check = self._checks.tree_check("eject", plugin_id, requested_by)
        return await self._locks.run_locked(
            f"plugin-{plugin_id}", self._eject_plugin, plugin_id, check
        )

    def _eject_plugin(self, plugin_id: str, check: TreeCheck) -> EjectReport:
        final = self.ejected_path(plugin_id)
        if final.exists():
            raise PluginManagerError(
                f"plugin {plugin_id!r} is already ejected at {final}; sync it "
                "(SYNC_PLUGIN) or reinject it first (REINJECT_PLUGIN)"
            )
        found = self._distributions.find_plugin(plugin_id)
        if found is None:
            raise self._distributions.unknown(plugin_id)
        return self._eject_into(plugin_id, found, final, False, check)

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
                url, ref = self.settings.source_label, None
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
