"""Install, eject, sync and reinject plugins (and agentplug itself).

:class:`PluginManager` backs the plugin-management built-in actions (ACTIONS.md §4) and the
``agentplug plugin ...`` command line:

* :meth:`~PluginManager.install` downloads every distribution that will be installed first
  (``pip download``: the package and, when ``install_dependencies`` is true, its
  dependencies), lets :func:`agentplug.services.install.check_install` inspect each downloaded file
  (``security.install_policy``, then ``before_install``; the requested package first), and
  only then ``pip install``\\ s from those very files, offline (``--no-index --find-links
  <download folder>``, ``--no-deps``, the exact files), so nothing uninspected can be
  fetched. Installing into the environment (no ``target``), dependencies the environment
  already satisfies are left alone: an offline ``pip install --dry-run`` over the download
  folder says which downloaded files pip would add, and only those are inspected and
  installed. Any block stops the whole install and leaves nothing installed; the report
  names the blocked distribution and lists every inspected one. Each ``before_install``
  event also carries ``requested`` and ``dependency_of`` (extra, read-only fields).
* :meth:`~PluginManager.eject` puts a plugin's source under ``<state_dir>/plugins/<id>/`` as
  a git working copy: branch ``main`` for local edits, branch ``upstream`` for the pristine
  upstream code, and ``.agentplug-upstream.json`` describing where it came from. The source
  is the distribution's git repository when it records one (``direct_url.json``
  ``vcs_info``, a local directory install that is a git work tree, or a ``Project-URL:
  Source``/``Repository`` that is a git URL or a local git repository), else its sdist
  (``pip download --no-binary :all:``). The work happens in a temporary folder that is
  renamed into place at the end: a failure never leaves a half-ejected plugin.
* :meth:`~PluginManager.sync` fetches upstream (``git fetch``, or the newest sdist committed
  onto ``upstream``) and merges it into ``main``; local uncommitted edits are committed
  first. A conflict is reported with the conflicting files and the merge is aborted, so
  the working copy is left clean and un-merged.
* :meth:`~PluginManager.reinject` removes the ejected copy so the installed package loads.

Operations are serialised per plugin: an :class:`asyncio.Lock` per id inside the process,
and an exclusive file lock under ``<state_dir>/locks/`` across processes.

The loader prefers an ejected copy through :func:`activate_ejected_source` (or the lower
level :func:`ejected_source`).

Settings (``actions.plugins`` in the operator config)::

    {"actions": {"plugins": {"index_url": "https://pypi.org/simple",
                             "find_links": ["/srv/wheels"], "no_index": false,
                             "target": null, "python": null,
                             "build_isolation": true, "install_dependencies": true,
                             "state_dir": null, "restart": true, "timeout_s": 600}}}
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import importlib
import importlib.util
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar
from urllib.parse import unquote, urlparse

import importlib_metadata
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    canonicalize_name,
    parse_sdist_filename,
    parse_wheel_filename,
)
from packaging.version import InvalidVersion, Version
from pydantic import BaseModel, Field

from agentplug.core.errors import AgentplugError
from agentplug.plugins.ejected import (
    _ID,
    CORE_DISTRIBUTION,
    DEFAULT_STATE_DIR,
    LOCAL_BRANCH,
    RECORD_FILE,
    STATE_DIR_ENV,
    UPSTREAM_BRANCH,
    PluginSettings,
    UpstreamRecord,
    _core_root,
    _plugins_root,
    _read_record,
    _roots_of,
    activate_ejected_source,
    activate_install_target,
    ejected_import_roots,
    ejected_source,
    plugin_settings,
    prefer_ejected_copy,
    resolve_state_dir,
)

if TYPE_CHECKING:
    from agentplug.core.host import PluginHost
    from agentplug.services.install import InstallDecision

__all__ = [
    "DEFAULT_STATE_DIR",
    "RECORD_FILE",
    "CoreStatus",
    "EjectReport",
    "EjectedPlugin",
    "InspectedDistribution",
    "InstallReport",
    "PluginManager",
    "PluginManagerError",
    "PluginSettings",
    "ReinjectReport",
    "SyncReport",
    "UpstreamRecord",
    "activate_ejected_source",
    "activate_install_target",
    "add_plugin_management_commands",
    "core_import_roots",
    "ejected_import_roots",
    "ejected_source",
    "plugin_settings",
    "prefer_ejected_copy",
    "resolve_state_dir",
]

log = logging.getLogger("agentplug.plugins")

_SOURCE_LABELS = ("source", "repository", "source code", "code", "git")
_GIT_URL = re.compile(r"^(git\+\w+://|git://|ssh://|[\w.-]+@[\w.-]+:)")
_GIT_HOSTS = re.compile(
    r"^https?://(www\.)?(github\.com|gitlab\.com|codeberg\.org|bitbucket\.org)/[^/]+/[^/]+/?$"
)
_T = TypeVar("_T")


class PluginManagerError(AgentplugError):
    """An operation cannot be done; the message says why and what to do."""


# ---------------------------------------------------------------------------
# Records and reports (settings and upstream records live in agentplug.plugins.ejected)


class InspectedDistribution(BaseModel):
    """One downloaded distribution and the decision of its install checks."""

    name: str
    version: str | None = None
    file: str
    requested: bool = False
    """The distribution asked for (``False``: a dependency)."""
    allowed: bool
    blocked_by: str | None = None
    reason: str | None = None
    findings: list[dict[str, Any]] = Field(default_factory=list)


class InstallReport(BaseModel):
    """What :meth:`PluginManager.install` did."""

    installed: bool
    name: str | None = None
    version: str | None = None
    file: str | None = None
    blocked_by: str | None = None
    reason: str | None = None
    findings: list[dict[str, Any]] = Field(default_factory=list)
    restart_required: bool = False
    blocked_distribution: str | None = None
    """Name of the distribution whose check blocked the install (the requested package or
    one of its dependencies)."""
    inspected: list[InspectedDistribution] = Field(default_factory=list)
    """Every distribution to be installed, checked in order (the requested package first,
    then its dependencies by name); a blocked install stops at the blocked one."""


class EjectReport(BaseModel):
    """What :meth:`PluginManager.eject` (or ``eject_core``) did."""

    plugin_id: str
    distribution: str
    version: str | None
    path: str
    branch: str
    source_kind: str
    url: str | None = None
    commit: str | None = None
    restart_required: bool = True


class SyncReport(BaseModel):
    """What :meth:`PluginManager.sync` did: commits merged, or the conflicting files."""

    plugin_id: str
    path: str
    merged: bool
    upstream_commits: int = 0
    """Upstream commits merged into the local branch (0: already up to date)."""
    conflicts: list[str] = Field(default_factory=list)
    committed_local_changes: bool = False
    """Uncommitted local edits were committed on the local branch before merging."""
    upstream_commit: str | None = None
    head: str | None = None
    message: str = ""


class ReinjectReport(BaseModel):
    """What :meth:`PluginManager.reinject` did."""

    plugin_id: str
    path: str
    removed: bool
    restart_required: bool = True


class EjectedPlugin(BaseModel):
    """One ejected working copy."""

    name: str
    branch: str | None
    path: str
    distribution: str | None = None
    version: str | None = None
    source_kind: str | None = None
    url: str | None = None
    head: str | None = None
    dirty: bool = False


class CoreStatus(BaseModel):
    """Where agentplug itself runs from."""

    distribution: str
    running_from: Literal["installed", "ejected"]
    version: str | None = None
    commit: str | None = None
    location: str | None = None
    """Folder of the imported package."""
    installed_version: str | None = None
    installed_commit: str | None = None
    ejected_path: str | None = None
    ejected_commit: str | None = None
    ejected_branch: str | None = None
    restart_required: bool = False
    """An ejected source exists but the running code is the installed package (or vice
    versa): restart the agent to switch."""


# ---------------------------------------------------------------------------
# Locating ejected sources (used by the loader)


def core_import_roots(state_dir: str | Path, distribution: str = CORE_DISTRIBUTION) -> list[Path]:
    """Import roots of an ejected agentplug core (``[]`` when not ejected)."""
    return _roots_of(_core_root(Path(state_dir)) / canonicalize_name(distribution))


def source_fingerprint(folder: Path) -> str:
    """A cheap fingerprint of a source tree (paths, sizes, mtimes; ``.git`` excluded)."""
    digest = hashlib.sha256()
    if not folder.is_dir():
        return ""
    for root, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if d not in (".git", "__pycache__"))
        for name in sorted(files):
            path = Path(root) / name
            try:
                st = path.stat()
            except OSError:
                continue
            rel = path.relative_to(folder).as_posix()
            digest.update(f"{rel}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return digest.hexdigest()


# ---------------------------------------------------------------------------
# Subprocess helpers


_GIT_IDENTITY: list[str] | None = None


def _git_identity() -> list[str]:
    """``-c user.name/-c user.email`` when git has no identity configured (CI, containers)."""
    global _GIT_IDENTITY
    if _GIT_IDENTITY is None:
        probe = subprocess.run(
            ["git", "config", "user.email"], capture_output=True, text=True, check=False
        )
        has_identity = probe.returncode == 0 and probe.stdout.strip()
        _GIT_IDENTITY = (
            []
            if has_identity
            else ["-c", "user.name=agentplug", "-c", "user.email=agentplug@localhost"]
        )
    return _GIT_IDENTITY


class _Runner:
    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s

    def run(
        self,
        cmd: Sequence[str],
        cwd: Path | None = None,
        env: Mapping[str, str] | None = None,
        check: bool = True,
    ) -> subprocess.CompletedProcess[str]:
        full_env = {
            **os.environ,
            "GIT_TERMINAL_PROMPT": "0",
            "PIP_DISABLE_PIP_VERSION_CHECK": "1",
            "PIP_NO_INPUT": "1",
            "LC_ALL": "C",
            **(env or {}),
        }
        try:
            done = subprocess.run(
                list(cmd),
                cwd=cwd,
                env=full_env,
                capture_output=True,
                text=True,
                timeout=self.timeout_s,
                check=False,
            )
        except FileNotFoundError:
            raise PluginManagerError(f"{cmd[0]!r} is not installed or not on PATH") from None
        except subprocess.TimeoutExpired:
            raise PluginManagerError(
                f"{_show(cmd)} did not finish within {self.timeout_s:g}s "
                "(actions.plugins.timeout_s)"
            ) from None
        if check and done.returncode != 0:
            detail = (done.stderr or done.stdout).strip().splitlines()
            tail = " | ".join(detail[-4:]) if detail else f"exit code {done.returncode}"
            raise PluginManagerError(f"{_show(cmd)} failed: {tail}")
        return done

    def git(
        self, cwd: Path, *args: str, check: bool = True, env: Mapping[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        return self.run(["git", *_git_identity(), *args], cwd=cwd, env=env, check=check)


def _show(cmd: Sequence[str]) -> str:
    shown = [Path(c).name if i == 0 else c for i, c in enumerate(cmd)]
    parts = [p for p in shown if not p.startswith("user.")]
    return " ".join(p for p in parts if p != "-c")[:200]


class _FileLock:
    """Exclusive ``flock`` on a file (no-op where ``fcntl`` is unavailable)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fh: Any = None

    def acquire(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fh = open(self.path, "a+")  # noqa: SIM115 - held until release()
        try:
            import fcntl

            fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        except ImportError:  # pragma: no cover - Windows
            pass
        self._fh = fh

    def release(self) -> None:
        fh, self._fh = self._fh, None
        if fh is not None:
            with contextlib.suppress(Exception):
                import fcntl

                fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
            fh.close()


# ---------------------------------------------------------------------------
# Distributions


@dataclass(frozen=True)
class _Dist:
    name: str
    version: str | None
    dist: Any  # importlib_metadata.Distribution
    entry_module: str | None = None

    def text(self, name: str) -> str | None:
        value = self.dist.read_text(name)
        return value if isinstance(value, str) else None

    def top_level(self) -> list[str]:
        names: list[str] = []
        listed = self.text("top_level.txt")
        if listed:
            names = [n.strip() for n in listed.splitlines() if n.strip()]
        if not names:
            for file in self.dist.files or []:
                parts = Path(str(file)).parts
                if not parts or parts[0] in ("..", "__pycache__"):
                    continue
                first = parts[0]
                if first.endswith((".dist-info", ".egg-info", ".pth", ".data")):
                    continue
                name = first[:-3] if first.endswith(".py") else first
                if len(parts) > 1 or first.endswith(".py"):
                    names.append(name)
        if not names and self.entry_module:
            names = [self.entry_module.split(".")[0]]
        return sorted(dict.fromkeys(n for n in names if n.isidentifier()))


@dataclass(frozen=True)
class _Source:
    kind: Literal["git", "sdist"]
    url: str | None = None
    commit: str | None = None
    ref: str | None = None
    subdirectory: str | None = None
    guessed: bool = False
    """From ``Project-URL`` metadata: fall back to the sdist when it cannot be cloned."""


def _path_from_url(url: str) -> Path | None:
    if url.startswith("file://"):
        return Path(unquote(urlparse(url).path))
    if url.startswith("/") or re.match(r"^[A-Za-z]:[\\/]", url):
        return Path(url)
    return None


def _looks_like_git(url: str) -> bool:
    """A URL git can clone: ``git+...``, ``git://``, ``ssh://``, ``user@host:path``, a
    ``.git`` URL, or a repository page on a well-known forge."""
    return bool(
        _GIT_URL.match(url)
        or (url.startswith(("http://", "https://")) and url.rstrip("/").endswith(".git"))
        or _GIT_HOSTS.match(url)
    )


def _is_git_worktree(path: Path) -> bool:
    return (path / ".git").exists()


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
        self._runner = _Runner(self.settings.timeout_s)
        self._locks: dict[str, asyncio.Lock] = {}

    # -- paths ------------------------------------------------------------------------

    @property
    def plugins_dir(self) -> Path:
        """``<state_dir>/plugins``: one ejected working copy per plugin id."""
        return _plugins_root(self.state_dir)

    @property
    def core_dir(self) -> Path:
        """``<state_dir>/core/<distribution>``: the ejected agentplug core."""
        return _core_root(self.state_dir) / canonicalize_name(self.core_distribution)

    def ejected_path(self, plugin_id: str) -> Path:
        """Where ``plugin_id`` is (or would be) ejected."""
        return self.plugins_dir / self._check_id(plugin_id)

    def _search_path(self) -> list[str]:
        if self.settings.target:
            return [str(Path(self.settings.target).resolve()), *sys.path]
        return list(sys.path)

    @staticmethod
    def _check_id(plugin_id: str) -> str:
        if not isinstance(plugin_id, str) or not _ID.match(plugin_id):
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

    # -- distributions ----------------------------------------------------------------

    def find_plugin(self, plugin_id: str) -> _Dist | None:
        """The installed distribution providing plugin ``plugin_id`` (entry point of group
        ``agentplug``), or the distribution called ``plugin_id``; ``None`` if neither.

        An installer's ``.dist-info`` wins over a build's ``.egg-info`` left in a source
        folder that is also on ``sys.path``."""
        from agentplug.core.loader import ENTRY_POINT_GROUP

        wanted = canonicalize_name(plugin_id)
        by_entry: list[_Dist] = []
        by_name: list[_Dist] = []
        for dist in importlib_metadata.distributions(path=self._search_path()):
            name = dist.metadata["Name"] if dist.metadata else None
            if not name:
                continue
            for ep in dist.entry_points:
                if ep.group == ENTRY_POINT_GROUP and ep.name == plugin_id:
                    by_entry.append(_Dist(name, dist.version, dist, ep.value.split(":")[0]))
                    break
            else:
                if canonicalize_name(name) == wanted:
                    by_name.append(_Dist(name, dist.version, dist))
        for group in (by_entry, by_name):
            installed = [d for d in group if d.text("INSTALLER") or d.text("direct_url.json")]
            if installed or group:
                return (installed or group)[0]
        return None

    def _find_distribution(self, name: str) -> _Dist | None:
        """The installed distribution ``name``; an installer's ``.dist-info`` wins over a
        build's ``.egg-info`` left in a source folder that is also on ``sys.path``."""
        wanted = canonicalize_name(name)
        matches: list[_Dist] = []
        for dist in importlib_metadata.distributions(path=self._search_path()):
            dname = dist.metadata["Name"] if dist.metadata else None
            if dname and canonicalize_name(dname) == wanted:
                matches.append(_Dist(dname, dist.version, dist))
        installed = [m for m in matches if m.text("INSTALLER") or m.text("direct_url.json")]
        chosen = installed or matches
        return chosen[0] if chosen else None

    def _installed_plugin_ids(self) -> list[str]:
        from agentplug.core.loader import ENTRY_POINT_GROUP

        return sorted(
            {
                ep.name
                for dist in importlib_metadata.distributions(path=self._search_path())
                for ep in dist.entry_points
                if ep.group == ENTRY_POINT_GROUP
            }
        )

    def _unknown(self, plugin_id: str) -> PluginManagerError:
        known = self._installed_plugin_ids()
        listing = ", ".join(known[:20]) if known else "none"
        return PluginManagerError(
            f"no installed plugin {plugin_id!r} (installed plugin ids: {listing}); "
            "install it first (INSTALL_PLUGIN / `agentplug plugin install`)"
        )

    # -- install ----------------------------------------------------------------------

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
        self._install_host()  # fail closed before downloading anything
        wanted = canonicalize_name(requirement.name)
        async with self._serialized(f"dist-{wanted}"):
            work = Path(tempfile.mkdtemp(prefix="agentplug-install-"))
            try:
                downloads = work / "downloads"
                downloads.mkdir()
                files = await asyncio.to_thread(self._download_all, str(requirement), downloads)
                prepared = _prepared(files, wanted, str(requirement))
                root = prepared[0]
                if not self.settings.target and len(prepared) > 1:
                    # Installing into the environment: only what pip would add there
                    # (dependencies already satisfied stay as they are).
                    needed = await asyncio.to_thread(self._needed, work, root.path)
                    prepared = [root, *(p for p in prepared[1:] if p.key in needed)]
                inspected: list[InspectedDistribution] = []
                findings: list[dict[str, Any]] = []
                for item in prepared:
                    decision = await self._check(
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
                    self._pip_install, downloads, [item.path for item in prepared]
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

    def _pip(self) -> list[str]:
        return [self.settings.python or sys.executable, "-m", "pip"]

    def _download(self, spec: str, dest: Path, *, sdist: bool = False) -> Path:
        cmd = [*self._pip(), "download", "--no-deps", "--quiet", "-d", str(dest)]
        if sdist:
            cmd += ["--no-binary", ":all:"]
        if not self.settings.build_isolation:
            cmd.append("--no-build-isolation")
        cmd += [*self.settings.pip_index_args(), spec]
        self._runner.run(cmd)
        found = sorted(p for p in dest.iterdir() if p.is_file())
        if len(found) != 1:
            raise PluginManagerError(
                f"pip download {spec} produced {len(found)} files, expected exactly one"
            )
        return found[0]

    def _download_all(self, spec: str, dest: Path) -> list[Path]:
        """``pip download`` ``spec`` (and, per ``install_dependencies``, its dependencies)."""
        cmd = [*self._pip(), "download", "--quiet", "-d", str(dest)]
        if not self.settings.install_dependencies:
            cmd.append("--no-deps")
        if not self.settings.build_isolation:
            cmd.append("--no-build-isolation")
        cmd += [*self.settings.pip_index_args(), spec]
        self._runner.run(cmd)
        found = sorted(p for p in dest.iterdir() if p.is_file())
        if not found:
            raise PluginManagerError(f"pip download {spec} produced no files")
        return found

    def _offline(self, folder: Path) -> list[str]:
        """pip options that see only ``folder`` (no index, no configured find-links)."""
        return [
            "--isolated",
            "--disable-pip-version-check",
            "--no-input",
            "--no-index",
            "--find-links",
            str(folder),
        ]

    def _needed(self, work: Path, root: Path) -> set[tuple[str, str | None]]:
        """(name, version) of the downloaded distributions pip would install into the
        environment for ``root``: a dry run that can see only the download folder."""
        report = work / "resolution.json"
        cmd = [*self._pip(), "install", "--dry-run", "--quiet", "--report", str(report)]
        cmd += self._offline(root.parent)
        if not self.settings.build_isolation:
            cmd.append("--no-build-isolation")
        self._runner.run([*cmd, str(root)])
        try:
            items = json.loads(report.read_text("utf-8")).get("install") or []
            needed: set[tuple[str, str | None]] = set()
            for item in items:
                url = str(item["download_info"]["url"])
                where = _path_from_url(url)
                if where is None or where.resolve().parent != root.parent.resolve():
                    raise PluginManagerError(f"pip would install {url}, which was not downloaded")
                meta = item["metadata"]
                needed.add((canonicalize_name(meta["name"]), _norm_version(meta["version"])))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise PluginManagerError(f"cannot read pip's install plan: {exc}") from None
        return needed

    def _install_host(self) -> PluginHost:
        if self.host is None:  # fail closed: no host, no install checks, no install
            raise PluginManagerError(
                "installing needs a host: the install policy and before_install plugins "
                "must check the package first (PluginManager(host, ...))"
            )
        return self.host

    async def _check(
        self, item: _Prepared, requested_by: str | None, dependency_of: str | None
    ) -> InstallDecision:
        from agentplug.services.install import check_install

        host = self._install_host()
        source = self.settings.source_label
        event = {
            "kind": "plugin",
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

    def _pip_install(self, folder: Path, files: Sequence[Path]) -> None:
        """Install exactly ``files`` (all inspected) from ``folder``: no index, no other
        find-links, no dependency resolution."""
        cmd = [*self._pip(), "install", "--quiet", "--no-deps", *self._offline(folder)]
        if not self.settings.build_isolation:
            cmd.append("--no-build-isolation")
        if self.settings.target:
            Path(self.settings.target).mkdir(parents=True, exist_ok=True)
            cmd += ["--upgrade", "--target", self.settings.target]
        try:
            self._runner.run([*cmd, *(str(f) for f in files)])
        except PluginManagerError as exc:
            if self.settings.build_isolation and any(not f.name.endswith(".whl") for f in files):
                raise PluginManagerError(
                    f"{exc} (source distributions are built offline: put their build "
                    "requirements in actions.plugins.find_links, or set "
                    "actions.plugins.build_isolation to false)"
                ) from None
            raise

    # -- eject ------------------------------------------------------------------------

    async def eject(self, plugin_id: str) -> EjectReport:
        """Put ``plugin_id``'s source under ``<state_dir>/plugins/<plugin_id>/`` (git)."""
        self._check_id(plugin_id)
        return await self._locked(f"plugin-{plugin_id}", self._eject_plugin, plugin_id)

    def _eject_plugin(self, plugin_id: str) -> EjectReport:
        final = self.ejected_path(plugin_id)
        if final.exists():
            raise PluginManagerError(
                f"plugin {plugin_id!r} is already ejected at {final}; sync it "
                "(SYNC_PLUGIN) or reinject it first (REINJECT_PLUGIN)"
            )
        found = self.find_plugin(plugin_id)
        if found is None:
            raise self._unknown(plugin_id)
        return self._eject_into(plugin_id, found, final, core=False)

    def _eject_into(self, plugin_id: str, found: _Dist, final: Path, core: bool) -> EjectReport:
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
            source = self._resolve_source(found)
            if source.kind == "git" and source.guessed:
                try:
                    commit = self._clone(source, found, work)
                except PluginManagerError as exc:  # a project page, not a repository
                    log.info("%s is not clonable (%s); using the sdist", source.url, exc)
                    shutil.rmtree(work, ignore_errors=True)
                    source = _Source("sdist")
            elif source.kind == "git":
                commit = self._clone(source, found, work)
            if source.kind == "git":
                url, ref = source.url, source.ref or self._remote_default_branch(work)
            else:
                commit = self._import_sdist(found, temp, work)
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
                import_roots=_import_roots(work, top_level, source.subdirectory),
                core=core,
            )
            self._write_record(work, record)
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

    def _resolve_source(self, found: _Dist) -> _Source:
        raw = found.text("direct_url.json")
        direct: dict[str, Any] = {}
        if raw:
            with contextlib.suppress(ValueError):
                direct = json.loads(raw)
        vcs = direct.get("vcs_info") if isinstance(direct, dict) else None
        if isinstance(vcs, dict) and vcs.get("vcs") == "git" and direct.get("url"):
            url = str(direct["url"])
            url = url[4:] if url.startswith("git+") else url
            return _Source(
                "git",
                url,
                vcs.get("commit_id"),
                vcs.get("requested_revision"),
                direct.get("subdirectory") or None,
            )
        if isinstance(direct, dict) and "dir_info" in direct and direct.get("url"):
            path = _path_from_url(str(direct["url"]))
            if path is not None and path.is_dir():
                top = self._runner.git(path, "rev-parse", "--show-toplevel", check=False)
                if top.returncode == 0 and top.stdout.strip():
                    root = Path(top.stdout.strip()).resolve()
                    sub = path.resolve().relative_to(root).as_posix()
                    return _Source("git", str(root), subdirectory=None if sub == "." else sub)
        for entry in found.dist.metadata.get_all("Project-URL") or []:
            label, _, url = str(entry).partition(",")
            url = url.strip()
            if label.strip().lower() not in _SOURCE_LABELS or not url:
                continue
            path = _path_from_url(url)
            if path is not None:
                if path.is_dir() and _is_git_worktree(path):
                    return _Source("git", str(path))
                continue
            if _looks_like_git(url):
                return _Source("git", url.removeprefix("git+"))
            if url.startswith(("http://", "https://")):
                return _Source("git", url, guessed=True)
        return _Source("sdist")

    def _clone(self, source: _Source, found: _Dist, work: Path) -> str:
        assert source.url is not None
        git = self._runner.git
        git(work.parent, "clone", "--quiet", "--no-checkout", source.url, str(work))
        commit = source.commit
        if commit is None and source.ref is None and found.version:
            for tag in (f"v{found.version}", found.version):
                probe = git(
                    work,
                    "rev-parse",
                    "--verify",
                    "--quiet",
                    f"refs/tags/{tag}^{{commit}}",
                    check=False,
                )
                if probe.returncode == 0 and probe.stdout.strip():
                    commit = probe.stdout.strip()
                    break
        if commit is None:
            target = f"origin/{source.ref}" if source.ref else "HEAD"
            commit = git(work, "rev-parse", f"{target}^{{commit}}").stdout.strip()
        git(work, "checkout", "--quiet", "-B", LOCAL_BRANCH, commit)
        git(work, "branch", "--quiet", "-f", UPSTREAM_BRANCH, commit)
        return commit

    def _remote_default_branch(self, work: Path) -> str | None:
        probe = self._runner.git(
            work, "symbolic-ref", "--quiet", "refs/remotes/origin/HEAD", check=False
        )
        ref = probe.stdout.strip()
        return ref.removeprefix("refs/remotes/origin/") if probe.returncode == 0 and ref else None

    def _import_sdist(self, found: _Dist, temp: Path, work: Path) -> str:
        spec = f"{found.name}=={found.version}" if found.version else found.name
        tree = self._fetch_sdist_tree(spec, temp)
        git = self._runner.git
        work.mkdir()
        git(work, "init", "--quiet", "-b", UPSTREAM_BRANCH)
        shutil.copytree(tree, work, dirs_exist_ok=True, symlinks=True)
        git(work, "add", "-A", "-f", ".")
        message = f"Import {found.name} {found.version} from sdist"
        git(work, "commit", "--quiet", "--no-verify", "-m", message)
        git(work, "checkout", "--quiet", "-b", LOCAL_BRANCH)
        return git(work, "rev-parse", "HEAD").stdout.strip()

    def _fetch_sdist_tree(self, spec: str, temp: Path) -> Path:
        downloads = temp / "sdist"
        downloads.mkdir()
        try:
            archive = self._download(spec, downloads, sdist=True)
        except PluginManagerError as exc:
            raise PluginManagerError(
                f"no git repository is recorded for {spec} and its source distribution "
                f"could not be downloaded ({exc})"
            ) from None
        unpacked = temp / "unpacked"
        _extract(archive, unpacked)
        entries = [p for p in unpacked.iterdir()]
        return entries[0] if len(entries) == 1 and entries[0].is_dir() else unpacked

    # -- sync -------------------------------------------------------------------------

    async def sync(self, plugin_id: str) -> SyncReport:
        """Fetch upstream and merge it into the ejected copy's local branch."""
        self._check_id(plugin_id)
        folder = self.ejected_path(plugin_id)
        return await self._locked(f"plugin-{plugin_id}", self._sync_folder, plugin_id, folder)

    def _require_ejected(self, plugin_id: str, folder: Path) -> UpstreamRecord:
        record = _read_record(folder)
        if not folder.is_dir() or record is None:
            what = "agentplug core" if plugin_id == self.core_distribution else "plugin"
            raise PluginManagerError(
                f"{what} {plugin_id!r} is not ejected (no {folder / RECORD_FILE}); "
                "eject it first (EJECT_PLUGIN / EJECT_CORE)"
            )
        return record

    def _sync_folder(self, plugin_id: str, folder: Path) -> SyncReport:
        record = self._require_ejected(plugin_id, folder)
        git = self._runner.git
        if git(folder, "rev-parse", "-q", "--verify", "MERGE_HEAD", check=False).returncode == 0:
            git(folder, "merge", "--abort", check=False)
        before = git(folder, "rev-parse", record.upstream_branch).stdout.strip()
        if record.source_kind == "git":
            ref = record.ref or "HEAD"
            git(folder, "fetch", "--quiet", "origin", ref)
            fetched = git(folder, "rev-parse", "FETCH_HEAD^{commit}").stdout.strip()
            merge_base = git(folder, "merge-base", "--is-ancestor", before, fetched, check=False)
            if merge_base.returncode == 0:
                git(folder, "update-ref", f"refs/heads/{record.upstream_branch}", fetched)
            else:
                log.warning("%s: upstream history was rewritten; following it", plugin_id)
                git(folder, "update-ref", f"refs/heads/{record.upstream_branch}", fetched)
        else:
            self._sync_sdist(record, folder)
            record = _read_record(folder) or record  # the import records the new version
        upstream = git(folder, "rev-parse", record.upstream_branch).stdout.strip()
        committed = False
        if git(folder, "status", "--porcelain").stdout.strip():
            git(folder, "add", "-A")
            git(folder, "commit", "--quiet", "--no-verify", "-m", "Local changes before sync")
            committed = True
        count = int(
            git(folder, "rev-list", "--count", f"HEAD..{record.upstream_branch}").stdout.strip()
        )
        now = datetime.now(UTC).isoformat()
        if count == 0:
            head = git(folder, "rev-parse", "HEAD").stdout.strip()
            self._write_record(folder, record.model_copy(update={"last_sync": now}))
            return SyncReport(
                plugin_id=plugin_id,
                path=str(folder),
                merged=True,
                upstream_commits=0,
                committed_local_changes=committed,
                upstream_commit=upstream,
                head=head,
                message="already up to date with upstream",
            )
        merge = git(
            folder,
            "merge",
            "--no-edit",
            "--no-verify",
            "-m",
            f"Merge upstream {record.distribution} into {record.branch}",
            record.upstream_branch,
            check=False,
        )
        if merge.returncode != 0:
            conflicts = [
                line
                for line in git(
                    folder, "diff", "--name-only", "--diff-filter=U", check=False
                ).stdout.splitlines()
                if line.strip()
            ]
            git(folder, "merge", "--abort", check=False)
            if git(folder, "status", "--porcelain", check=False).stdout.strip():
                git(folder, "reset", "--hard", "--quiet", "HEAD", check=False)
            head = git(folder, "rev-parse", "HEAD").stdout.strip()
            detail = ", ".join(conflicts) if conflicts else merge.stderr.strip()[-300:]
            return SyncReport(
                plugin_id=plugin_id,
                path=str(folder),
                merged=False,
                upstream_commits=count,
                conflicts=conflicts,
                committed_local_changes=committed,
                upstream_commit=upstream,
                head=head,
                message=(
                    f"merging {count} upstream commit(s) conflicts in: {detail}; the merge "
                    f"was aborted (working copy clean). Resolve by running `git merge "
                    f"{record.upstream_branch}` in {folder}"
                ),
            )
        head = git(folder, "rev-parse", "HEAD").stdout.strip()
        update: dict[str, Any] = {"last_sync": now}
        if record.source_kind == "git":
            update["commit"] = upstream
        self._write_record(folder, record.model_copy(update=update))
        return SyncReport(
            plugin_id=plugin_id,
            path=str(folder),
            merged=True,
            upstream_commits=count,
            committed_local_changes=committed,
            upstream_commit=upstream,
            head=head,
            message=f"merged {count} upstream commit(s)",
        )

    def _sync_sdist(self, record: UpstreamRecord, folder: Path) -> None:
        """Commit the newest sdist onto the upstream branch when it is newer."""
        temp = Path(tempfile.mkdtemp(prefix="agentplug-sync-"))
        try:
            tree = self._fetch_sdist_tree(record.distribution, temp)
            version = _sdist_version(temp / "sdist") or None
            if version and record.version:
                with contextlib.suppress(InvalidVersion):
                    if Version(version) <= Version(record.version):
                        return
            index = temp / "index"
            env = {"GIT_INDEX_FILE": str(index)}
            git_dir = str(folder / ".git")
            git = self._runner.git
            git(
                tree, f"--git-dir={git_dir}", f"--work-tree={tree}", "add", "-A", "-f", ".", env=env
            )
            tree_id = git(tree, f"--git-dir={git_dir}", "write-tree", env=env).stdout.strip()
            parent = git(folder, "rev-parse", record.upstream_branch).stdout.strip()
            if git(folder, "rev-parse", f"{parent}^{{tree}}").stdout.strip() == tree_id:
                return
            message = f"Import {record.distribution} {version} from sdist"
            commit = git(folder, "commit-tree", tree_id, "-p", parent, "-m", message).stdout.strip()
            git(folder, "update-ref", f"refs/heads/{record.upstream_branch}", commit)
            self._write_record(
                folder, record.model_copy(update={"version": version, "commit": commit})
            )
        finally:
            shutil.rmtree(temp, ignore_errors=True)

    # -- reinject ---------------------------------------------------------------------

    async def reinject(self, plugin_id: str) -> ReinjectReport:
        """Remove ``plugin_id``'s ejected copy so the installed package loads again."""
        self._check_id(plugin_id)
        folder = self.ejected_path(plugin_id)
        report = await self._locked(f"plugin-{plugin_id}", self._remove, plugin_id, folder)
        activate_ejected_source(self.state_dir, plugin_id)  # drop it from sys.path
        return report

    def _remove(self, plugin_id: str, folder: Path) -> ReinjectReport:
        self._require_ejected(plugin_id, folder)
        trash = folder.with_name(f".trash-{folder.name}-{os.getpid()}")
        os.rename(folder, trash)  # atomic: the copy stops being used at once
        shutil.rmtree(trash, ignore_errors=True)
        log.info("reinjected %s (removed %s)", plugin_id, folder)
        return ReinjectReport(plugin_id=plugin_id, path=str(folder), removed=True)

    # -- listing ----------------------------------------------------------------------

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
        record = _read_record(folder)
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

    # -- core -------------------------------------------------------------------------

    async def eject_core(self) -> EjectReport:
        """Put agentplug's own source under ``<state_dir>/core/agentplug`` (git)."""
        return await self._locked("core", self._eject_core)

    def _eject_core(self) -> EjectReport:
        final = self.core_dir
        if final.exists():
            raise PluginManagerError(
                f"{self.core_distribution} is already ejected at {final}; sync it "
                "(SYNC_CORE) or reinject it first (REINJECT_CORE)"
            )
        found = self._find_distribution(self.core_distribution)
        if found is None:
            raise PluginManagerError(f"distribution {self.core_distribution!r} is not installed")
        return self._eject_into(canonicalize_name(self.core_distribution), found, final, True)

    async def sync_core(self) -> SyncReport:
        """Fetch and merge upstream into the ejected core."""
        name = canonicalize_name(self.core_distribution)
        return await self._locked("core", self._sync_folder, name, self.core_dir)

    async def reinject_core(self) -> ReinjectReport:
        """Remove the ejected core so the installed package runs again."""
        name = canonicalize_name(self.core_distribution)
        return await self._locked("core", self._remove, name, self.core_dir)

    def core_status(self) -> CoreStatus:
        """Whether agentplug runs from the installed package or an ejected source."""
        found = self._find_distribution(self.core_distribution)
        module = sys.modules.get(self.core_module)
        location: Path | None = None
        if module is not None and getattr(module, "__file__", None):
            location = Path(str(module.__file__)).resolve().parent
        elif (spec := importlib.util.find_spec(self.core_module)) is not None and spec.origin:
            location = Path(spec.origin).resolve().parent
        installed_commit = self._installed_commit(found) if found else None
        folder = self.core_dir
        record = _read_record(folder) if folder.is_dir() else None
        ejected = None if record is None else self._describe(folder.name, folder)
        running_ejected = bool(
            record is not None and location is not None and location.is_relative_to(folder)
        )
        if running_ejected:
            assert ejected is not None and record is not None
            version: str | None = record.version
            commit = ejected.head
        else:
            version = found.version if found else None
            commit = installed_commit
        return CoreStatus(
            distribution=found.name if found else self.core_distribution,
            running_from="ejected" if running_ejected else "installed",
            version=version,
            commit=commit,
            location=str(location) if location else None,
            installed_version=found.version if found else None,
            installed_commit=installed_commit,
            ejected_path=str(folder) if record is not None else None,
            ejected_commit=ejected.head if ejected else None,
            ejected_branch=ejected.branch if ejected else None,
            restart_required=(record is not None) != running_ejected,
        )

    def _installed_commit(self, found: _Dist) -> str | None:
        source = self._resolve_source(found)
        if source.commit:
            return source.commit
        path = _path_from_url(source.url) if source.kind == "git" and source.url else None
        if path is not None and path.is_dir():
            probe = self._runner.git(path, "rev-parse", "HEAD", check=False)
            return probe.stdout.strip() or None
        return None


# ---------------------------------------------------------------------------
# Archives


@dataclass(frozen=True)
class _Prepared:
    """One downloaded distribution, ready for the install checks."""

    path: Path
    name: str
    version: str | None
    files: list[str]

    @property
    def key(self) -> tuple[str, str | None]:
        return canonicalize_name(self.name), _norm_version(self.version)


def _norm_version(version: str | None) -> str | None:
    if version is None:
        return None
    try:
        return str(Version(version))
    except InvalidVersion:
        return version


def _prepared(files: Sequence[Path], wanted: str, spec: str) -> list[_Prepared]:
    """The downloaded distributions, the requested one first, then by name. Fails when
    the requested one is missing or a name comes twice (fail closed)."""
    items = [_Prepared(path, *_inspect_archive(path)) for path in files]
    names = [canonicalize_name(item.name) for item in items]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise PluginManagerError(
            f"pip download {spec} produced several files for {', '.join(twice)}"
        )
    root = [item for item in items if canonicalize_name(item.name) == wanted]
    if not root:
        raise PluginManagerError(f"pip download {spec} did not produce {wanted}")
    rest = sorted((i for i in items if i is not root[0]), key=lambda i: i.key[0])
    return [root[0], *rest]


def _inspect_archive(path: Path) -> tuple[str, str | None, list[str]]:
    """Name, version and member list of a downloaded wheel or sdist."""
    name: str
    version: str | None
    try:
        if path.name.endswith(".whl"):
            dist, parsed, _, _ = parse_wheel_filename(path.name)
            name, version = str(dist), str(parsed)
            with zipfile.ZipFile(path) as zf:
                files = zf.namelist()
        else:
            dist, parsed = parse_sdist_filename(path.name)
            name, version = str(dist), str(parsed)
            files = _archive_members(path)
    except (InvalidWheelFilename, InvalidSdistFilename, zipfile.BadZipFile, tarfile.TarError) as e:
        raise PluginManagerError(
            f"downloaded file {path.name} is not a usable package: {e}"
        ) from None
    return name, version, files


def _archive_members(path: Path) -> list[str]:
    if path.name.endswith(".zip"):
        with zipfile.ZipFile(path) as zf:
            return zf.namelist()
    with tarfile.open(path) as tf:
        return tf.getnames()


def _sdist_version(folder: Path) -> str | None:
    for file in folder.iterdir() if folder.is_dir() else []:
        with contextlib.suppress(InvalidSdistFilename):
            return str(parse_sdist_filename(file.name)[1])
    return None


def _extract(archive: Path, dest: Path) -> None:
    dest.mkdir(parents=True)
    if archive.name.endswith(".zip"):
        with zipfile.ZipFile(archive) as zf:
            for member in zf.namelist():
                target = (dest / member).resolve()
                if not target.is_relative_to(dest.resolve()):
                    raise PluginManagerError(f"{archive.name}: unsafe path {member!r}")
            zf.extractall(dest)
        return
    with tarfile.open(archive) as tf:
        try:
            tf.extractall(dest, filter="data")
        except tarfile.FilterError as exc:
            raise PluginManagerError(f"{archive.name}: unsafe archive member ({exc})") from None


def _import_roots(
    tree: Path, top_level: Sequence[str], subdirectory: str | None = None
) -> list[str]:
    """Folders of ``tree`` (relative) holding the distribution's top-level modules."""
    base = tree
    if subdirectory:
        base = (tree / subdirectory).resolve()
        if not base.is_relative_to(tree.resolve()) or not base.is_dir():
            base = tree
        tree = tree.resolve()
    candidates = [base, base / "src"]
    with contextlib.suppress(OSError):
        candidates += sorted(
            d
            for d in base.iterdir()
            if d.is_dir() and not d.name.startswith((".", "_")) and d.name not in ("src",)
        )
    roots: list[str] = []
    for name in top_level:
        for folder in candidates:
            package = folder / name
            if (
                (package / "__init__.py").is_file()
                or (folder / f"{name}.py").is_file()
                or (package.is_dir() and any(package.glob("*.py")))
            ):
                rel = folder.relative_to(tree).as_posix() or "."
                if rel not in roots:
                    roots.append(rel)
                break
    return roots or ["."]


# ---------------------------------------------------------------------------
# Command line


def _cli_manager(args: argparse.Namespace, with_host: bool) -> PluginManager:
    from agentplug.core.config import AgentplugConfig, load_config
    from agentplug.core.host import PluginHost

    path = getattr(args, "config", None) or os.environ.get("AGENTPLUG_CONFIG")
    config = load_config(path) if path else AgentplugConfig()
    actions = dict(config.actions)
    overrides = {
        key: getattr(args, key)
        for key in ("index_url", "find_links", "no_index", "target")
        if getattr(args, key, None)
    }
    settings = plugin_settings({"plugins": {**dict(actions.get("plugins") or {}), **overrides}})
    state_dir = args.state_dir or os.environ.get(STATE_DIR_ENV) or DEFAULT_STATE_DIR
    host: PluginHost | None = None
    if with_host:
        host = PluginHost(config)
        host.load_installed()  # before_install handlers of installed plugins take part
    return PluginManager(host, state_dir, settings=settings)


def _emit(args: argparse.Namespace, payload: Any, text: str) -> None:
    if args.json:
        print(json.dumps(payload, indent=2, default=str))
    else:
        print(text)


def _cmd_plugin(args: argparse.Namespace) -> int:
    op: str = args.plugin_command
    manager = _cli_manager(args, with_host=op == "install")
    try:
        if op == "install":
            install = asyncio.run(manager.install(args.spec, requested_by="cli"))
            text = (
                f"installed {install.name} {install.version}; restart the agent to load it"
                if install.installed
                else f"install of {install.name} {install.version} blocked by "
                f"{install.blocked_by}: {install.reason}"
            )
            _emit(args, install.model_dump(mode="json"), text)
            return 0 if install.installed else 1
        if op in ("eject", "eject-core"):
            eject = asyncio.run(
                manager.eject(args.plugin_id) if op == "eject" else manager.eject_core()
            )
            text = (
                f"ejected {eject.plugin_id} ({eject.distribution} {eject.version}, from "
                f"{eject.source_kind}) to {eject.path} on branch {eject.branch}; "
                "restart the agent to use it"
            )
            _emit(args, eject.model_dump(mode="json"), text)
            return 0
        if op in ("sync", "sync-core"):
            sync = asyncio.run(
                manager.sync(args.plugin_id) if op == "sync" else manager.sync_core()
            )
            _emit(args, sync.model_dump(mode="json"), f"{sync.plugin_id}: {sync.message}")
            return 0 if sync.merged else 1
        if op in ("reinject", "reinject-core"):
            reinject = asyncio.run(
                manager.reinject(args.plugin_id) if op == "reinject" else manager.reinject_core()
            )
            text = f"removed {reinject.path}; restart the agent to load the installed package"
            _emit(args, reinject.model_dump(mode="json"), text)
            return 0
        if op == "ejected":
            rows = manager.ejected()
            lines = [f"{r.name}  [{r.branch}]  {r.path}" for r in rows] or ["no ejected plugins"]
            _emit(args, [r.model_dump(mode="json") for r in rows], "\n".join(lines))
            return 0
        status = manager.core_status()
        text = (
            f"{status.distribution} {status.version or '?'} runs from the {status.running_from} "
            f"{'source' if status.running_from == 'ejected' else 'package'} at "
            f"{status.location} (commit {status.commit or 'unknown'})"
        )
        if status.restart_required:
            text += "; restart the agent to switch to the other copy"
        _emit(args, status.model_dump(mode="json"), text)
        return 0
    except PluginManagerError as exc:
        if args.json:
            print(json.dumps({"error": str(exc)}))
        else:
            print(f"agentplug plugin {op}: {exc}", file=sys.stderr)
        return 1


def add_plugin_management_commands(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``agentplug plugin install|eject|sync|reinject|ejected|core-status|...``."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--state-dir",
        default=None,
        help=f"state folder (default: ${STATE_DIR_ENV} or {DEFAULT_STATE_DIR})",
    )
    common.add_argument("--json", action="store_true", help="machine-readable output")
    common.add_argument("--config", help="operator config file (default: $AGENTPLUG_CONFIG)")
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "plugin", help="install, eject, sync and reinject plugins (and agentplug itself)"
    )
    sub = parser.add_subparsers(dest="plugin_command", required=True)
    p = sub.add_parser(
        "install", parents=[common], help="download, check (install policy), install"
    )
    p.add_argument("spec", help="requirement such as my-plugin or my-plugin==1.2")
    p.add_argument("--index-url", dest="index_url")
    p.add_argument("--find-links", dest="find_links", action="append")
    p.add_argument("--no-index", dest="no_index", action="store_true")
    p.add_argument("--target", help="install into this folder (pip --target)")
    for name, help_text in (
        ("eject", "put a plugin's source under <state-dir>/plugins/<id> (git)"),
        ("sync", "fetch and merge upstream into an ejected plugin"),
        ("reinject", "remove an ejected plugin so the installed package loads"),
    ):
        p = sub.add_parser(name, parents=[common], help=help_text)
        p.add_argument("plugin_id")
        if name != "reinject":
            p.add_argument("--index-url", dest="index_url")
            p.add_argument("--find-links", dest="find_links", action="append")
            p.add_argument("--no-index", dest="no_index", action="store_true")
    sub.add_parser("ejected", parents=[common], help="list ejected plugins")
    for name, help_text in (
        ("eject-core", "put agentplug's own source under <state-dir>/core (git)"),
        ("sync-core", "fetch and merge upstream into the ejected core"),
        ("reinject-core", "remove the ejected core"),
        ("core-status", "installed package or ejected source, version, commit"),
    ):
        sub.add_parser(name, parents=[common], help=help_text)
    parser.set_defaults(func=_cmd_plugin)
    return parser
