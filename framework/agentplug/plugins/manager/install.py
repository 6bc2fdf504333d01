"""Install: download, inspect every file through the install policy, install offline."""

from __future__ import annotations

import asyncio
import logging
import shutil
import tempfile
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from agentplug.plugins.manager.archives import prepare_downloads
from agentplug.plugins.manager.checks import InstallChecks
from agentplug.plugins.manager.locking import OperationLocks
from agentplug.plugins.manager.pip_commands import PipCommands
from agentplug.plugins.manager.reports import (
    InspectedDistribution,
    InstallReport,
    PluginManagerError,
)

__all__ = ["Installer"]

log = logging.getLogger("agentplug.plugins")


class Installer:
    """Installs a package: download it (and its dependencies), check every downloaded
    file, then install exactly those files, offline. ``target`` is the install folder
    (``None``: the environment, where only what pip would add is checked and installed)."""

    def __init__(
        self,
        pip: PipCommands,
        checks: InstallChecks,
        locks: OperationLocks,
        target: str | None,
    ) -> None:
        self._pip = pip
        self._checks = checks
        self._locks = locks
        self._target = target

    async def install(self, spec: str, *, requested_by: str | None = None) -> InstallReport:
        """Install ``spec`` (see :meth:`PluginManager.install
        <agentplug.plugins.manager.PluginManager.install>`)."""
        try:
            requirement = Requirement(spec.strip())
        except InvalidRequirement as exc:
            raise PluginManagerError(
                f"invalid package requirement {spec!r}: {exc}; use a name such as "
                "'my-plugin' or 'my-plugin==1.2'"
            ) from None
        if requirement.url or spec.strip().startswith("-"):
            raise PluginManagerError(
                f"{spec!r}: direct URLs are not accepted; install by name from the "
                "configured index (actions.plugins.index_url / find_links)"
            )
        self._checks.require_host()  # fail closed before downloading anything
        wanted = canonicalize_name(requirement.name)
        async with self._locks.serialized(f"dist-{wanted}"):
            work = Path(tempfile.mkdtemp(prefix="agentplug-install-"))
            try:
                downloads = work / "downloads"
                downloads.mkdir()
                files = await asyncio.to_thread(self._pip.download_all, str(requirement), downloads)
                prepared = prepare_downloads(files, wanted, str(requirement))
                root = prepared[0]
                if not self._target and len(prepared) > 1:
                    # Installing into the environment: only what pip would add there
                    # (dependencies already satisfied stay as they are).
                    needed = await asyncio.to_thread(self._pip.needed, work, root.path)
                    prepared = [root, *(p for p in prepared[1:] if p.key in needed)]
                inspected: list[InspectedDistribution] = []
                findings: list[dict[str, Any]] = []
                for item in prepared:
                    decision = await self._checks.check_download(
                        item, requested_by, None if item is root else root.name
                    )
                    found = [
                        {**f.model_dump(mode="json"), "distribution": item.name}
                        for f in decision.findings
                    ]
                    findings += found
                    inspected.append(
                        InspectedDistribution(
                            name=item.name,
                            version=item.version,
                            file=item.path.name,
                            requested=item is root,
                            allowed=decision.allowed,
                            blocked_by=decision.blocked_by,
                            reason=decision.reason,
                            findings=found,
                        )
                    )
                    if decision.allowed:
                        continue
                    reason = decision.reason or f"blocked by {decision.blocked_by}"
                    if item is not root:
                        reason = (
                            f"dependency {item.name} {item.version} (required by "
                            f"{root.name}): {reason}"
                        )
                    log.warning(
                        "install of %s %s blocked by %s (distribution %s %s): %s",
                        root.name,
                        root.version,
                        decision.blocked_by,
                        item.name,
                        item.version,
                        decision.reason,
                    )
                    return InstallReport(
                        installed=False,
                        name=root.name,
                        version=root.version,
                        file=root.path.name,
                        blocked_by=decision.blocked_by,
                        reason=reason,
                        findings=findings,
                        blocked_distribution=item.name,
                        inspected=inspected,
                    )
                await asyncio.to_thread(
                    self._pip.install_files, downloads, [item.path for item in prepared]
                )
            finally:
                shutil.rmtree(work, ignore_errors=True)
        log.info(
            "installed %s %s (inspected: %s)",
            root.name,
            root.version,
            ", ".join(f"{i.name} {i.version}" for i in inspected),
        )
        return InstallReport(
            installed=True,
            name=root.name,
            version=root.version,
            file=root.path.name,
            findings=findings,
            restart_required=True,
            inspected=inspected,
        )
