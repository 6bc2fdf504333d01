"""Sync: fetch upstream (git or the newest sdist) and merge it into the ejected copy."""

from __future__ import annotations

import contextlib
import logging
import shutil
import tarfile
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version

from agentplug.plugins.ejected import UpstreamRecord, read_record
from agentplug.plugins.manager.archives import sdist_version
from agentplug.plugins.manager.checks import TreeCheck
from agentplug.plugins.manager.reports import SyncReport
from agentplug.plugins.manager.runner import CommandRunner
from agentplug.plugins.manager.sources import SourceFetcher
from agentplug.plugins.manager.working_copies import WorkingCopies, write_record

__all__ = ["Syncer"]

log = logging.getLogger("agentplug.plugins")


class Syncer:
    """Syncs a working copy with its upstream: fetches it (git, or the newest sdist
    committed onto the upstream branch), checks it, then merges it into the local branch
    (a conflict aborts the merge and is reported)."""

    def __init__(
        self,
        runner: CommandRunner,
        copies: WorkingCopies,
        sources: SourceFetcher,
        source_label: str,
    ) -> None:
        self._runner = runner
        self._copies = copies
        self._sources = sources
        self._source_label = source_label

    def sync_folder(self, plugin_id: str, folder: Path, check: TreeCheck) -> SyncReport:
        """Sync the working copy ``folder`` of ``plugin_id`` (run under its lock, in a
        thread)."""
        record = self._copies.require(plugin_id, folder)
        git = self._runner.git
        if git(folder, "rev-parse", "-q", "--verify", "MERGE_HEAD", check=False).returncode == 0:
            git(folder, "merge", "--abort", check=False)
        before = git(folder, "rev-parse", record.upstream_branch).stdout.strip()
        if record.source_kind == "git":
            ref = record.ref or "HEAD"
            git(folder, "fetch", "--quiet", "origin", ref)
            fetched = git(folder, "rev-parse", "FETCH_HEAD^{commit}").stdout.strip()
            if fetched != before:  # new upstream code: checked before it is merged
                temp = Path(tempfile.mkdtemp(prefix="agentplug-sync-check-"))
                try:
                    tree = self._git_tree(folder, fetched, temp / "tree")
                    check(tree, record.distribution, record.version, record.url, None)
                finally:
                    shutil.rmtree(temp, ignore_errors=True)
            merge_base = git(folder, "merge-base", "--is-ancestor", before, fetched, check=False)
            if merge_base.returncode == 0:
                git(folder, "update-ref", f"refs/heads/{record.upstream_branch}", fetched)
            else:
                log.warning("%s: upstream history was rewritten; following it", plugin_id)
                git(folder, "update-ref", f"refs/heads/{record.upstream_branch}", fetched)
        else:
            self._sync_sdist(record, folder, check)
            record = read_record(folder) or record  # the import records the new version
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
            write_record(folder, record.model_copy(update={"last_sync": now}))
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
        write_record(folder, record.model_copy(update=update))
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

    def _sync_sdist(self, record: UpstreamRecord, folder: Path, check: TreeCheck) -> None:
        """Commit the newest sdist onto the upstream branch when it is newer (and passes
        the install checks)."""
        temp = Path(tempfile.mkdtemp(prefix="agentplug-sync-"))
        try:
            tree = self._sources.fetch_sdist_tree(record.distribution, temp)
            version = sdist_version(temp / "sdist") or None
            if version and record.version:
                with contextlib.suppress(InvalidVersion):
                    if Version(version) <= Version(record.version):
                        return
            check(tree, record.distribution, version, self._source_label, None)
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
            write_record(folder, record.model_copy(update={"version": version, "commit": commit}))
        finally:
            shutil.rmtree(temp, ignore_errors=True)

    def _git_tree(self, repo: Path, commit: str, into: Path) -> Path:
        """Write the tree of ``commit`` of ``repo`` into the folder ``into`` (for checks)."""
        archive = into.with_suffix(".tar")
        self._runner.git(repo, "archive", "--format=tar", "-o", str(archive), commit)
        into.mkdir(parents=True, exist_ok=True)
        with tarfile.open(archive) as tar:
            tar.extractall(into, filter="data")
        archive.unlink()
        return into
