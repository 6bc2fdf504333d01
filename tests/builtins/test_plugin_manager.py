"""Plugin management: install through the install checks, eject, sync, reinject, core.

Everything is local: a tiny plugin project is created in a temporary folder, built into
a find-links folder (wheel and sdist, without build isolation) and served with
``--no-index``; git upstreams are local repositories.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from agentplug import PluginApi, PluginHost
from agentplug.actions.model import Message
from agentplug.core.errors import ConfigError
from agentplug.plugins.manager import (
    RECORD_FILE,
    InstallBlockedError,
    PluginManager,
    PluginManagerError,
    PluginSettings,
    activate_ejected_source,
    core_import_roots,
    ejected_source,
    plugin_settings,
)

ROOT = Path(__file__).resolve().parents[2]
DIST = "tinyplug"


# ---------------------------------------------------------------------------
# Helpers


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


def write_project(folder: Path, version: str = "1.0", greeting: str = "hello v1") -> Path:
    """A minimal plugin distribution ``tinyplug`` with entry point ``tiny``."""
    (folder / "tinyplug").mkdir(parents=True, exist_ok=True)
    (folder / "pyproject.toml").write_text(
        textwrap.dedent(
            f"""
            [build-system]
            requires = ["setuptools"]
            build-backend = "setuptools.build_meta"

            [project]
            name = "{DIST}"
            version = "{version}"

            [project.entry-points.agentplug]
            tiny = "tinyplug"

            [tool.setuptools]
            packages = ["tinyplug"]
            """
        ),
        encoding="utf-8",
    )
    (folder / "tinyplug" / "__init__.py").write_text(
        f'GREETING = "{greeting}"\n\n\ndef register(api):\n    pass\n', encoding="utf-8"
    )
    (folder / ".gitignore").write_text("build/\n*.egg-info/\ndist/\n", encoding="utf-8")
    return folder


BUILD = """
import sys
from setuptools import build_meta as backend
out = sys.argv[1]
for kind in sys.argv[2:]:
    getattr(backend, "build_" + kind)(out)
