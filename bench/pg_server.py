"""A disposable PostgreSQL server for benchmarks: ``initdb`` + ``pg_ctl`` in a temp dir.

Usage::

    reason = pg_server.unavailable()        # None, or why there can be no server
    with pg_server.TempPostgres() as pg:    # initdb, start; stop + rm -rf on exit
        url = pg.create_database("bench_1")  # postgresql://postgres@127.0.0.1:<port>/bench_1

The binaries are looked up on ``PATH`` first, then in ``/usr/lib/postgresql/<version>/bin``
(newest first). The cluster listens on 127.0.0.1 only, on a free port, with ``trust``
authentication for the user ``postgres``, and its socket in the temp dir. ``initdb``
refuses to run as root, so under root the cluster is created and run as ``nobody``
(``runuser -u nobody --``). Durability settings are PostgreSQL's defaults (``fsync=on``,
``synchronous_commit=on``) unless ``settings`` overrides them: the benchmark compares
against SQLite with ``synchronous=FULL``, so both sides pay for a flush per commit.

Independent of ``tests/conftest.py`` on purpose (benchmarks do not import the tests).
"""

from __future__ import annotations

import glob
import importlib.util
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType

__all__ = ["TempPostgres", "find_bin_dir", "unavailable"]


def find_bin_dir() -> Path | None:
    """The folder holding both ``initdb`` and ``pg_ctl``, or ``None``."""
    on_path = shutil.which("initdb")
    if on_path is not None:
        folder = Path(on_path).parent
        if (folder / "pg_ctl").exists():
            return folder
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=_version_key, reverse=True)
    for candidate in candidates:
        folder = Path(candidate)
        if (folder / "initdb").exists() and (folder / "pg_ctl").exists():
            return folder
    return None


def _version_key(path: str) -> tuple[int, ...]:
    version = Path(path).parent.name
    return tuple(int(p) for p in version.split(".") if p.isdigit()) or (0,)


def unavailable() -> str | None:
    """Why no server can be started here (``None`` when one can)."""
    if find_bin_dir() is None:
        return "no PostgreSQL server binaries (initdb/pg_ctl on PATH or /usr/lib/postgresql/*/bin)"
    if (
        importlib.util.find_spec("psycopg") is None
        or importlib.util.find_spec("psycopg_pool") is None
    ):
        return "psycopg / psycopg-pool not installed (pip install 'agentplug[postgres]')"
    if os.name == "posix" and os.geteuid() == 0 and shutil.which("runuser") is None:
        return "running as root and runuser is missing (initdb refuses to run as root)"
    return None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class TempPostgres:
    """One throwaway cluster; a context manager that always stops and removes it."""

    def __init__(
        self, *, settings: Mapping[str, str] | None = None, max_connections: int = 100
    ) -> None:
        bin_dir = find_bin_dir()
        if bin_dir is None:
            raise RuntimeError(unavailable() or "no PostgreSQL server binaries")
        self.bin_dir = bin_dir
        self.settings = {"max_connections": str(max_connections), **(settings or {})}
        self.root: Path | None = None
        self.port = 0
        self._prefix: list[str] = []
        self._options = ""

    # -- lifecycle --------------------------------------------------------------------

    def start(self) -> TempPostgres:
        root = Path(tempfile.mkdtemp(prefix="agentplug-bench-pg-"))
        self.root = root
        if os.name == "posix" and os.geteuid() == 0:
            os.chmod(root, 0o755)
            shutil.chown(root, "nobody")
            self._prefix = ["runuser", "-u", "nobody", "--"]
        self.port = _free_port()
        try:
            self._run(
                "initdb",
                "-D",
                str(self.data_dir),
                "-U",
                "postgres",
                "-A",
                "trust",
                "-E",
                "UTF8",
                "--no-sync",  # the cluster is thrown away; the server's own fsync still applies
                timeout=180,
            )
            options = [f"-p {self.port}", f"-k {root}", "-c listen_addresses=127.0.0.1"]
            options += [f"-c {name}={value}" for name, value in self.settings.items()]
            self._options = " ".join(options)
            self._pg_ctl("start", "-w", "-t", "60", "-o", self._options)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop the server (fast shutdown) and delete its directory; safe to call twice."""
        try:
            # postmaster.pid also covers a start that timed out with the server half up.
            if self.root is not None and (self.data_dir / "postmaster.pid").exists():
                self._pg_ctl("stop", "-m", "fast", "-w", "-t", "60", check=False)
        finally:
            if self.root is not None:
                shutil.rmtree(self.root, ignore_errors=True)
                self.root = None

    def restart(self) -> None:
        """``pg_ctl restart -m fast``: every connection is cut, the data stays."""
        self._pg_ctl("restart", "-m", "fast", "-w", "-t", "60", "-o", self._options)

    def __enter__(self) -> TempPostgres:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- use --------------------------------------------------------------------------

    @property
    def data_dir(self) -> Path:
        if self.root is None:
            raise RuntimeError("server not started")
        return self.root / "data"

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def create_database(self, name: str) -> str:
        """``CREATE DATABASE name``; return its URL."""
        import psycopg

        if not name.isidentifier():
            raise ValueError(f"database name must be a plain identifier: {name!r}")
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        return self.url(name)

    def server_info(self) -> dict[str, str]:
        """Server version and the durability settings in effect."""
        import psycopg

        names = ("server_version", "fsync", "synchronous_commit", "wal_sync_method")
        with psycopg.connect(self.url(), autocommit=True) as conn:
            return {n: str(conn.execute(f"SHOW {n}").fetchone()[0]) for n in names}  # type: ignore[index]

    # -- helpers ----------------------------------------------------------------------

    def _pg_ctl(self, *args: str, check: bool = True) -> None:
        log = str((self.root or Path(tempfile.gettempdir())) / "server.log")
        self._run("pg_ctl", "-D", str(self.data_dir), "-l", log, *args, check=check, timeout=90)

    def _run(self, tool: str, *args: str, check: bool = True, timeout: float) -> None:
        done = subprocess.run(
            [*self._prefix, str(self.bin_dir / tool), *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if check and done.returncode != 0:
            detail = (done.stderr or done.stdout).strip().splitlines()[-3:]
            raise RuntimeError(f"{tool} failed ({done.returncode}): {' / '.join(detail)}")
