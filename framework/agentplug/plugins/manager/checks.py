"""The install checks of every operation that puts code on disk or makes it importable.

``install`` checks each downloaded file; ``eject`` checks the source tree before it is
moved into place, ``sync`` checks the fetched upstream tree before anything is merged, and
``reinject`` checks the installed package that becomes importable again. The same checks
each time: ``security.install_policy``, then ``before_install``
(:func:`agentplug.services.install.check_install`). A block raises
:class:`InstallBlockedError` before the operation changes anything.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from agentplug.plugins.manager.archives import PreparedDistribution
from agentplug.plugins.manager.reports import PluginManagerError

if TYPE_CHECKING:
    from agentplug.core.host import PluginHost
    from agentplug.services.install import InstallDecision

__all__ = ["InstallBlockedError", "InstallChecks", "Operation", "TreeCheck", "tree_files"]

Operation = Literal["install", "eject", "sync", "reinject"]
TreeCheck = Callable[[Path, str, "str | None", "str | None", "list[str] | None"], None]
"""``check(folder, distribution, version, source, files)`` (``files``: ``None`` lists the
folder): raises :class:`InstallBlockedError`."""

_MAX_LISTED_FILES = 10_000


class InstallBlockedError(PluginManagerError):
    """``security.install_policy`` or a ``before_install`` plugin refused an operation."""

    def __init__(self, operation: str, name: str, decision: InstallDecision) -> None:
        self.operation = operation
        self.name = name
        self.decision = decision
        self.blocked_by = decision.blocked_by
        super().__init__(
            f"{operation} of {name} blocked by {decision.blocked_by}: "
            f"{decision.reason or 'no reason given'}; nothing was changed (an operator "
            "allows it in security.install_policy, or the blocking plugin does)"
        )


def tree_files(folder: Path) -> list[str]:
    """Relative paths of the files under ``folder`` (``.git`` left out), sorted."""
    found: list[str] = []
    for root, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if d != ".git")
        for name in sorted(files):
            found.append(str((Path(root) / name).relative_to(folder)))
            if len(found) >= _MAX_LISTED_FILES:
                return found
    return found


class InstallChecks:
    """Runs the install checks of ``host`` (no host: every operation that changes code
    fails closed)."""

    def __init__(self, host: PluginHost | None, source_label: str) -> None:
        self._host = host
        self._source_label = source_label

    def require_host(self) -> PluginHost:
        """The host whose checks decide; without one, nothing may be changed."""
        if self._host is None:  # fail closed: no host, no install checks, no change
            raise PluginManagerError(
                "installing, ejecting, syncing or reinjecting needs a host: the install "
                "policy and before_install plugins must check the code first "
                "(PluginManager(host, ...))"
            )
        return self._host

    def tree_check(
        self, operation: Operation, plugin_id: str, requested_by: str | None
    ) -> TreeCheck:
        """A check for ``operation`` that the worker thread calls with each tree; it runs
        ``check_install`` on the calling event loop (which is waiting for the thread)."""
        from agentplug.services.install import check_install

        host = self.require_host()
        loop = asyncio.get_running_loop()

        def check(
            folder: Path,
            name: str,
            version: str | None,
            source: str | None,
            files: list[str] | None = None,
        ) -> None:
            if files is None:
                files = tree_files(folder) if folder.is_dir() else []
            event = {
                "kind": "plugin",
                "name": name,
                "version": version,
                "source": source,
                "path": str(folder),
                "files": files,
                "operation": operation,
                "plugin_id": plugin_id,
            }
            ctx = {"requested_by": requested_by, "source": source}
            future = asyncio.run_coroutine_threadsafe(check_install(host, event, ctx), loop)
            decision = future.result()
            if not decision.allowed:
                raise InstallBlockedError(operation, name, decision)

        return check

    async def check_download(
        self, item: PreparedDistribution, requested_by: str | None, dependency_of: str | None
    ) -> InstallDecision:
        """The decision on one downloaded file of an install (``dependency_of``: the
        requested package, when ``item`` is one of its dependencies)."""
        from agentplug.services.install import check_install

        host = self.require_host()
        source = self._source_label
        event = {
            "kind": "plugin",
            "operation": "install",
            "name": item.name,
            "version": item.version,
            "source": source,
            "path": str(item.path),
            "files": item.files,
            "requested": dependency_of is None,
            "dependency_of": dependency_of,
        }
        ctx = {"requested_by": requested_by, "source": source}
        return await check_install(host, event, ctx)
