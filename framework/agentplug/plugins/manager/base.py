"""State every part of the manager shares: settings, paths, per-plugin locks, pip
command, and the upstream record file of an ejected copy."""

from __future__ import annotations

import asyncio
import contextlib
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from packaging.utils import canonicalize_name

from agentplug.plugins.ejected import (
    CORE_DISTRIBUTION,
    PLUGIN_ID_PATTERN,
    RECORD_FILE,
    PluginSettings,
    UpstreamRecord,
    core_root,
    plugin_settings,
    plugins_root,
    read_record,
    resolve_state_dir,
)
from agentplug.plugins.manager.locking import _FileLock
from agentplug.plugins.manager.reports import PluginManagerError
from agentplug.plugins.manager.runner import CommandRunner

if TYPE_CHECKING:
    from agentplug.core.host import PluginHost


_T = TypeVar("_T")


class _ManagerBase:
    """Settings, paths, locking, the pip command and the record file (shared by the
    operation mixins :class:`~agentplug.plugins.manager.PluginManager` composes)."""

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
        self._locks: dict[str, asyncio.Lock] = {}

    # -- paths ------------------------------------------------------------------------

    @property
    def plugins_dir(self) -> Path:
        """``<state_dir>/plugins``: one ejected working copy per plugin id."""
        return plugins_root(self.state_dir)

    @property
    def core_dir(self) -> Path:
        """``<state_dir>/core/<distribution>``: the ejected agentplug core."""
        return core_root(self.state_dir) / canonicalize_name(self.core_distribution)

    def ejected_path(self, plugin_id: str) -> Path:
        """Where ``plugin_id`` is (or would be) ejected."""
        return self.plugins_dir / self._check_id(plugin_id)

    def _search_path(self) -> list[str]:
        if self.settings.target:
            return [str(Path(self.settings.target).resolve()), *sys.path]
        return list(sys.path)

    @staticmethod
    def _check_id(plugin_id: str) -> str:
        if not isinstance(plugin_id, str) or not PLUGIN_ID_PATTERN.match(plugin_id):
            raise PluginManagerError(
                f"invalid plugin id {plugin_id!r}: use letters, digits, '.', '_' and '-' "
                "(the id `agentplug plugins` lists)"
            )
        return plugin_id

    # -- locking ----------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def _serialized(self, key: str) -> Any:
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock:
            safe = re.sub(r"[^A-Za-z0-9._-]", "_", key)
            file_lock = _FileLock(self.state_dir / "locks" / f"{safe}.lock")
            await asyncio.to_thread(file_lock.acquire)
            try:
                yield
            finally:
                file_lock.release()

    async def _locked(self, key: str, fn: Callable[..., _T], *args: Any) -> _T:
        async with self._serialized(key):
            return await asyncio.to_thread(fn, *args)

    # -- pip ----------------------------------------------------------------------------

    def _pip(self) -> list[str]:
        return [self.settings.python or sys.executable, "-m", "pip"]

    # -- record file --------------------------------------------------------------------

    def _write_record(self, work: Path, record: UpstreamRecord) -> None:
        (work / RECORD_FILE).write_text(record.model_dump_json(indent=2) + "\n", "utf-8")
        exclude = work / ".git" / "info" / "exclude"
        exclude.parent.mkdir(parents=True, exist_ok=True)
        existing = exclude.read_text("utf-8") if exclude.exists() else ""
        lines = existing.splitlines()
        # Importing the ejected copy writes bytecode: never commit or report it.
        missing = [p for p in (RECORD_FILE, "__pycache__/", "*.py[cod]") if p not in lines]
        if missing:
            exclude.write_text(existing + "\n" + "\n".join(missing) + "\n", "utf-8")

    def _require_ejected(self, plugin_id: str, folder: Path) -> UpstreamRecord:
        record = read_record(folder)
        if not folder.is_dir() or record is None:
            what = "agentplug core" if plugin_id == self.core_distribution else "plugin"
            raise PluginManagerError(
                f"{what} {plugin_id!r} is not ejected (no {folder / RECORD_FILE}); "
                "eject it first (EJECT_PLUGIN / EJECT_CORE)"
            )
        return record
