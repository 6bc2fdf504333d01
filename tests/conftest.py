"""Shared test helpers: fake installed distributions on a temporary sys.path entry, the
``javascript`` marker (tests of JavaScript code actions, which need the ``js`` extra), and a
real PostgreSQL server for the state-store tests (``postgres_server``, ``postgres_url``)."""

from __future__ import annotations

import glob
import importlib.util
import os
import shutil
import socket
import sqlite3
import subprocess
import sys
import tempfile
import textwrap
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

JS_SKIP_REASON = (
    "JavaScript code actions need the embedded V8 runtime: pip install 'agentplug[js]' "
    "(mini-racer); `make test` installs it"
)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "javascript: runs JavaScript code actions (skipped without mini-racer)"
    )
    config.addinivalue_line(
        "markers",
        "stress: slow multi-process or stress test (CI runs them; skip locally with "
        "-m 'not stress')",
    )
    parallel = getattr(config.option, "numprocesses", None)
    if parallel and not hasattr(config, "workerinput") and config.option.verbose <= 0:
        config.pluginmanager.register(FileProgress(config), "agentplug-file-progress")


class FileProgress:
    """One line per finished test file under pytest-xdist (``-n``), which otherwise
    prints only dots that say nothing about where a long run is. Passing tests print no
    dot while this is active; failures still print ``F`` and their report at the end."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.left: dict[str, int] = {}
        self.outcomes: dict[str, dict[str, int]] = {}
        self.seconds: dict[str, float] = {}
        self.worst: dict[str, str] = {}
        self.files_done = 0

    def _count(self, nodeids: list[str]) -> None:
        if self.left:
            return  # every xdist worker collects the same ids
        for nodeid in nodeids:
            path = nodeid.split("::", 1)[0]
            self.left[path] = self.left.get(path, 0) + 1

    @pytest.hookimpl(trylast=True)
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self._count([item.nodeid for item in session.items])

    def pytest_xdist_node_collection_finished(self, node: object, ids: list[str]) -> None:
        self._count(list(ids))

    def pytest_report_teststatus(
        self, report: pytest.TestReport, config: pytest.Config
    ) -> tuple[str, str, str] | None:
        if report.when == "call" and report.passed:
            return "passed", "", "PASSED"
        return None

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        path = report.nodeid.split("::", 1)[0]
        self.seconds[path] = self.seconds.get(path, 0.0) + report.duration
        outcome = "failed" if report.failed else "skipped" if report.skipped else "passed"
        failed_before = self.worst.get(report.nodeid) == "failed"
        if (report.when == "call" or outcome != "passed") and not failed_before:
            self.worst[report.nodeid] = outcome
        if report.when != "teardown" or path not in self.left:
            return
        final = self.worst.pop(report.nodeid, "passed")
        counts = self.outcomes.setdefault(path, {})
        counts[final] = counts.get(final, 0) + 1
        self.left[path] -= 1
        if self.left[path] == 0:
            self.files_done += 1
            summary = ", ".join(f"{n} {what}" for what, n in sorted(counts.items()))
            reporter = self.config.pluginmanager.get_plugin("terminalreporter")
            if reporter is not None:
                reporter.ensure_newline()
                reporter.write_line(
                    f"[{self.files_done:>3}/{len(self.left)}] {path}: {summary} "
                    f"({self.seconds[path]:.1f} s)"
                )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    if importlib.util.find_spec("py_mini_racer") is not None:
        return
    skip = pytest.mark.skip(reason=JS_SKIP_REASON)
    for item in items:
        if item.get_closest_marker("javascript") is not None:
            item.add_marker(skip)


@pytest.fixture
def site_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A temporary directory on ``sys.path`` acting as an extra site-packages."""
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setenv("AGENTPLUG_CACHE_DIR", str(tmp_path / "cache"))
    before = set(sys.modules)
    yield site
    for name in set(sys.modules) - before:
        if name.startswith("fakeplug_"):
            del sys.modules[name]


FakeDist = Callable[..., Path]


