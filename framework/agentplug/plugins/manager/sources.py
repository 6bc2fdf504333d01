"""Where an installed distribution's source comes from (git repository, local path or
sdist) and fetching it: cloning, importing an sdist into git, downloading one sdist."""

from __future__ import annotations

import contextlib
import json
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from agentplug.plugins.ejected import LOCAL_BRANCH, UPSTREAM_BRANCH
from agentplug.plugins.manager.archives import extract_archive
from agentplug.plugins.manager.distributions import InstalledDistribution
from agentplug.plugins.manager.locating import path_from_url
from agentplug.plugins.manager.pip_commands import PipCommands
from agentplug.plugins.manager.reports import PluginManagerError
from agentplug.plugins.manager.runner import CommandRunner

__all__ = ["SourceFetcher", "UpstreamSource"]

_SOURCE_LABELS = ("source", "repository", "source code", "code", "git")
_GIT_URL = re.compile(r"^(git\+\w+://|git://|ssh://|[\w.-]+@[\w.-]+:)")
_GIT_HOSTS = re.compile(
    r"^https?://(www\.)?(github\.com|gitlab\.com|codeberg\.org|bitbucket\.org)/[^/]+/[^/]+/?$"
)


@dataclass(frozen=True)
class UpstreamSource:
    """Where a distribution's source comes from: a git repository or its sdist."""

    kind: Literal["git", "sdist"]
    url: str | None = None
    commit: str | None = None
    ref: str | None = None
    subdirectory: str | None = None
    guessed: bool = False
    """From ``Project-URL`` metadata: fall back to the sdist when it cannot be cloned."""


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


class SourceFetcher:
    """Resolves where an installed distribution's upstream source is, and fetches it:
    cloning the repository, or importing the sdist into a new git repository."""

    def __init__(self, runner: CommandRunner, pip: PipCommands) -> None:
        self._runner = runner
        self._pip = pip

    def resolve(self, found: InstalledDistribution) -> UpstreamSource:
        """The upstream of ``found``: the git repository ``direct_url.json`` records, the
        git work tree it was installed from, a ``Project-URL`` naming a repository, else
        its sdist."""
        raw = found.text("direct_url.json")
        direct: dict[str, Any] = {}
        if raw:
            with contextlib.suppress(ValueError):
                direct = json.loads(raw)
        vcs = direct.get("vcs_info") if isinstance(direct, dict) else None
        if isinstance(vcs, dict) and vcs.get("vcs") == "git" and direct.get("url"):
            url = str(direct["url"])
            url = url[4:] if url.startswith("git+") else url
            return UpstreamSource(
                "git",
                url,
                vcs.get("commit_id"),
                vcs.get("requested_revision"),
                direct.get("subdirectory") or None,
            )
        if isinstance(direct, dict) and "dir_info" in direct and direct.get("url"):
            path = path_from_url(str(direct["url"]))
            if path is not None and path.is_dir():
                top = self._runner.git(path, "rev-parse", "--show-toplevel", check=False)
                if top.returncode == 0 and top.stdout.strip():
                    root = Path(top.stdout.strip()).resolve()
                    sub = path.resolve().relative_to(root).as_posix()
                    return UpstreamSource(
                        "git", str(root), subdirectory=None if sub == "." else sub
                    )
        for entry in found.dist.metadata.get_all("Project-URL") or []:
            label, _, url = str(entry).partition(",")
            url = url.strip()
            if label.strip().lower() not in _SOURCE_LABELS or not url:
                continue
            path = path_from_url(url)
            if path is not None:
                if path.is_dir() and _is_git_worktree(path):
                    return UpstreamSource("git", str(path))
                continue
            if _looks_like_git(url):
                return UpstreamSource("git", url.removeprefix("git+"))
            if url.startswith(("http://", "https://")):
                return UpstreamSource("git", url, guessed=True)
        return UpstreamSource("sdist")

    def clone(self, source: UpstreamSource, found: InstalledDistribution, work: Path) -> str:
        """Clone ``source`` into ``work`` with the ``main`` and ``upstream`` branches at
        the installed commit (the recorded one, else the version's tag, else the ref's
        head); returns that commit."""
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

    def remote_default_branch(self, work: Path) -> str | None:
        """The branch ``origin/HEAD`` of the clone ``work`` points at (``None``: unknown)."""
        probe = self._runner.git(
            work, "symbolic-ref", "--quiet", "refs/remotes/origin/HEAD", check=False
        )
        ref = probe.stdout.strip()
        return ref.removeprefix("refs/remotes/origin/") if probe.returncode == 0 and ref else None

    def import_sdist(self, found: InstalledDistribution, temp: Path, work: Path) -> str:
        """Download ``found``'s sdist (into ``temp``) and commit it into a new repository
        ``work`` (branch ``upstream``, then ``main``); returns the commit."""
        spec = f"{found.name}=={found.version}" if found.version else found.name
        tree = self.fetch_sdist_tree(spec, temp)
        git = self._runner.git
        work.mkdir()
        git(work, "init", "--quiet", "-b", UPSTREAM_BRANCH)
        shutil.copytree(tree, work, dirs_exist_ok=True, symlinks=True)
        git(work, "add", "-A", "-f", ".")
        message = f"Import {found.name} {found.version} from sdist"
        git(work, "commit", "--quiet", "--no-verify", "-m", message)
        git(work, "checkout", "--quiet", "-b", LOCAL_BRANCH)
        return git(work, "rev-parse", "HEAD").stdout.strip()

    def fetch_sdist_tree(self, spec: str, temp: Path) -> Path:
        """Download the sdist of ``spec`` into ``temp/sdist`` and unpack it; returns the
        source tree (its single top folder, when it has one)."""
        downloads = temp / "sdist"
        downloads.mkdir()
        try:
            archive = self._pip.download_one(spec, downloads, sdist=True)
        except PluginManagerError as exc:
            raise PluginManagerError(
                f"no git repository is recorded for {spec} and its source distribution "
                f"could not be downloaded ({exc})"
            ) from None
        unpacked = temp / "unpacked"
        extract_archive(archive, unpacked)
        entries = [p for p in unpacked.iterdir()]
        return entries[0] if len(entries) == 1 and entries[0].is_dir() else unpacked
