"""The pip commands of the manager: downloading, the offline dry run that says what an
install would add, and the offline install of exactly the inspected files."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path

from packaging.utils import canonicalize_name

from agentplug.plugins.ejected import PluginSettings
from agentplug.plugins.manager.archives import normalize_version
from agentplug.plugins.manager.locating import path_from_url
from agentplug.plugins.manager.reports import PluginManagerError
from agentplug.plugins.manager.runner import CommandRunner

__all__ = ["PipCommands"]


class PipCommands:
    """Builds and runs pip for the settings of ``actions.plugins`` (the interpreter, the
    index or find-links, build isolation, dependencies, the install target)."""

    def __init__(self, settings: PluginSettings, runner: CommandRunner) -> None:
        self._settings = settings
        self._runner = runner

    def command(self) -> list[str]:
        """``<python> -m pip``: the configured interpreter, else this one."""
        return [self._settings.python or sys.executable, "-m", "pip"]

    def download_one(self, spec: str, dest: Path, *, sdist: bool = False) -> Path:
        """``pip download --no-deps`` ``spec`` (its sdist with ``sdist``) into ``dest``;
        anything but exactly one file is an error."""
        cmd = [*self.command(), "download", "--no-deps", "--quiet", "-d", str(dest)]
        if sdist:
            cmd += ["--no-binary", ":all:"]
        if not self._settings.build_isolation:
            cmd.append("--no-build-isolation")
        cmd += [*self._settings.pip_index_args(), spec]
        self._runner.run(cmd)
        found = sorted(p for p in dest.iterdir() if p.is_file())
        if len(found) != 1:
            raise PluginManagerError(
                f"pip download {spec} produced {len(found)} files, expected exactly one"
            )
        return found[0]

    def download_all(self, spec: str, dest: Path) -> list[Path]:
        """``pip download`` ``spec`` (and, per ``install_dependencies``, its dependencies)."""
        cmd = [*self.command(), "download", "--quiet", "-d", str(dest)]
        if not self._settings.install_dependencies:
            cmd.append("--no-deps")
        if not self._settings.build_isolation:
            cmd.append("--no-build-isolation")
        cmd += [*self._settings.pip_index_args(), spec]
        self._runner.run(cmd)
        found = sorted(p for p in dest.iterdir() if p.is_file())
        if not found:
            raise PluginManagerError(f"pip download {spec} produced no files")
        return found

    @staticmethod
    def offline(folder: Path) -> list[str]:
        """pip options that see only ``folder`` (no index, no configured find-links)."""
        return [
            "--isolated",
            "--disable-pip-version-check",
            "--no-input",
            "--no-index",
            "--find-links",
            str(folder),
        ]

    def needed(self, work: Path, root: Path) -> set[tuple[str, str | None]]:
        """(name, version) of the downloaded distributions pip would install into the
        environment for ``root``: a dry run that can see only the download folder."""
        report = work / "resolution.json"
        cmd = [*self.command(), "install", "--dry-run", "--quiet", "--report", str(report)]
        cmd += self.offline(root.parent)
        if not self._settings.build_isolation:
            cmd.append("--no-build-isolation")
        self._runner.run([*cmd, str(root)])
        try:
            items = json.loads(report.read_text("utf-8")).get("install") or []
            needed: set[tuple[str, str | None]] = set()
            for item in items:
                url = str(item["download_info"]["url"])
                where = path_from_url(url)
                if where is None or where.resolve().parent != root.parent.resolve():
                    raise PluginManagerError(f"pip would install {url}, which was not downloaded")
                meta = item["metadata"]
                needed.add((canonicalize_name(meta["name"]), normalize_version(meta["version"])))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise PluginManagerError(f"cannot read pip's install plan: {exc}") from None
        return needed

    def install_files(self, folder: Path, files: Sequence[Path]) -> None:
        """Install exactly ``files`` (all inspected) from ``folder``: no index, no other
        find-links, no dependency resolution."""
        cmd = [*self.command(), "install", "--quiet", "--no-deps", *self.offline(folder)]
        if not self._settings.build_isolation:
            cmd.append("--no-build-isolation")
        if self._settings.target:
            Path(self._settings.target).mkdir(parents=True, exist_ok=True)
            cmd += ["--upgrade", "--target", self._settings.target]
        try:
            self._runner.run([*cmd, *(str(f) for f in files)])
        except PluginManagerError as exc:
            if self._settings.build_isolation and any(not f.name.endswith(".whl") for f in files):
                raise PluginManagerError(
                    f"{exc} (source distributions are built offline: put their build "
                    "requirements in actions.plugins.find_links, or set "
                    "actions.plugins.build_isolation to false)"
                ) from None
            raise