@pytest.fixture
def fake_dist(site_dir: Path) -> FakeDist:
    """Install a fake distribution: a module plus a dist-info with entry points."""

    def make(
        dist: str,
        module: str,
        source: str,
        entry_points: dict[str, str] | None = None,
        group: str = "agentplug",
    ) -> Path:
        (site_dir / f"{module}.py").write_text(textwrap.dedent(source), encoding="utf-8")
        info = site_dir / f"{dist.replace('-', '_')}-1.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(
            f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n", encoding="utf-8"
        )
        eps = entry_points if entry_points is not None else {dist: module}
        lines = [f"[{group}]"] + [f"{name} = {value}" for name, value in eps.items()]
        (info / "entry_points.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
        return info

    return make


# -- a real PostgreSQL server -------------------------------------------------------


def pg_bin_dir() -> Path | None:
    """Where ``initdb`` and ``pg_ctl`` are: ``PATH``, then ``/usr/lib/postgresql/*/bin``."""
    found = shutil.which("initdb")
    if found and shutil.which("pg_ctl", path=str(Path(found).parent)):
        return Path(found).parent
    for folder in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):
        if (Path(folder) / "initdb").exists() and (Path(folder) / "pg_ctl").exists():
            return Path(folder)
    return None


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class PostgresServer:
    """A throwaway PostgreSQL cluster in a temporary directory (trust auth, 127.0.0.1)."""

    bin_dir: Path
    root: Path
    port: int
    as_user: list[str]

    @property
    def data(self) -> Path:
        return self.root / "data"

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def pg_ctl(self, *args: str) -> None:
        """Run ``pg_ctl`` on this cluster (``start``, ``stop``, ``restart``)."""
        options = (
            f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off"
            " -c max_connections=200"
        )
        subprocess.run(
            [
                *self.as_user,
                str(self.bin_dir / "pg_ctl"),
                "-D",
                str(self.data),
                "-w",
                "-l",
                str(self.root / "log"),
                "-o",
                options,
                *args,
            ],
            check=True,
            capture_output=True,
            timeout=120,
        )


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """One PostgreSQL server for the test session; skips when no server binary exists."""
    bin_dir = pg_bin_dir()
    if bin_dir is None:
        pytest.skip("no PostgreSQL server binary (initdb/pg_ctl on PATH or /usr/lib/postgresql)")
    if importlib.util.find_spec("psycopg") is None:
        pytest.skip("psycopg missing: pip install 'agentplug[postgres]'")
    root = Path(tempfile.mkdtemp(prefix="agentplug-pg-"))
    as_user: list[str] = []
    if os.geteuid() == 0:
        # initdb refuses to run as root: the cluster belongs to an unprivileged user.
        os.chmod(root, 0o755)
        shutil.chown(root, "nobody")
        as_user = ["runuser", "-u", "nobody", "--"]
    server = PostgresServer(bin_dir, root, free_port(), as_user)
    subprocess.run(
        [
            *as_user,
            str(bin_dir / "initdb"),
            "-D",
            str(server.data),
            "-A",
            "trust",
            "-U",
            "postgres",
            "-E",
            "UTF8",
            "--no-sync",
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    server.pg_ctl("start")
    try:
        yield server
    finally:
        try:
            server.pg_ctl("stop", "-m", "fast")
        finally:
            shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def postgres_url(postgres_server: PostgresServer) -> Iterator[str]:
    """The URL of a fresh, empty database on the session's PostgreSQL server."""
    import psycopg

    name = f"t_{uuid.uuid4().hex[:16]}"
    with psycopg.connect(postgres_server.url(), autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    yield postgres_server.url(name)
    with psycopg.connect(postgres_server.url(), autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def write_v1_sqlite_file(path: Path) -> None:
    """A state file in the version-1 layout (no meta table, no claim columns), with one
    key (``ns``/``k`` = ``"v"``) and one queue entry (``ns``/``q`` = ``1``)."""
    db = sqlite3.connect(path)
    db.executescript(
        """
        CREATE TABLE kv (namespace TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL,
                         updated REAL NOT NULL, PRIMARY KEY (namespace, key));
        CREATE TABLE queue (seq INTEGER PRIMARY KEY AUTOINCREMENT, namespace TEXT NOT NULL,
                            queue TEXT NOT NULL, value TEXT NOT NULL, created REAL NOT NULL);
        INSERT INTO kv VALUES ('ns', 'k', '"v"', 0);
        INSERT INTO queue(namespace, queue, value, created) VALUES ('ns', 'q', '1', 0);
        """
    )
    db.close()
