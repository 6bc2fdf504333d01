"""Terminal service used by the ``shell`` custom-action handler.

The seed runs shell handlers through the host's ``POST /api/terminal/run``; agentplug goes
through a :class:`TerminalService`, replaceable by the host. The default,
:class:`LocalTerminalService`, runs ``/bin/sh -c`` locally with:

* a clean environment (fixed ``PATH``, ``LANG``, ``HOME`` = working directory; nothing
  inherited from the host, so host secrets in the environment are not visible);
* the working directory chosen by the operator;
* its own session / process group, SIGKILLed as a group at the time limit and after the
  shell exits (background jobs do not survive the run);
* bounded combined stdout+stderr (truncation is marked), streamed to ``on_output``.

Known limit: a command that calls ``setsid`` (or double-forks into a new session) leaves
the process group and is not killed by the group kill. The shell handler is an
operator-trusted feature; untrusted *values* cannot inject commands (see
``shell_handler``), but the template itself runs with the host user's rights.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from pydantic import BaseModel, ConfigDict

__all__ = ["LocalTerminalService", "TerminalResult", "TerminalService"]

_SAFE_PATH = "/usr/local/bin:/usr/bin:/bin"
_DRAIN_GRACE_S = 0.2
_POLL_S = 0.05


class TerminalResult(BaseModel):
    """Outcome of one command: exit status (None when killed at the time limit), captured
    output (combined stdout+stderr, bounded), and whether it was truncated/timed out."""

    model_config = ConfigDict(frozen=True)

    exit_code: int | None
    output: str
    truncated: bool = False
    timed_out: bool = False
    duration_ms: float = 0.0


class TerminalService(Protocol):
    """Runs a shell command line; implemented by the host or :class:`LocalTerminalService`."""

    async def run(
        self,
        command: str,
        *,
        cwd: str | None,
        timeout_s: float,
        max_output_bytes: int,
        on_output: Callable[[str], None] | None = None,
    ) -> TerminalResult:
        """Run ``command`` and return its result; stream output chunks to ``on_output``."""
        ...


class LocalTerminalService:
    """Default terminal service: ``/bin/sh -c`` in a clean environment (see module doc)."""

    def __init__(self, working_dir: str | os.PathLike[str], *, shell: str = "/bin/sh") -> None:
        """``working_dir`` is chosen by the operator and must exist."""
        path = Path(working_dir)
        if not path.is_dir():
            raise FileNotFoundError(
                f"terminal working directory {str(path)!r} does not exist or is not a "
                "directory; the operator must create it"
            )
        self.working_dir = path.resolve()
        self.shell = shell

    def _resolve_cwd(self, cwd: str | None) -> Path:
        if cwd is None:
            return self.working_dir
        target = (self.working_dir / cwd).resolve()
        if not target.is_relative_to(self.working_dir):
            raise ValueError(
                f"cwd {cwd!r} is outside the operator's working directory {str(self.working_dir)!r}"
            )
        if not target.is_dir():
            raise FileNotFoundError(f"cwd {str(target)!r} does not exist")
        return target

    async def run(
        self,
        command: str,
        *,
        cwd: str | None,
        timeout_s: float,
        max_output_bytes: int,
        on_output: Callable[[str], None] | None = None,
    ) -> TerminalResult:
        """Run ``command`` with ``/bin/sh -c``; see the module docstring for the rules."""
        if "\x00" in command:
            raise ValueError("command contains a NUL byte")
        if not timeout_s > 0:
            raise ValueError("timeout_s must be > 0")
        if max_output_bytes < 0:
            raise ValueError("max_output_bytes must be >= 0")
        workdir = self._resolve_cwd(cwd)
        env = {"PATH": _SAFE_PATH, "LANG": "C.UTF-8", "HOME": str(workdir)}
        started = time.monotonic()
        proc = await asyncio.create_subprocess_exec(
            self.shell,
            "-c",
            command,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            cwd=str(workdir),
            env=env,
            start_new_session=True,  # own process group, killed as a whole
        )
        assert proc.stdout is not None
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        kept: list[str] = []
        kept_bytes = 0
        truncated = False
        timed_out = False
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        exited_at: float | None = None
        eof = False
        read_task: asyncio.Future[bytes] | None = None
        try:
            while True:
                now = loop.time()
                if now >= deadline:
                    timed_out = True
                    break
                # Python 3.11's Process.wait() also waits for the pipes to close, which a
                # background job can hold open forever; poll the exit status instead, and
                # once the shell has exited only drain briefly.
                if proc.returncode is not None:
                    exited_at = now if exited_at is None else exited_at
                    if eof or now >= exited_at + _DRAIN_GRACE_S:
                        break
                if eof:
                    await asyncio.sleep(min(_POLL_S, deadline - now))
                    continue
                if read_task is None:
                    read_task = asyncio.ensure_future(proc.stdout.read(65536))
                done, _ = await asyncio.wait({read_task}, timeout=min(_POLL_S, deadline - now))
                if not done:
                    continue
                chunk = read_task.result()
                read_task = None
                if not chunk:
                    eof = True
                    continue
                room = max_output_bytes - kept_bytes
                if room <= 0:
                    truncated = True
                    continue  # keep draining so the command never blocks on a full pipe
                piece = chunk[:room]
                truncated = truncated or len(piece) < len(chunk)
                kept_bytes += len(piece)
                text = decoder.decode(piece)
                if text:
                    kept.append(text)
                    if on_output is not None:
                        on_output(text)
        finally:
            if read_task is not None:
                read_task.cancel()
            # Kill the whole group (the shell and anything it started), then reap.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()
            # asyncio.subprocess.Process has no public close(); closing the transport now
            # releases the pipe instead of leaving it to a destructor after the loop ends.
            transport = getattr(proc, "_transport", None)
            if transport is not None:
                transport.close()
        tail = decoder.decode(b"", final=True)
        if tail:
            kept.append(tail)
            if on_output is not None:
                on_output(tail)
        return TerminalResult(
            exit_code=None if timed_out else proc.returncode,
            output="".join(kept),
            truncated=truncated,
            timed_out=timed_out,
            duration_ms=(time.monotonic() - started) * 1000,
        )
