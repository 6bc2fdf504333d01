"""Listing ejected working copies (branch, head, dirty, where they came from)."""

from __future__ import annotations

from pathlib import Path

from agentplug.plugins.ejected import read_record
from agentplug.plugins.manager.base import _ManagerBase
from agentplug.plugins.manager.reports import EjectedPlugin


class _ListingMixin(_ManagerBase):
    """:meth:`ejected` and the description of one working copy."""

    def ejected(self) -> list[EjectedPlugin]:
        """Every ejected plugin: name, branch, local path (and where it came from)."""
        found: list[EjectedPlugin] = []
        root = self.plugins_dir
        if not root.is_dir():
            return found
        for folder in sorted(root.iterdir()):
            if folder.name.startswith(".") or not folder.is_dir():
                continue
            found.append(self._describe(folder.name, folder))
        return found

    def _describe(self, name: str, folder: Path) -> EjectedPlugin:
        record = read_record(folder)
        git = self._runner.git
        branch = git(folder, "rev-parse", "--abbrev-ref", "HEAD", check=False).stdout.strip()
        head = git(folder, "rev-parse", "HEAD", check=False).stdout.strip()
        dirty = bool(git(folder, "status", "--porcelain", check=False).stdout.strip())
        return EjectedPlugin(
            name=name,
            branch=branch or None,
            path=str(folder),
            distribution=record.distribution if record else None,
            version=record.version if record else None,
            source_kind=record.source_kind if record else None,
            url=record.url if record else None,
            head=head or None,
            dirty=dirty,
        )
