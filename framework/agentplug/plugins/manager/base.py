"""The collaborators every operation of the manager shares, built once from the settings:
the command runner, the operation locks, the distributions lookup, pip, the source
fetcher, the install checks and the working copies."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from agentplug.plugins.ejected import (
    CORE_DISTRIBUTION,
    PluginSettings,
    plugin_settings,
    resolve_state_dir,
)
from agentplug.plugins.manager.checks import InstallChecks
from agentplug.plugins.manager.distributions import Distributions, InstalledDistribution
from agentplug.plugins.manager.locking import OperationLocks
from agentplug.plugins.manager.pip_commands import PipCommands
from agentplug.plugins.manager.reports import EjectedPlugin
from agentplug.plugins.manager.runner import CommandRunner
from agentplug.plugins.manager.sources import SourceFetcher
from agentplug.plugins.manager.working_copies import WorkingCopies

if TYPE_CHECKING:
    from agentplug.core.host import PluginHost


class _ManagerBase:
    """Settings and the shared collaborators (of the operation mixins
    :class:`~agentplug.plugins.manager.PluginManager` composes)."""

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
        self._runner = CommandRunner(self.settings.timeout_s)
        self._locks = OperationLocks(self.state_dir)
        self._distributions = Distributions(self.settings.target)
        self._pip = PipCommands(self.settings, self._runner)
        self._sources = SourceFetcher(self._runner, self._pip)
        self._checks = InstallChecks(host, self.settings.source_label)
        self._copies = WorkingCopies(self.state_dir, core_distribution, self._runner)

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