"""


def build(project: Path, links: Path, *kinds: str) -> None:
    """Build wheel and/or sdist of ``project`` into ``links`` (offline, no isolation)."""
    links.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [sys.executable, "-c", BUILD, str(links), *kinds],
        cwd=project,
        check=True,
        capture_output=True,
    )


def fake_install(
    site: Path,
    *,
    version: str = "1.0",
    direct_url: dict[str, Any] | None = None,
    project_urls: dict[str, str] | None = None,
    dist: str = DIST,
    entry_point: str | None = "tiny",
) -> Path:
    """Metadata of an installed ``tinyplug`` (what pip leaves in site-packages)."""
    info = site / f"{dist}-{version}.dist-info"
    info.mkdir(parents=True)
    lines = ["Metadata-Version: 2.1", f"Name: {dist}", f"Version: {version}"]
    lines += [f"Project-URL: {k}, {v}" for k, v in (project_urls or {}).items()]
    (info / "METADATA").write_text("\n".join(lines) + "\n", encoding="utf-8")
    if entry_point:
        (info / "entry_points.txt").write_text(
            f"[agentplug]\n{entry_point} = tinyplug\n", encoding="utf-8"
        )
    (info / "top_level.txt").write_text("tinyplug\n", encoding="utf-8")
    if direct_url is not None:
        (info / "direct_url.json").write_text(json.dumps(direct_url), encoding="utf-8")
    return info


def upstream_repo(folder: Path) -> Path:
    write_project(folder)
    git(folder, "init", "-q", "-b", "main")
    git(folder, "add", "-A")
    git(folder, "commit", "-q", "-m", "v1")
    return folder


def commit_change(repo: Path, text: str, message: str) -> None:
    (repo / "tinyplug" / "__init__.py").write_text(text, encoding="utf-8")
    git(repo, "commit", "-q", "-am", message)


@pytest.fixture(scope="module")
def links(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """find-links folder with the wheel and the sdist of tinyplug 1.0."""
    base = tmp_path_factory.mktemp("artifacts")
    folder = base / "links"
    build(write_project(base / "project"), folder, "wheel", "sdist")
    return folder


def settings(links: Path, site: Path, **extra: Any) -> PluginSettings:
    return PluginSettings(
        find_links=[str(links)],
        no_index=True,
        target=str(site),
        build_isolation=False,
        install_dependencies=False,
        restart=False,
        **extra,
    )


def manager(tmp_path: Path, links: Path, host: PluginHost | None = None) -> PluginManager:
    """A manager whose host (default: one with no policy and no plugins) checks the code
    every operation brings in."""
    site = tmp_path / "site"
    site.mkdir(exist_ok=True)
    return PluginManager(host or PluginHost(), tmp_path / "state", settings=settings(links, site))


def block_installs(api: PluginApi) -> None:
    def scan(event: Any) -> dict[str, Any]:
        return {"block": True, "block_reason": f"{event.name} failed the scan"}

    api.on("before_install", scan)


@pytest.fixture(autouse=True)
def _clean_path() -> Iterator[None]:
    before = list(sys.path)
    yield
    sys.path[:] = before


# ---------------------------------------------------------------------------
# Install


def test_install_downloads_checks_then_installs_the_downloaded_file(
    tmp_path: Path, links: Path
) -> None:
    seen: list[Any] = []

    def register(api: PluginApi) -> None:
        api.on("before_install", lambda event: seen.append(event))

    host = PluginHost()
    host.register(register, "observer")
    pm = manager(tmp_path, links, host)
    report = asyncio.run(pm.install("tinyplug"))
    assert report.installed and report.name == "tinyplug" and report.version == "1.0"
    assert report.restart_required
    assert (tmp_path / "site" / "tinyplug" / "__init__.py").is_file()
    [event] = seen
    assert event.name == "tinyplug" and event.version == "1.0"
    assert event.path.endswith(".whl") and "tinyplug/__init__.py" in event.files
    assert pm.find_plugin("tiny") is not None  # discoverable by plugin id afterwards


def test_install_blocked_by_install_policy_installs_nothing(tmp_path: Path, links: Path) -> None:
    host = PluginHost(
        {
            "security": {
                "install_policy": {
                    "enabled": True,
                    "rules": [{"action": "block", "name": "tiny*"}],
                }
            }
        }
    )
    pm = manager(tmp_path, links, host)
    report = asyncio.run(pm.install("tinyplug==1.0"))
    assert not report.installed
    assert report.blocked_by == "security.install_policy"
    assert list((tmp_path / "site").iterdir()) == []


def test_install_blocked_by_a_before_install_plugin_installs_nothing(
    tmp_path: Path, links: Path
) -> None:
    host = PluginHost()
    host.register(block_installs, "scanner")
    pm = manager(tmp_path, links, host)
    report = asyncio.run(pm.install("tinyplug"))
    assert not report.installed
    assert report.blocked_by == "scanner" and "failed the scan" in (report.reason or "")
    assert list((tmp_path / "site").iterdir()) == []


@pytest.mark.parametrize("spec", ["https://evil.example/x.whl", "-r evil.txt", "not a name!"])
def test_install_accepts_only_package_requirements(tmp_path: Path, links: Path, spec: str) -> None:
    with pytest.raises(PluginManagerError):
        asyncio.run(manager(tmp_path, links, PluginHost()).install(spec))


# -- dependencies: every distribution is downloaded and inspected before pip installs


PLUGIN_WITH_DEP = "depplug"
DEPENDENCY = "tinydep"


def write_package(
    folder: Path, name: str, *, requires: Sequence[str] = (), entry_point: str | None = None
) -> Path:
    """A one-module distribution ``name`` (optionally a plugin with ``entry_point``)."""
    (folder / name).mkdir(parents=True, exist_ok=True)
    deps = ", ".join(json.dumps(r) for r in requires)
    entry = f'[project.entry-points.agentplug]\n{entry_point} = "{name}"\n' if entry_point else ""
    (folder / "pyproject.toml").write_text(
        textwrap.dedent(
            f"""
            [build-system]
            requires = ["setuptools"]
            build-backend = "setuptools.build_meta"

            [project]
            name = "{name}"
            version = "1.0"
            dependencies = [{deps}]

            [tool.setuptools]
            packages = ["{name}"]
            """
        )
        + entry,
        encoding="utf-8",
    )
    (folder / name / "__init__.py").write_text("def register(api):\n    pass\n", "utf-8")
    return folder


@pytest.fixture(scope="module")
def dep_links(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """find-links folder with wheels of plugin ``depplug`` and its dependency ``tinydep``."""
    base = tmp_path_factory.mktemp("dep-artifacts")
    folder = base / "links"
    build(write_package(base / DEPENDENCY, DEPENDENCY), folder, "wheel")
    plugin = write_package(
        base / PLUGIN_WITH_DEP, PLUGIN_WITH_DEP, requires=[DEPENDENCY], entry_point="depp"
    )
    build(plugin, folder, "wheel")
    return folder


def dep_manager(tmp_path: Path, dep_links: Path, host: PluginHost) -> PluginManager:
    site = tmp_path / "site"
    site.mkdir(exist_ok=True)
    configured = settings(dep_links, site).model_copy(update={"install_dependencies": True})
    return PluginManager(host, tmp_path / "state", settings=configured)


def installed_names(site: Path) -> list[str]:
    return sorted(p.name for p in site.iterdir()) if site.is_dir() else []


def test_install_policy_blocking_a_dependency_refuses_the_whole_install(
    tmp_path: Path, dep_links: Path
) -> None:
    policy = {"enabled": True, "rules": [{"action": "block", "name": DEPENDENCY}]}
    host = PluginHost({"security": {"install_policy": policy}})
    report = asyncio.run(dep_manager(tmp_path, dep_links, host).install(PLUGIN_WITH_DEP))
    assert not report.installed and not report.restart_required
    assert report.name == PLUGIN_WITH_DEP  # the request, ...
    assert report.blocked_by == "security.install_policy"
    assert report.blocked_distribution == DEPENDENCY  # ... refused because of its dependency
    assert f"dependency {DEPENDENCY} 1.0" in (report.reason or "")
    assert [(i.name, i.requested, i.allowed) for i in report.inspected] == [
        (PLUGIN_WITH_DEP, True, True),
        (DEPENDENCY, False, False),
    ]
    assert installed_names(tmp_path / "site") == []  # neither the plugin nor the dependency


def test_before_install_plugin_blocking_a_dependency_refuses_the_whole_install(
    tmp_path: Path, dep_links: Path
) -> None:
    seen: list[Any] = []

    def register(api: PluginApi) -> None:
        def scan(event: Any) -> dict[str, Any] | None:
            seen.append(event)
            if event.name == DEPENDENCY:
                return {"block": True, "block_reason": f"{event.name} failed the scan"}
            return None

        api.on("before_install", scan)

    host = PluginHost()
    host.register(register, "scanner")
    report = asyncio.run(dep_manager(tmp_path, dep_links, host).install(PLUGIN_WITH_DEP))
    assert not report.installed
    assert report.blocked_by == "scanner" and report.blocked_distribution == DEPENDENCY
    assert f"{DEPENDENCY} failed the scan" in (report.reason or "")
    assert DEPENDENCY in (report.reason or "") and PLUGIN_WITH_DEP in (report.reason or "")
    assert installed_names(tmp_path / "site") == []
    plugin_event, dep_event = seen  # the requested package first, then its dependency
    assert plugin_event.name == PLUGIN_WITH_DEP and plugin_event.model_extra["requested"]
    assert dep_event.model_extra["dependency_of"] == PLUGIN_WITH_DEP
    assert dep_event.path.endswith(".whl") and f"{DEPENDENCY}/__init__.py" in dep_event.files


def test_allowed_plugin_and_dependency_are_both_inspected_then_installed_offline(
    tmp_path: Path, dep_links: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agentplug.plugins import manager as plugin_manager

    commands: list[list[str]] = []
    real_run = plugin_manager.CommandRunner.run

    def record(self: Any, cmd: Any, *args: Any, **kwargs: Any) -> Any:
        commands.append(list(cmd))
        return real_run(self, cmd, *args, **kwargs)

    monkeypatch.setattr(plugin_manager.CommandRunner, "run", record)
    seen: list[str] = []

    def register(api: PluginApi) -> None:
        api.on("before_install", lambda event: seen.append(event.path))

    host = PluginHost()
    host.register(register, "observer")
    report = asyncio.run(dep_manager(tmp_path, dep_links, host).install(PLUGIN_WITH_DEP))
    assert report.installed and report.blocked_distribution is None
    assert [(i.name, i.version, i.allowed) for i in report.inspected] == [
        (PLUGIN_WITH_DEP, "1.0", True),
        (DEPENDENCY, "1.0", True),
    ]
    site = tmp_path / "site"
    assert (site / PLUGIN_WITH_DEP / "__init__.py").is_file()
    assert (site / DEPENDENCY / "__init__.py").is_file()
    download, install = commands
    assert "download" in download and "--no-deps" not in download  # dependencies fetched
    # pip installs exactly the inspected files: no index, no dependency resolution
    assert {"install", "--no-index", "--no-deps"} <= set(install)
    assert "--index-url" not in install and str(dep_links) not in install
    folder = install[install.index("--find-links") + 1]
    assert install[-2:] == seen
    assert all(Path(path).parent == Path(folder) for path in seen)


def test_environment_install_inspects_and_installs_only_what_the_environment_lacks(
    tmp_path: Path, dep_links: Path
) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True)
    python = venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    pip = [str(python), "-m", "pip", "--disable-pip-version-check"]
    offline = ["--no-index", "--find-links", str(dep_links)]

    def names() -> set[str]:
        listed = subprocess.run([*pip, "list", "--format", "json"], capture_output=True, text=True)
        return {row["name"] for row in json.loads(listed.stdout)}

    policy = {"enabled": True, "rules": [{"action": "block", "name": DEPENDENCY}]}
    host = PluginHost({"security": {"install_policy": policy}})
    configured = PluginSettings(
        find_links=[str(dep_links)],
        no_index=True,
        python=str(python),
        build_isolation=False,
        install_dependencies=True,
    )
    pm = PluginManager(host, tmp_path / "state", settings=configured)
    blocked = asyncio.run(pm.install(PLUGIN_WITH_DEP))  # the environment lacks tinydep
    assert not blocked.installed and blocked.blocked_distribution == DEPENDENCY
    assert not {PLUGIN_WITH_DEP, DEPENDENCY} & names()

    subprocess.run([*pip, "install", *offline, DEPENDENCY], check=True, capture_output=True)
    report = asyncio.run(pm.install(PLUGIN_WITH_DEP))
    # tinydep is already installed, so pip adds only the plugin: only it is inspected
    assert report.installed, report.reason
    assert [i.name for i in report.inspected] == [PLUGIN_WITH_DEP]
    assert {PLUGIN_WITH_DEP, DEPENDENCY} <= names()


def test_plugin_settings_errors_name_the_actions_plugins_key() -> None:
    with pytest.raises(ConfigError) as info:
        plugin_settings({"plugins": {"find_links": 3, "bogus": True}})
    text = str(info.value)
    assert "actions.plugins.find_links" in text and "actions.plugins.bogus" in text


# ---------------------------------------------------------------------------
# Eject


def test_eject_of_an_unknown_plugin_fails_cleanly(tmp_path: Path, links: Path) -> None:
    pm = manager(tmp_path, links)
    with pytest.raises(PluginManagerError, match="no installed plugin 'nope'"):
        asyncio.run(pm.eject("nope"))
    assert not pm.ejected_path("nope").exists()
    assert not pm.plugins_dir.exists() or list(pm.plugins_dir.iterdir()) == []


def test_eject_failure_leaves_no_half_ejected_folder(tmp_path: Path) -> None:
    empty = tmp_path / "empty-links"
    empty.mkdir()
    pm = manager(tmp_path, empty)
    fake_install(tmp_path / "site")  # no VCS recorded and no sdist available
    with pytest.raises(PluginManagerError, match="source distribution"):
        asyncio.run(pm.eject("tiny"))
    assert list(pm.plugins_dir.iterdir()) == []


def test_eject_from_sdist_creates_a_git_working_copy_with_upstream_branch(
    tmp_path: Path, links: Path
) -> None:
    pm = manager(tmp_path, links)
    fake_install(tmp_path / "site")
    report = asyncio.run(pm.eject("tiny"))
    folder = Path(report.path)
    assert folder == tmp_path / "state" / "plugins" / "tiny"
    assert report.source_kind == "sdist" and report.branch == "main"
    assert 'GREETING = "hello v1"' in (folder / "tinyplug" / "__init__.py").read_text()
    assert git(folder, "rev-parse", "--abbrev-ref", "HEAD") == "main"
    assert git(folder, "rev-parse", "upstream") == git(folder, "rev-parse", "HEAD")
    assert git(folder, "status", "--porcelain") == ""  # the record file is not a change
    record = json.loads((folder / RECORD_FILE).read_text())
    assert record["distribution"] == "tinyplug" and record["version"] == "1.0"
    assert record["source_kind"] == "sdist" and record["commit"]
    assert ejected_source(pm.state_dir, "tiny") == folder.resolve()


def test_eject_twice_is_refused(tmp_path: Path, links: Path) -> None:
    pm = manager(tmp_path, links)
    repo = upstream_repo(tmp_path / "repo")
    fake_install(tmp_path / "site", project_urls={"Source": str(repo)})
    asyncio.run(pm.eject("tiny"))
    with pytest.raises(PluginManagerError, match="already ejected"):
        asyncio.run(pm.eject("tiny"))


def test_eject_from_a_local_git_repository_named_by_project_url(
    tmp_path: Path, links: Path
) -> None:
    pm = manager(tmp_path, links)
    repo = upstream_repo(tmp_path / "repo")
    head = git(repo, "rev-parse", "HEAD")
    commit_change(repo, 'GREETING = "unreleased"\n', "after the release")
    git(repo, "tag", "v1.0", head)  # the installed version is tagged: eject that commit
    fake_install(tmp_path / "site", project_urls={"Homepage": "x", "Source": str(repo)})
    report = asyncio.run(pm.eject("tiny"))
    folder = Path(report.path)
    assert report.source_kind == "git" and report.commit == head
    assert 'GREETING = "hello v1"' in (folder / "tinyplug" / "__init__.py").read_text()
    assert git(folder, "rev-parse", "upstream") == head
    record = json.loads((folder / RECORD_FILE).read_text())
    assert record["url"] == str(repo) and record["ref"] == "main"


def test_eject_from_direct_url_vcs_info_checks_out_the_recorded_commit(
    tmp_path: Path, links: Path
) -> None:
    pm = manager(tmp_path, links)
    repo = upstream_repo(tmp_path / "repo")
    first = git(repo, "rev-parse", "HEAD")
    commit_change(repo, 'GREETING = "later"\n', "later")
    direct = {"url": f"file://{repo}", "vcs_info": {"vcs": "git", "commit_id": first}}
    fake_install(tmp_path / "site", direct_url=direct)
    report = asyncio.run(pm.eject("tiny"))
    assert report.commit == first
    assert git(Path(report.path), "rev-parse", "HEAD") == first


# ---------------------------------------------------------------------------
# Sync


def ejected_from_git(tmp_path: Path, links: Path) -> tuple[PluginManager, Path, Path]:
    pm = manager(tmp_path, links)
    repo = upstream_repo(tmp_path / "repo")
    fake_install(tmp_path / "site", project_urls={"Repository": str(repo)})
    folder = Path(asyncio.run(pm.eject("tiny")).path)
    return pm, repo, folder


def test_sync_merges_new_upstream_commits_and_reports_their_count(
    tmp_path: Path, links: Path
) -> None:
    pm, repo, folder = ejected_from_git(tmp_path, links)
    (folder / "LOCAL.md").write_text("my notes\n")  # a local edit that does not conflict
    (repo / "NEWS.md").write_text("news\n")
    git(repo, "add", "NEWS.md")
    git(repo, "commit", "-q", "-m", "news")
    commit_change(repo, 'GREETING = "hello v2"\n', "v2")
    report = asyncio.run(pm.sync("tiny"))
    assert report.merged and report.upstream_commits == 2 and report.conflicts == []
    assert report.committed_local_changes
    assert 'GREETING = "hello v2"' in (folder / "tinyplug" / "__init__.py").read_text()
    assert (folder / "LOCAL.md").is_file() and (folder / "NEWS.md").is_file()
    assert git(folder, "status", "--porcelain") == ""
    again = asyncio.run(pm.sync("tiny"))
    assert again.merged and again.upstream_commits == 0


def test_sync_with_a_conflicting_local_change_reports_files_and_leaves_a_clean_tree(
    tmp_path: Path, links: Path
) -> None:
    pm, repo, folder = ejected_from_git(tmp_path, links)
    init = folder / "tinyplug" / "__init__.py"
    init.write_text('GREETING = "my local greeting"\n')
    commit_change(repo, 'GREETING = "upstream greeting"\n', "upstream edit")
    before = git(folder, "rev-parse", "HEAD")
    report = asyncio.run(pm.sync("tiny"))
    assert not report.merged
    assert report.conflicts == ["tinyplug/__init__.py"]
    assert report.upstream_commits == 1
    assert git(folder, "status", "--porcelain") == ""
    assert not (folder / ".git" / "MERGE_HEAD").exists()
    assert "my local greeting" in init.read_text()  # local work kept (committed)
    assert git(folder, "rev-parse", "HEAD^") == before  # only the local-changes commit


def test_sync_of_an_sdist_ejection_imports_a_newer_sdist_as_one_upstream_commit(
    tmp_path: Path, links: Path
) -> None:
    own_links = tmp_path / "links"
    own_links.mkdir()
    for file in links.glob("*.tar.gz"):
        (own_links / file.name).write_bytes(file.read_bytes())
    pm = manager(tmp_path, own_links)
    fake_install(tmp_path / "site")
    folder = Path(asyncio.run(pm.eject("tiny")).path)
    build(write_project(tmp_path / "v11", "1.1", "hello v1.1"), own_links, "sdist")
    report = asyncio.run(pm.sync("tiny"))
    assert report.merged and report.upstream_commits == 1
    assert "hello v1.1" in (folder / "tinyplug" / "__init__.py").read_text()
    assert json.loads((folder / RECORD_FILE).read_text())["version"] == "1.1"


def test_sync_of_a_plugin_that_is_not_ejected_fails_clearly(tmp_path: Path, links: Path) -> None:
    with pytest.raises(PluginManagerError, match="not ejected"):
        asyncio.run(manager(tmp_path, links).sync("tiny"))


# ---------------------------------------------------------------------------
# Reinject, list, loader preference


def test_ejected_lists_name_branch_and_path(tmp_path: Path, links: Path) -> None:
    pm, _, folder = ejected_from_git(tmp_path, links)
    [row] = pm.ejected()
    assert (row.name, row.branch, row.path) == ("tiny", "main", str(folder))
    assert row.distribution == "tinyplug" and row.source_kind == "git" and not row.dirty


def test_reinject_removes_the_ejected_copy(tmp_path: Path, links: Path) -> None:
    pm, _, folder = ejected_from_git(tmp_path, links)
    report = asyncio.run(pm.reinject("tiny"))
    assert report.removed and not folder.exists()
    assert pm.ejected() == [] and ejected_source(pm.state_dir, "tiny") is None
    with pytest.raises(PluginManagerError, match="not ejected"):
        asyncio.run(pm.reinject("tiny"))


def test_activate_ejected_source_puts_the_copy_first_and_reinject_removes_it(
    tmp_path: Path, links: Path
) -> None:
    pm, _, folder = ejected_from_git(tmp_path, links)
    [root] = activate_ejected_source(pm.state_dir, "tiny")
    assert sys.path[0] == str(root) and root == folder.resolve()
    activate_ejected_source(pm.state_dir, "tiny")
    assert sys.path.count(str(root)) == 1  # idempotent
    asyncio.run(pm.reinject("tiny"))
    assert str(root) not in sys.path


@pytest.mark.parametrize("bad", ["../etc", "a/b", "", ".hidden"])
def test_plugin_ids_cannot_escape_the_plugins_folder(tmp_path: Path, links: Path, bad: str) -> None:
    with pytest.raises(PluginManagerError, match="invalid plugin id"):
        asyncio.run(manager(tmp_path, links).eject(bad))


# ---------------------------------------------------------------------------
# Core


def test_core_status_reports_the_installed_package_version_and_commit(tmp_path: Path) -> None:
    status = PluginManager(None, tmp_path / "state").core_status()
    assert status.running_from == "installed" and status.distribution == "agentplug"
    assert status.version and status.location
    assert Path(status.location) == ROOT / "framework" / "agentplug"
    if (ROOT / ".git").exists():  # an editable install from a git checkout
        assert status.commit == git(ROOT, "rev-parse", "HEAD")
    assert status.ejected_path is None and not status.restart_required


def test_core_eject_sync_reinject_and_status(tmp_path: Path, links: Path) -> None:
    repo = upstream_repo(tmp_path / "repo")
    site = tmp_path / "site"
    fake_install(site, project_urls={"Source": str(repo)}, entry_point=None)
    pm = PluginManager(
        PluginHost(), tmp_path / "state", settings=settings(links, site), core_distribution=DIST
    )
    report = asyncio.run(pm.eject_core())
    assert Path(report.path) == tmp_path / "state" / "core" / "tinyplug"
    assert core_import_roots(pm.state_dir, DIST) == [Path(report.path).resolve()]
    status = pm.core_status()
    assert status.running_from == "installed" and status.restart_required
    assert status.ejected_commit == git(repo, "rev-parse", "HEAD")
    commit_change(repo, 'GREETING = "core v2"\n', "core v2")
    assert asyncio.run(pm.sync_core()).upstream_commits == 1
    asyncio.run(pm.reinject_core())
    assert pm.core_status().ejected_path is None and core_import_roots(pm.state_dir, DIST) == []


# ---------------------------------------------------------------------------
# Actions and CLI


def run_action(host: PluginHost, action: str, **params: Any) -> Any:
    async def go() -> Any:
        runtime = host.gateway.actions
        await runtime.load()
        return await runtime.run(Message(content={"action": action, "parameters": params}))

    return asyncio.run(go())


def host_with_manager(tmp_path: Path, links: Path) -> tuple[PluginHost, PluginManager]:
    host = PluginHost()
    pm = manager(tmp_path, links, host)
    host.gateway.actions.register_service("plugin_manager", pm)
    return host, pm


def test_eject_plugin_action_of_an_unknown_plugin_is_a_clear_failed_result(
    tmp_path: Path, links: Path
) -> None:
    host, _ = host_with_manager(tmp_path, links)
    flow = run_action(host, "EJECT_PLUGIN", pluginId="nope")
    assert flow.outcome == "failed"
    assert "Could not eject the plugin" in flow.result.text and "nope" in flow.result.text


def test_plugin_actions_check_their_parameters_against_the_schema(
    tmp_path: Path, links: Path
) -> None:
    host, _ = host_with_manager(tmp_path, links)
    missing = run_action(host, "SYNC_PLUGIN")
    assert missing.outcome == "failed" and "Missing required parameter: pluginId" in (
        missing.result.text
    )
    bad = run_action(host, "REINJECT_PLUGIN", pluginId="../x")
    assert bad.outcome == "failed" and "pluginId" in bad.result.text


def test_eject_list_and_reinject_through_the_actions(tmp_path: Path, links: Path) -> None:
    host, pm = host_with_manager(tmp_path, links)
    repo = upstream_repo(tmp_path / "repo")
    fake_install(tmp_path / "site", project_urls={"Source": str(repo)})
    ejected = run_action(host, "EJECT_PLUGIN", pluginId="tiny")
    assert ejected.ok and ejected.result.data["branch"] == "main"
    listed = run_action(host, "LIST_EJECTED_PLUGINS")
    assert listed.ok and "tiny (branch main)" in listed.result.text
    assert [p["name"] for p in listed.result.data["plugins"]] == ["tiny"]
    synced = run_action(host, "SYNC_PLUGIN", pluginId="tiny")
    assert synced.ok and "already up to date" in synced.result.text
    status = run_action(host, "CORE_STATUS")
    assert status.ok and status.result.data["running_from"] == "installed"
    reinjected = run_action(host, "REINJECT_PLUGIN", pluginId="tiny")
    assert reinjected.ok and pm.ejected() == []


def test_install_plugin_action_blocked_by_a_plugin_reports_the_blocker(
    tmp_path: Path, links: Path
) -> None:
    host, _ = host_with_manager(tmp_path, links)
    host.register(block_installs, "scanner")
    flow = run_action(host, "INSTALL_PLUGIN", name="tinyplug")
    assert flow.outcome == "failed"
    assert "blocked by scanner" in flow.result.text and "Nothing was installed" in flow.result.text


def test_cli_plugin_ejected_and_core_status_print_json(tmp_path: Path) -> None:
    state = str(tmp_path / "state")
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, argparse\n"
            "from agentplug.plugins.manager import add_plugin_management_commands\n"
            "p = argparse.ArgumentParser(); s = p.add_subparsers(dest='c', required=True)\n"
            "add_plugin_management_commands(s)\n"
            "a = p.parse_args(sys.argv[1:]); sys.exit(a.func(a))\n",
            "plugin",
            "core-status",
            "--json",
            "--state-dir",
            state,
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(out.stdout)["running_from"] == "installed"


# ---------------------------------------------------------------------------
# Serialisation and the whole chain


def test_operations_on_one_plugin_are_serialized_within_and_across_managers(
    tmp_path: Path, links: Path
) -> None:
    repo = upstream_repo(tmp_path / "repo")
    fake_install(tmp_path / "site", project_urls={"Source": str(repo)})
    one, two = manager(tmp_path, links), manager(tmp_path, links)  # two "processes"

    async def race() -> list[Any]:
        return list(
            await asyncio.gather(
                one.eject("tiny"), one.eject("tiny"), two.eject("tiny"), return_exceptions=True
            )
        )

    results = asyncio.run(race())
    ok = [r for r in results if not isinstance(r, BaseException)]
    refused = [r for r in results if isinstance(r, PluginManagerError)]
    assert len(ok) == 1 and len(refused) == 2
    assert all("already ejected" in str(r) for r in refused)
    assert [p.name for p in one.ejected()] == ["tiny"]


def test_install_without_a_host_is_refused(tmp_path: Path, links: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    pm = PluginManager(None, tmp_path / "state", settings=settings(links, site))
    with pytest.raises(PluginManagerError, match="needs a host"):
        asyncio.run(pm.install("tinyplug"))
    assert list(site.iterdir()) == []


@pytest.mark.parametrize("operation", ["eject", "sync", "reinject"])
def test_eject_sync_and_reinject_without_a_host_are_refused(
    tmp_path: Path, links: Path, operation: str
) -> None:
    site = tmp_path / "site"
    site.mkdir()
    fake_install(site)
    pm = PluginManager(None, tmp_path / "state", settings=settings(links, site))
    with pytest.raises(PluginManagerError, match="needs a host"):
        asyncio.run(getattr(pm, operation)("tiny"))
    assert not pm.plugins_dir.exists() or list(pm.plugins_dir.iterdir()) == []


def test_install_eject_reinject_actions_restart_into_the_right_copy(
    tmp_path: Path, links: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agentplug.actions.builtins.lifecycle import RestartController

    monkeypatch.setenv("AGENTPLUG_CACHE_DIR", str(tmp_path / "cache"))
    site = tmp_path / "site"
    host = PluginHost(
        {
            "plugins": {"allow": ["tiny"]},
            "actions": {
                "plugins": {
                    "find_links": [str(links)],
                    "no_index": True,
                    "target": str(site),
                    "build_isolation": False,
                    "install_dependencies": False,
                    "state_dir": str(tmp_path / "state"),
                }
            },
        }
    )
    controller = RestartController("embedded", delay_s=0)
    host.gateway.actions.register_service("restart", controller)

    def module_file() -> Path:
        return Path(sys.modules["tinyplug"].__file__ or "").resolve()

    async def go() -> None:
        runtime = host.gateway.actions
        await runtime.load()
        installed = await runtime.run(Message(content={"action": "INSTALL_PLUGIN", "name": DIST}))
        assert installed.ok and "Restarting" in installed.result.text
        report = await controller.wait(timeout_s=60)
        assert report.reload.added == ["tiny"]
        assert module_file().is_relative_to(site.resolve())

        ejected = await runtime.run(Message(content={"action": "EJECT_PLUGIN", "pluginId": "tiny"}))
        assert ejected.ok and ejected.result.data["source_kind"] == "sdist"
        report = await controller.wait(timeout_s=60)
        assert report.reload.reloaded == ["tiny"]
        assert module_file().is_relative_to((tmp_path / "state" / "plugins" / "tiny").resolve())

        back = await runtime.run(Message(content={"action": "REINJECT_PLUGIN", "pluginId": "tiny"}))
        assert back.ok
        report = await controller.wait(timeout_s=60)
        assert report.reload.reloaded == ["tiny"]
        assert module_file().is_relative_to(site.resolve())

    try:
        asyncio.run(go())
    finally:
        for name in [n for n in sys.modules if n == "tinyplug" or n.startswith("tinyplug.")]:
            del sys.modules[name]


def test_an_ejected_core_on_pythonpath_is_what_runs_and_status_says_so(tmp_path: Path) -> None:
    pm = PluginManager(PluginHost(), tmp_path / "state")
    if pm.core_status().installed_commit is None:
        pytest.skip("agentplug is not installed from a git checkout here")
    report = asyncio.run(pm.eject_core())
    assert report.source_kind == "git" and report.branch == "main"
    roots = core_import_roots(pm.state_dir)
    assert {r.name for r in roots} >= {"framework"}  # where the agentplug package lives
    probe = (
        "import json, sys; from agentplug.plugins.manager import PluginManager; "
        "print(PluginManager(None, sys.argv[1]).core_status().model_dump_json())"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(map(str, roots))}
    done = subprocess.run(
        [sys.executable, "-c", probe, str(pm.state_dir)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    status = json.loads(done.stdout)
    assert status["running_from"] == "ejected" and not status["restart_required"]
    assert status["commit"] == report.commit
    assert Path(status["location"]).is_relative_to(Path(report.path))


def test_eject_falls_back_to_the_sdist_when_the_source_url_cannot_be_cloned(
    tmp_path: Path, links: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GIT_ALLOW_PROTOCOL", "file")  # git refuses https: no network used
    pm = manager(tmp_path, links)
    fake_install(tmp_path / "site", project_urls={"Source": "https://example.org/tinyplug"})
    report = asyncio.run(pm.eject("tiny"))
    assert report.source_kind == "sdist"
    assert (Path(report.path) / "tinyplug" / "__init__.py").is_file()


# ---------------------------------------------------------------------------
# Every path that brings code in goes through the install policy and before_install

BLOCK_TINY = {
    "security": {
        "install_policy": {
            "enabled": True,
            "rules": [{"action": "block", "name": "tiny*"}],
            "default": "allow",
        }
    }
}


def snapshot(folder: Path) -> dict[str, Any]:
    """Everything a sync may change: branches, HEAD, index state and file contents."""
    files = {
        str(p.relative_to(folder)): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and ".git" not in p.relative_to(folder).parts
    }
    refs = git(folder, "for-each-ref", "--format=%(refname) %(objectname)", "refs/heads")
    return {
        "files": files,
        "refs": refs,
        "head": git(folder, "rev-parse", "HEAD"),
        "status": git(folder, "status", "--porcelain"),
    }


def recording_scanner(seen: list[Any], block_when: Callable[[Any], bool]) -> Any:
    def register(api: PluginApi) -> None:
        def scan(event: Any) -> dict[str, Any] | None:
            tree = Path(event.path)
            source = tree / "tinyplug" / "__init__.py"
            seen.append((event.operation, event.plugin_id, event.name, list(event.files)))
            if block_when(source.read_text() if source.is_file() else ""):
                return {"block": True, "block_reason": "scanner found 'evil'"}
            return None

        api.on("before_install", scan)

    return register


def test_eject_blocked_by_the_install_policy_leaves_nothing(tmp_path: Path, links: Path) -> None:
    pm = manager(tmp_path, links, PluginHost(BLOCK_TINY))
    repo = upstream_repo(tmp_path / "repo")
    fake_install(tmp_path / "site", project_urls={"Source": str(repo)})
    with pytest.raises(
        InstallBlockedError,
        match=r"eject of tinyplug blocked by "
        r"security.install_policy",
    ) as info:
        asyncio.run(pm.eject("tiny"))
    assert info.value.blocked_by == "security.install_policy"
    assert not pm.ejected_path("tiny").exists()
    assert [p.name for p in pm.plugins_dir.iterdir()] == []  # no temporary folder left
    assert ejected_source(pm.state_dir, "tiny") is None


def test_eject_shows_before_install_the_source_tree_it_is_about_to_load(
    tmp_path: Path, links: Path
) -> None:
    seen: list[Any] = []
    host = PluginHost()
    host.register(recording_scanner(seen, lambda text: "evil" in text), "scanner")
    pm = manager(tmp_path, links, host)
    repo = upstream_repo(tmp_path / "repo")
    fake_install(tmp_path / "site", project_urls={"Source": str(repo)})
    asyncio.run(pm.eject("tiny"))
    [(operation, plugin_id, name, files)] = seen
    assert (operation, plugin_id, name) == ("eject", "tiny", "tinyplug")
    assert "tinyplug/__init__.py" in files and not any(f.startswith(".git/") for f in files)


def test_sync_scans_new_upstream_commits_before_the_merge_and_a_block_changes_nothing(
    tmp_path: Path, links: Path
) -> None:
    seen: list[Any] = []
    host = PluginHost()
    host.register(recording_scanner(seen, lambda text: "evil" in text), "scanner")
    pm = manager(tmp_path, links, host)
    repo = upstream_repo(tmp_path / "repo")
    fake_install(tmp_path / "site", project_urls={"Repository": str(repo)})
    folder = Path(asyncio.run(pm.eject("tiny")).path)
    (folder / "LOCAL.md").write_text("an uncommitted local edit\n")
    before = snapshot(folder)
    commit_change(repo, 'GREETING = "evil"\n', "upstream turns evil")
    with pytest.raises(InstallBlockedError, match="sync of tinyplug blocked by scanner"):
        asyncio.run(pm.sync("tiny"))
    assert snapshot(folder) == before  # files, branches, HEAD and status untouched
    assert seen[-1][0] == "sync" and "tinyplug/__init__.py" in seen[-1][3]
    commit_change(repo, 'GREETING = "fine again"\n', "upstream fixed")
    report = asyncio.run(pm.sync("tiny"))
    assert report.merged and "fine again" in (folder / "tinyplug" / "__init__.py").read_text()


def test_reinject_checks_the_installed_package_and_a_block_keeps_the_ejected_copy(
    tmp_path: Path, links: Path
) -> None:
    seen: list[Any] = []
    host = PluginHost()
    block = {"on": False}
    host.register(recording_scanner(seen, lambda text: block["on"]), "scanner")
    pm = manager(tmp_path, links, host)
    repo = upstream_repo(tmp_path / "repo")
    fake_install(tmp_path / "site", project_urls={"Source": str(repo)})
    folder = Path(asyncio.run(pm.eject("tiny")).path)
    block["on"] = True
    with pytest.raises(InstallBlockedError, match="reinject of tinyplug blocked by scanner"):
        asyncio.run(pm.reinject("tiny"))
    assert folder.is_dir() and ejected_source(pm.state_dir, "tiny") == folder.resolve()
    assert seen[-1][:3] == ("reinject", "tiny", "tinyplug")
    block["on"] = False
    assert asyncio.run(pm.reinject("tiny")).removed and not folder.exists()


def test_eject_core_goes_through_the_install_policy(tmp_path: Path, links: Path) -> None:
    repo = upstream_repo(tmp_path / "repo")
    site = tmp_path / "site"
    fake_install(site, project_urls={"Source": str(repo)}, entry_point=None)
    pm = PluginManager(
        PluginHost(BLOCK_TINY),
        tmp_path / "state",
        settings=settings(links, site),
        core_distribution=DIST,
    )
    with pytest.raises(InstallBlockedError, match=r"security\.install_policy"):
        asyncio.run(pm.eject_core())
    assert not pm.core_dir.exists()


def test_eject_plugin_action_blocked_by_the_policy_is_a_failed_result_naming_it(
    tmp_path: Path, links: Path
) -> None:
    host = PluginHost(BLOCK_TINY)
    pm = manager(tmp_path, links, host)
    host.gateway.actions.register_service("plugin_manager", pm)
    repo = upstream_repo(tmp_path / "repo")
    fake_install(tmp_path / "site", project_urls={"Source": str(repo)})
    flow = run_action(host, "EJECT_PLUGIN", pluginId="tiny")
    assert flow.outcome == "failed"
    assert "blocked by security.install_policy" in flow.result.text
    assert not pm.ejected_path("tiny").exists()


def test_cli_plugin_eject_blocked_by_the_policy_exits_1_with_one_line_and_changes_nothing(
    tmp_path: Path, links: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    from agentplug.cli.main import main

    site = tmp_path / "site"
    repo = upstream_repo(tmp_path / "repo")
    fake_install(site, project_urls={"Source": str(repo)})
    config = tmp_path / "agentplug.json"
    plugins = {"find_links": [str(links)], "no_index": True, "target": str(site)}
    config.write_text(json.dumps({**BLOCK_TINY, "actions": {"plugins": plugins}}))
    monkeypatch.setenv("AGENTPLUG_CACHE_DIR", str(tmp_path / "cache"))
    state = tmp_path / "state"
    argv = ["plugin", "eject", "tiny", "--config", str(config), "--state-dir", str(state)]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("agentplug plugin eject: error: eject of ")
    assert "blocked by security.install_policy" in err and "Traceback" not in err
    assert not (state / "plugins" / "tiny").exists()
