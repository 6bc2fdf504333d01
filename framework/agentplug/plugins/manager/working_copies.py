"""The ejected working copies under the state folder: where each one is, its upstream
record file, and what ``git`` says about it (branch, head, local edits)."""

from __future__ import annotations

from pathlib import Path

from packaging.utils import canonicalize_name

from agentplug.plugins.ejected import (
    PLUGIN_ID_PATTERN,
    RECORD_FILE,
    UpstreamRecord,
    core_root,
    plugins_root,
    read_record,
)
from agentplug.plugins.manager.reports import EjectedPlugin, PluginManagerError
from agentplug.plugins.manager.runner import CommandRunner

__all__ = ["WorkingCopies", "check_plugin_id", "write_record"]


def check_plugin_id(plugin_id: str) -> str:
    """``plugin_id`` when it can name a folder under ``<state_dir>/plugins``; else a
    :class:`PluginManagerError` that says what an id looks like."""
    if not isinstance(plugin_id, str) or not PLUGIN_ID_PATTERN.match(plugin_id):
        raise PluginManagerError(
            f"invalid plugin id {plugin_id!r}: use letters, digits, '.', '_' and '-' "
            "(the id `agentplug plugins` lists)"
        )
    return plugin_id


def write_record(work: Path, record: UpstreamRecord) -> None:
    """Write ``record`` into the working copy ``work``, and keep it (and the bytecode that
    importing the copy writes) out of git."""
    (work / RECORD_FILE).write_text(record.model_dump_json(indent=2) + "\n", "utf-8")
    exclude = work / ".git" / "info" / "exclude"
    exclude.parent.mkdir(parents=True, exist_ok=True)
    existing = exclude.read_text("utf-8") if exclude.exists() else ""
    lines = existing.splitlines()
    # Importing the ejected copy writes bytecode: never commit or report it.
    missing = [p for p in (RECORD_FILE, "__pycache__/", "*.py[cod]") if p not in lines]
    if missing:
        exclude.write_text(existing + "\n" + "\n".join(missing) + "\n", "utf-8")


class WorkingCopies:
    """The working copies of ``state_dir``: one per ejected plugin id, and the ejected
    core (distribution ``core_distribution``)."""

    def __init__(self, state_dir: Path, core_distribution: str, runner: CommandRunner) -> None:
        self._state_dir = state_dir
        self._core_distribution = core_distribution
        self._runner = runner

    @property
    def plugins_dir(self) -> Path:
        """``<state_dir>/plugins``: one ejected working copy per plugin id."""
        return plugins_root(self._state_dir)

    @property
    def core_dir(self) -> Path:
        """``<state_dir>/core/<distribution>``: the ejected agentplug core."""
        return core_root(self._state_dir) / canonicalize_name(self._core_distribution)

    def path_of(self, plugin_id: str) -> Path:
        """Where ``plugin_id`` is (or would be) ejected."""
        return self.plugins_dir / check_plugin_id(plugin_id)

    def require(self, plugin_id: str, folder: Path) -> UpstreamRecord:
        """The record of the working copy ``folder``; an error when it is not ejected."""
        record = read_record(folder)
        if not folder.is_dir() or record is None:
            what = "agentplug core" if plugin_id == self._core_distribution else "plugin"
            raise PluginManagerError(
                f"{what} {plugin_id!r} is not ejected (no {folder / RECORD_FILE}); "
                "eject it first (EJECT_PLUGIN / EJECT_CORE)"
            )
        return record

    def listing(self) -> list[EjectedPlugin]:
        """Every ejected plugin: name, branch, local path (and where it came from)."""
        found: list[EjectedPlugin] = []
        root = self.plugins_dir
        if not root.is_dir():
            return found
        for folder in sorted(root.iterdir()):
            if folder.name.startswith(".") or not folder.is_dir():
                continue
            found.append(self.describe(folder.name, folder))
        return found

    def describe(self, name: str, folder: Path) -> EjectedPlugin:
        """The working copy ``folder``: its record, branch, head and whether it has
        uncommitted edits."""
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
