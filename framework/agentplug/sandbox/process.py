"""One sandbox worker process, host side: start it, wait until it is ready, kill it.

Holds :class:`Worker` (a hardened, idle, single-use process), :func:`spawn_ready` (which
starts ``_worker.py`` with an empty environment in an empty temporary directory) and the frame
helpers shared with the job channel.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentplug.sandbox.errors import SandboxUnavailableError
from agentplug.sandbox.models import Language

__all__ = ["READY_TIMEOUT_S", "Worker", "encode_frame", "rss_bytes", "spawn_ready"]

_WORKER_PATH = Path(__file__).with_name("_worker.py")
READY_TIMEOUT_S = 20.0


@dataclass(eq=False)
class Worker:
    """One hardened, idle, single-use worker process."""

    language: Language
    proc: subprocess.Popen[bytes]
    workdir: str
    layers: tuple[str, ...] = ()
    missing: tuple[str, ...] = ()
    rss_baseline: int = 0
    destroyed: bool = field(default=False)

    def alive(self) -> bool:
        """Whether the process is still running."""
        return self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL the whole process group (the worker runs in its own session)."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            self.proc.kill()

    def destroy(self) -> None:
        """Kill, reap, close pipes and remove the temporary directory."""
        if self.destroyed:
            return
        self.destroyed = True
        self.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=10)
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
        shutil.rmtree(self.workdir, ignore_errors=True)


def rss_bytes(pid: int) -> int:
    """Resident memory of process ``pid`` in bytes (0 when it cannot be read)."""
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def encode_frame(obj: object) -> bytes:
    """One protocol frame: 4-byte big-endian length, then ``obj`` as UTF-8 JSON."""
    data = json.dumps(obj, ensure_ascii=False).encode("utf-8")
    return struct.pack(">I", len(data)) + data


def spawn_ready(language: Language) -> Worker:
    """Start a worker and wait (blocking) until it reports ``ready``.

    Must be called from the long-lived spawner thread: the worker's parent-death signal
    is tied to the thread that forked it.
    """
    workdir = tempfile.mkdtemp(prefix="agentplug-sbx-")
    args = [sys.executable, "-I", "-B"]
    if language == "python":
        args.append("-S")  # no site-packages: the Python worker needs the stdlib only
    args += [str(_WORKER_PATH), language, workdir]
    proc = subprocess.Popen(
        args,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env={},  # nothing from the host environment, not even PATH
        cwd=workdir,
        close_fds=True,
        start_new_session=True,  # own process group: killed as a group
    )
    worker = Worker(language, proc, workdir)
    try:
        assert proc.stdout is not None
        msg = _read_frame_blocking(proc.stdout.fileno(), time.monotonic() + READY_TIMEOUT_S)
    except Exception:
        worker.destroy()
        raise
    if msg.get("t") != "ready":
        worker.destroy()
        raise SandboxUnavailableError(str(msg.get("error") or f"unexpected frame {msg!r}"))
    worker.layers = tuple(str(x) for x in msg.get("layers", []))
    worker.missing = tuple(str(x) for x in msg.get("missing", []))
    worker.rss_baseline = rss_bytes(proc.pid)
    return worker


def _read_frame_blocking(fd: int, deadline: float) -> dict[str, Any]:
    buf = b""
    need = 4
    size: int | None = None
    while True:
        while len(buf) < need:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise SandboxUnavailableError("sandbox worker did not become ready in time")
            readable, _, _ = select.select([fd], [], [], remaining)
            if not readable:
                continue
            chunk = os.read(fd, need - len(buf))
            if not chunk:
                raise SandboxUnavailableError(
                    "sandbox worker exited during start-up (is the runtime installed?)"
                )
            buf += chunk
        if size is None:
            (size,) = struct.unpack(">I", buf)
            if size > 1024 * 1024:
                raise SandboxUnavailableError("sandbox worker sent an oversized frame")
            buf, need = b"", size
            continue
        obj = json.loads(buf.decode("utf-8"))
        if not isinstance(obj, dict):
            raise SandboxUnavailableError("sandbox worker sent a malformed frame")
        return obj
