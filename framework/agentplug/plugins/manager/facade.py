"""The :class:`PluginManager`: builds its collaborators once from the settings, and runs
each operation as "check the id, build the install check, do the work under the lock"."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from packaging.utils import canonicalize_name

from agentplug.plugins.ejected import (
    CORE_DISTRIBUTION,
    PluginSettings,
    activate_ejected_source,
    plugin_settings,
    resolve_state_dir,
)
from agentplug.plugins.manager.checks import InstallChecks
from agentplug.plugins.manager.core import CoreLocator
from agentplug.plugins.manager.distributions import Distributions, InstalledDistribution
from agentplug.plugins.manager.eject import Ejector
from agentplug.plugins.manager.install import Installer
from agentplug.plugins.manager.locking import OperationLocks
from agentplug.plugins.manager.pip_commands import PipCommands
from agentplug.plugins.manager.reinject import Reinjector
from agentplug.plugins.manager.reports import (
    CoreStatus,
    EjectedPlugin,
    EjectReport,
    InstallReport,
    ReinjectReport,
    SyncReport,
)
from agentplug.plugins.manager.runner import CommandRunner
from agentplug.plugins.manager.sources import SourceFetcher
from agentplug.plugins.manager.sync import Syncer
from agentplug.plugins.manager.working_copies import WorkingCopies, check_plugin_id

if TYPE_CHECKING:
    from agentplug.core.host import PluginHost

__all__ = ["PluginManager"]


class PluginManager:
    """Install, eject, sync and reinject plugins and the agentplug core.

    ``host`` is used for install decisions (``check_install``) and settings
    (``actions.plugins``); it may be ``None`` for ejection-only use. ``state_dir``
    defaults to :func:`resolve_state_dir`.
    """

    def __init__(
        self,
        host: PluginHost | None = None,
        state_dir: str | Path | None = None,
        *,
        settings: PluginSettings | None = None,
        core_distribution: str = CORE_DISTRIBUTION,
        core_module: str | None = None,
    ) -> None:
        self.host = host
        self.settings = settings or (
            plugin_settings(host.config.actions) if host is not None else PluginSettings()
        )
        self.state_dir = resolve_state_dir(host, state_dir or self.settings.state_dir)
        self.core_distribution = core_distribution
        self.core_module = core_module or core_distribution.replace("-", "_")
        # The collaborators, built once: each receives only what it uses.
        source_label = self.settings.source_label
        runner = CommandRunner(self.settings.timeout_s)
        pip = PipCommands(self.settings, runner)
        distributions = Distributions(self.settings.target)
        sources = SourceFetcher(runner, pip)
        copies = WorkingCopies(self.state_dir, core_distribution, runner)
        self._locks = OperationLocks(self.state_dir)
        self._checks = InstallChecks(host, source_label)
        self._distributions = distributions
        self._copies = copies
        self._installer = Installer(pip, self._checks, self._locks, self.settings.target)
        self._ejector = Ejector(copies, distributions, sources, source_label, core_distribution)
        self._syncer = Syncer(runner, copies, sources, source_label)
        self._reinjector = Reinjector(copies, distributions)
        self._core = CoreLocator(
            core_distribution, self.core_module, distributions, sources, copies, runner
        )

    # -- where things are ------------------------------------------------------------

    @property
    def plugins_dir(self) -> Path:
        """``<state_dir>/plugins``: one ejected working copy per plugin id."""
        return self._copies.plugins_dir

    @property
    def core_dir(self) -> Path:
        """``<state_dir>/core/<distribution>``: the ejected agentplug core."""
        return self._copies.core_dir

    def ejected_path(self, plugin_id: str) -> Path:
        """Where ``plugin_id`` is (or would be) ejected."""
        return self._copies.path_of(plugin_id)

    def find_plugin(self, plugin_id: str) -> InstalledDistribution | None:
        """The installed distribution providing plugin ``plugin_id`` (entry point of group
        ``agentplug``), or the distribution called ``plugin_id``; ``None`` if neither.

        An installer's ``.dist-info`` wins over a build's ``.egg-info`` left in a source
        folder that is also on ``sys.path``."""
        return self._distributions.find_plugin(plugin_id)

    def ejected(self) -> list[EjectedPlugin]:
        """Every ejected plugin: name, branch, local path (and where it came from)."""
        return self._copies.listing()

    # -- plugins -----------------------------------------------------------------------

    async def install(self, spec: str, *, requested_by: str | None = None) -> InstallReport:
        """Download ``spec`` and its dependencies, let ``check_install`` inspect every
        downloaded distribution, then install exactly those files, offline.

        ``spec`` is a requirement such as ``my-plugin`` or ``my-plugin==1.2`` (no URLs or
        paths: packages come from the configured index / find-links). Dependencies are
        downloaded and checked too when ``actions.plugins.install_dependencies`` is true.
        Returns a report; a blocked install has ``installed=False``, ``blocked_by``/
        ``reason`` set and ``blocked_distribution`` naming the package (the requested one
        or a dependency) whose check failed; nothing is installed then.
        """
        return await self._installer.install(spec, requested_by=requested_by)

    async def eject(self, plugin_id: str, *, requested_by: str | None = None) -> EjectReport:
        """Put ``plugin_id``'s source under ``<state_dir>/plugins/<plugin_id>/`` (git).

        The source tree goes through the install checks (``security.install_policy``,
        then ``before_install``) before it is moved into place; a block raises
        :class:`~agentplug.plugins.manager.checks.InstallBlockedError` and leaves nothing.
        """
        check_plugin_id(plugin_id)
        check = self._checks.tree_check("eject", plugin_id, requested_by)
        return await self._locks.run_locked(
            f"plugin-{plugin_id}", self._ejector.eject_plugin, plugin_id, check
        )

    async def sync(self, plugin_id: str, *, requested_by: str | None = None) -> SyncReport:
        """Fetch upstream and merge it into the ejected copy's local branch.

        The fetched upstream tree goes through the install checks before anything is
        merged; a block raises
        :class:`~agentplug.plugins.manager.checks.InstallBlockedError` and leaves the
        working copy and its branches exactly as they were.
        """
        check_plugin_id(plugin_id)
        folder = self.ejected_path(plugin_id)
        check = self._checks.tree_check("sync", plugin_id, requested_by)
        return await self._locks.run_locked(
            f"plugin-{plugin_id}", self._syncer.sync_folder, plugin_id, folder, check
        )

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
            f"plugin-{plugin_id}", self._reinjector.remove, plugin_id, folder, check, None
        )
        activate_ejected_source(self.state_dir, plugin_id)  # drop it from sys.path
        return report

    # -- the agentplug core ------------------------------------------------------------

    async def eject_core(self, *, requested_by: str | None = None) -> EjectReport:
        """Put agentplug's own source under ``<state_dir>/core/agentplug`` (git), through
        the install checks like :meth:`eject`."""
        name = canonicalize_name(self.core_distribution)
        check = self._checks.tree_check("eject", name, requested_by)
        return await self._locks.run_locked("core", self._ejector.eject_core, check)

    async def sync_core(self, *, requested_by: str | None = None) -> SyncReport:
        """Fetch and merge upstream into the ejected core (upstream checked first)."""
        name = canonicalize_name(self.core_distribution)
        check = self._checks.tree_check("sync", name, requested_by)
        return await self._locks.run_locked(
            "core", self._syncer.sync_folder, name, self.core_dir, check
        )

    async def reinject_core(self, *, requested_by: str | None = None) -> ReinjectReport:
        """Remove the ejected core so the installed package runs again (that package is
        checked first)."""
        name = canonicalize_name(self.core_distribution)
        check = self._checks.tree_check("reinject", name, requested_by)
        found = self._distributions.find(self.core_distribution)
        return await self._locks.run_locked(
            "core", self._reinjector.remove, name, self.core_dir, check, found
        )

    def core_status(self) -> CoreStatus:
        """Whether agentplug runs from the installed package or an ejected source."""
        return self._core.status()
