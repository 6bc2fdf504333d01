"""Install: download, inspect every file through the install policy, install offline."""

from __future__ import annotations

import asyncio
import json
import logging
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from agentplug.plugins.manager.archives import (
    PreparedDistribution,
    normalize_version,
    prepare_downloads,
)
from agentplug.plugins.manager.checks import _ChecksMixin
from agentplug.plugins.manager.reports import (
    InspectedDistribution,
    InstallReport,
    PluginManagerError,
)
from agentplug.plugins.manager.sources import path_from_url

if TYPE_CHECKING:
    from agentplug.services.install import InstallDecision


log = logging.getLogger("agentplug.plugins")


class _InstallMixin(_ChecksMixin):
    """:meth:`install` and its pip steps (download, dry run, offline install)."""

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
                prepared = prepare_downloads(files, wanted, str(requirement))
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
                where = path_from_url(url)
                if where is None or where.resolve().parent != root.parent.resolve():
                    raise PluginManagerError(f"pip would install {url}, which was not downloaded")
                meta = item["metadata"]
                needed.add((canonicalize_name(meta["name"]), normalize_version(meta["version"])))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise PluginManagerError(f"cannot read pip's install plan: {exc}") from None
        return needed

    async def _check(
        self, item: PreparedDistribution, requested_by: str | None, dependency_of: str | None
    ) -> InstallDecision:
        from agentplug.services.install import check_install

        host = self._install_host()
        source = self.settings.source_label
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
