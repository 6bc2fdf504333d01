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
import tarfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from agentplug.plugins.manager.base import _ManagerBase
from agentplug.plugins.manager.reports import PluginManagerError

if TYPE_CHECKING:
    from agentplug.core.host import PluginHost
    from agentplug.services.install import InstallDecision

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


class _ChecksMixin(_ManagerBase):
    """Build the check an operation runs (from its worker thread) before changing disk."""

    def _install_host(self) -> PluginHost:
        if self.host is None:  # fail closed: no host, no install checks, no change
            raise PluginManagerError(
                "installing, ejecting, syncing or reinjecting needs a host: the install "
                "policy and before_install plugins must check the code first "
                "(PluginManager(host, ...))"
            )
        return self.host

    def _tree_check(
        self, operation: Operation, plugin_id: str, requested_by: str | None
    ) -> TreeCheck:
        """A check for ``operation`` that the worker thread calls with each tree; it runs
        ``check_install`` on the calling event loop (which is waiting for the thread)."""
        from agentplug.services.install import check_install

        host = self._install_host()
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

    def _git_tree(self, repo: Path, commit: str, into: Path) -> Path:
        """Write the tree of ``commit`` of ``repo`` into the folder ``into`` (for checks)."""
        archive = into.with_suffix(".tar")
        self._runner.git(repo, "archive", "--format=tar", "-o", str(archive), commit)
        into.mkdir(parents=True, exist_ok=True)
        with tarfile.open(archive) as tar:
            tar.extractall(into, filter="data")
        archive.unlink()
        return into
