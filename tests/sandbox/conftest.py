"""Shared fixtures for the code sandbox tests: secrets, canaries and a counting server."""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from agentplug.sandbox import CodeSandbox

HOST_ENV_SECRET = "agentplug-env-secret-7f3a9c"
FILE_SECRET = "agentplug-file-secret-1b8e44"


@dataclass
class Targets:
    """Things escape attempts aim at; tests assert they stayed untouched."""

    secret_file: Path
    canary: Path
    server_port: int
    connections: list[int]
    file_secret: str = FILE_SECRET
    env_secret: str = HOST_ENV_SECRET


def _worker_processes() -> dict[int, int]:
    """All live (not zombie) processes running the sandbox worker: pid -> parent pid."""
    found: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read()
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[-1].split()
        except OSError:
            continue
        if b"agentplug/sandbox/_worker.py" in cmdline and fields[0] != "Z":
            found[int(entry)] = int(fields[1])
    return found


def worker_pids() -> set[int]:
    """Live sandbox workers started by *this* test process (other test sessions may run
    on the same machine, so only our own children count)."""
    me = os.getpid()
    return {pid for pid, ppid in _worker_processes().items() if ppid == me}


def forked_worker_copies() -> set[int]:
    """Processes that are forks of a worker (parent is a worker, or init after the worker
    died): a legitimate worker's parent is always the host process."""
    procs = _worker_processes()
    return {pid for pid, ppid in procs.items() if ppid in procs or ppid == 1}


def wait_no_workers(within: float = 10.0) -> set[int]:
    """Wait until no worker process is left; return the leftovers (empty when none)."""
    deadline = time.monotonic() + within
    left = worker_pids()
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = worker_pids()
    return left


@pytest.fixture(scope="module")
def targets(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Targets]:
    """A readable secret file, a canary path, and a TCP server counting connections."""
    base = tmp_path_factory.mktemp("targets")
    secret = base / "secret.txt"
    secret.write_text(FILE_SECRET)
    secret.chmod(0o644)  # readable by anyone: only the isolation may protect it
    base.chmod(0o777)
    connections: list[int] = []
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.2)
    port = server.getsockname()[1]
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            except OSError:
                break
            connections.append(1)
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield Targets(secret, base / "canary", port, connections)
    stop.set()
    thread.join(timeout=5)
    server.close()


@pytest.fixture(scope="module")
def sandbox(targets: Targets) -> Iterator[CodeSandbox]:
    """One sandbox for the module; the host env secret is set before any worker starts."""
    old = os.environ.get("AGENTPLUG_HOST_SECRET")
    os.environ["AGENTPLUG_HOST_SECRET"] = HOST_ENV_SECRET
    box = CodeSandbox(pool_size=1)
    try:
        yield box
    finally:
        box.close()
        if old is None:
            os.environ.pop("AGENTPLUG_HOST_SECRET", None)
        else:
            os.environ["AGENTPLUG_HOST_SECRET"] = old
        assert wait_no_workers() == set(), "sandbox workers left behind after close()"


@pytest.fixture
def forked_copies() -> Callable[[], set[int]]:
    """Callable listing processes forked by sandboxed code (must always be empty)."""
    return forked_worker_copies
