"""Host side of the ``code`` handler's isolation boundary.

User code never runs in the host interpreter. Each run gets a *fresh* worker process
(``_worker.py``, started with an empty environment in an empty temporary directory) that
has already hardened itself before it accepted any input:

* network, mount, IPC and UTS namespaces (no network interface at all, not even a usable
  loopback);
* ``chroot`` into the empty per-run directory and, when the host is root, a switch to the
  ``nobody`` user (so no capability is left to undo any of this);
* ``PR_SET_NO_NEW_PRIVS``, not dumpable, killed when the host dies;
* rlimits: no core dumps, bounded file size and descriptors, per-run address space and CPU
  seconds;
* a seccomp filter: no ``execve``, no new process (only threads), no ``socket``, no
  ``ptrace``, no mount/namespace changes, signals only to itself;
* a Python audit hook as an additional, non-authoritative layer.

The host enforces the wall-clock limit by SIGKILLing the worker's process group (it runs
in its own session), whatever the code does (busy loop, stuck event loop, ignored
signals), and watches its resident memory. Layers the machine cannot provide are reported
by :meth:`CodeSandbox.isolation` and logged as warnings; ``strict=True`` refuses to run
without the network, filesystem and seccomp layers.

Warm starts: a background *spawner* thread keeps ``pool_size`` ready (already hardened,
idle) workers per language that has been used, so a warm run only pays for IPC. Workers
are single-use: no state survives between runs.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextlib
import importlib.util
import json
import logging
import os
import select
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from pydantic import ValidationError

from agentplug.sandbox.models import (
    FetchCallable,
    FetchRequest,
    FetchResponse,
    Language,
    SandboxResult,
)

__all__ = ["CodeSandbox", "SandboxUnavailableError"]

_log = logging.getLogger(__name__)
_WORKER_PATH = Path(__file__).with_name("_worker.py")
_READY_TIMEOUT_S = 20.0
_MAX_CODE_CHARS = 256 * 1024
_MAX_PARAMS_CHARS = 1024 * 1024
_MAX_FETCHES_PER_RUN = 32
_MAX_FETCH_BODY = 1024 * 1024
_WATCH_INTERVAL_S = 0.05
# Without these the sandbox is considered weakened (strict mode refuses to run).
_ESSENTIAL_LAYERS = ("net-namespace", "chroot", "seccomp")


class SandboxUnavailableError(RuntimeError):
    """The sandbox cannot run code (worker failed to start, missing runtime, strict mode)."""


@dataclass(eq=False)
class _Worker:
    """One hardened, idle, single-use worker process."""

    language: Language
    proc: subprocess.Popen[bytes]
    workdir: str
    layers: tuple[str, ...] = ()
    missing: tuple[str, ...] = ()
    rss_baseline: int = 0
    destroyed: bool = field(default=False)

    def alive(self) -> bool:
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


def _rss_bytes(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def _encode_frame(obj: object) -> bytes:
    data = json.dumps(obj, ensure_ascii=False).encode("utf-8")
    return struct.pack(">I", len(data)) + data


def _spawn_ready(language: Language) -> _Worker:
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
    worker = _Worker(language, proc, workdir)
    try:
        assert proc.stdout is not None
        msg = _read_frame_blocking(proc.stdout.fileno(), time.monotonic() + _READY_TIMEOUT_S)
    except Exception:
        worker.destroy()
        raise
    if msg.get("t") != "ready":
        worker.destroy()
        raise SandboxUnavailableError(str(msg.get("error") or f"unexpected frame {msg!r}"))
    worker.layers = tuple(str(x) for x in msg.get("layers", []))
    worker.missing = tuple(str(x) for x in msg.get("missing", []))
    worker.rss_baseline = _rss_bytes(proc.pid)
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


class _Spawner:
    """Long-lived thread that starts workers: on demand first, then pool refills."""

    def __init__(self, pool_size: int) -> None:
        self._pool_size = pool_size
        self._cond = threading.Condition()
        self._ready: dict[Language, collections.deque[_Worker]] = {
            "python": collections.deque(),
            "javascript": collections.deque(),
        }
        self._wanted: set[Language] = set()
        self._requests: collections.deque[tuple[Language, concurrent.futures.Future[_Worker]]] = (
            collections.deque()
        )
        self._closed = False
        self._thread = threading.Thread(
            target=self._main, name="agentplug-sandbox-spawner", daemon=True
        )
        self._thread.start()

    def acquire(self, language: Language) -> _Worker | concurrent.futures.Future[_Worker]:
        """A ready worker, or a future that the spawner thread will complete."""
        with self._cond:
            if self._closed:
                raise SandboxUnavailableError("the sandbox is closed")
            self._wanted.add(language)
            queue = self._ready[language]
            while queue:
                worker = queue.popleft()
                if worker.alive():
                    self._cond.notify_all()
                    return worker
                stale = worker
                threading.Thread(target=stale.destroy, daemon=True).start()
            fut: concurrent.futures.Future[_Worker] = concurrent.futures.Future()
            self._requests.append((language, fut))
            self._cond.notify_all()
            return fut

    def prewarm(self, languages: tuple[Language, ...]) -> None:
        """Start keeping ready workers for ``languages``."""
        with self._cond:
            self._wanted.update(languages)
            self._cond.notify_all()

    def wait_warm(self, language: Language, timeout: float) -> bool:
        """Block until ``pool_size`` workers of ``language`` are ready (or timeout)."""
        deadline = time.monotonic() + timeout
        with self._cond:
            self._wanted.add(language)
            self._cond.notify_all()
            while len(self._ready[language]) < self._pool_size:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self._closed:
                    return False
                self._cond.wait(remaining)
            return True

    def _next_job(
        self,
    ) -> tuple[Language, concurrent.futures.Future[_Worker] | None] | None:
        with self._cond:
            while True:
                if self._closed:
                    return None
                if self._requests:
                    lang, fut = self._requests.popleft()
                    return lang, fut
                for lang in sorted(self._wanted):
                    if len(self._ready[lang]) < self._pool_size:
                        return lang, None
                self._cond.wait()

    def _main(self) -> None:
        while True:
            job = self._next_job()
            if job is None:
                break
            language, fut = job
            if fut is not None and not fut.set_running_or_notify_cancel():
                continue
            try:
                worker = _spawn_ready(language)
            except BaseException as exc:
                if fut is not None:
                    fut.set_exception(exc)
                else:
                    # Do not spin on a broken runtime: stop refilling until next use.
                    _log.warning("sandbox pool refill for %s failed: %s", language, exc)
                    with self._cond:
                        self._wanted.discard(language)
                continue
            if fut is not None:
                fut.set_result(worker)
                continue
            with self._cond:
                if not self._closed:
                    self._ready[language].append(worker)
                    self._cond.notify_all()
                    continue
            worker.destroy()
        self._drain()

    def _drain(self) -> None:
        with self._cond:
            idle = [w for q in self._ready.values() for w in q]
            for q in self._ready.values():
                q.clear()
            requests = list(self._requests)
            self._requests.clear()
        for worker in idle:
            worker.destroy()
        for _, fut in requests:
            if fut.set_running_or_notify_cancel():
                fut.set_exception(SandboxUnavailableError("the sandbox is closed"))

    def close(self) -> None:
        """Stop the thread and destroy idle workers (the thread drains on exit)."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout=30)


class _Run:
    """Host side of one job: frame I/O, fetch bridging, limits."""

    def __init__(
        self,
        worker: _Worker,
        fetch: FetchCallable | None,
        memory_limit: int,
        max_frame: int,
    ) -> None:
        self.worker = worker
        self.fetch = fetch
        self.memory_limit = memory_limit
        self.max_frame = max_frame
        self.loop = asyncio.get_running_loop()
        assert worker.proc.stdin is not None and worker.proc.stdout is not None
        self.wfd = worker.proc.stdin.fileno()
        self.rfd = worker.proc.stdout.fileno()
        os.set_blocking(self.wfd, False)
        os.set_blocking(self.rfd, False)
        self.buf = b""
        self.write_lock = asyncio.Lock()
        self.fetch_tasks: set[asyncio.Task[None]] = set()
        self.fetch_count = 0
        self.memory_exceeded = False

    async def _wait_fd(self, fd: int, writable: bool, timeout: float) -> bool:
        fut: asyncio.Future[None] = self.loop.create_future()

        def wake() -> None:
            if not fut.done():
                fut.set_result(None)

        if writable:
            self.loop.add_writer(fd, wake)
        else:
            self.loop.add_reader(fd, wake)
        try:
            await asyncio.wait_for(fut, timeout)
            return True
        except TimeoutError:
            return False
        finally:
            if writable:
                self.loop.remove_writer(fd)
            else:
                self.loop.remove_reader(fd)

    async def send(self, obj: object, deadline: float) -> None:
        data = _encode_frame(obj)
        async with self.write_lock:
            while data:
                try:
                    n = os.write(self.wfd, data)
                    data = data[n:]
                    continue
                except BlockingIOError:
                    pass
                remaining = deadline - self.loop.time()
                if remaining <= 0:
                    raise TimeoutError
                await self._wait_fd(self.wfd, True, remaining)

    def _check_memory(self) -> bool:
        rss = _rss_bytes(self.worker.proc.pid)
        if rss and rss - self.worker.rss_baseline > self.memory_limit:
            self.memory_exceeded = True
            self.worker.kill()
            return False
        return True

    async def next_frame(self, deadline: float) -> dict[str, Any] | None:
        """Next frame from the worker; None on EOF. Raises TimeoutError at the deadline."""
        while True:
            if len(self.buf) >= 4:
                (size,) = struct.unpack(">I", self.buf[:4])
                if size > self.max_frame:
                    raise ValueError(f"sandbox sent an oversized frame ({size} bytes)")
                if len(self.buf) >= 4 + size:
                    body, self.buf = self.buf[4 : 4 + size], self.buf[4 + size :]
                    obj = json.loads(body.decode("utf-8"))
                    if not isinstance(obj, dict):
                        raise ValueError("sandbox sent a malformed frame")
                    return obj
            try:
                chunk = os.read(self.rfd, 1024 * 1024)
                if not chunk:
                    return None
                self.buf += chunk
                continue
            except BlockingIOError:
                pass
            remaining = deadline - self.loop.time()
            if remaining <= 0:
                raise TimeoutError
            if not self._check_memory():
                return None
            await self._wait_fd(self.rfd, False, min(remaining, _WATCH_INTERVAL_S))

    async def serve_fetch(self, msg: dict[str, Any], deadline: float) -> None:
        rid = msg.get("id")
        reply: dict[str, Any]
        self.fetch_count += 1
        if self.fetch is None:
            reply = {"id": rid, "error": "fetch is not available in this sandbox"}
        elif self.fetch_count > _MAX_FETCHES_PER_RUN:
            reply = {"id": rid, "error": f"too many fetch calls (max {_MAX_FETCHES_PER_RUN})"}
        else:
            try:
                request = FetchRequest(
                    url=str(msg.get("url", "")),
                    method=str(msg.get("method") or "GET"),
                    headers={str(k): str(v) for k, v in dict(msg.get("headers") or {}).items()},
                    body=None if msg.get("body") is None else str(msg.get("body")),
                )
                response: FetchResponse = await self.fetch(request)
                body = response.body
                if len(body) > _MAX_FETCH_BODY:
                    body = body[:_MAX_FETCH_BODY]
                reply = {
                    "id": rid,
                    "status": response.status,
                    "headers": dict(response.headers),
                    "body": body,
                }
            except (ValidationError, ValueError, TypeError) as exc:
                reply = {"id": rid, "error": f"invalid fetch request: {exc}"}
            except Exception as exc:
                reply = {"id": rid, "error": f"fetch failed: {exc}"}
        with contextlib.suppress(OSError, TimeoutError):
            await self.send(reply, deadline)

    def cancel_fetches(self) -> None:
        for task in self.fetch_tasks:
            task.cancel()


class CodeSandbox:
    """Runs untrusted Python or JavaScript action code in isolated, single-use processes.

    Use as ``async with CodeSandbox() as sandbox: await sandbox.run(...)`` or call
    :meth:`close` when done; closing kills idle and running workers.
    """

    def __init__(self, *, pool_size: int = 1, strict: bool = False) -> None:
        """``pool_size`` ready workers are kept per language once it has been used;
        ``strict`` refuses to run when an essential isolation layer is unavailable."""
        if pool_size < 0:
            raise ValueError("pool_size must be >= 0")
        self._pool_size = pool_size
        self._strict = strict
        self._spawner: _Spawner | None = None
        self._active: set[_Worker] = set()
        self._lock = threading.Lock()
        self._isolation: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {}
        self._warned: set[tuple[str, ...]] = set()
        self._closed = False

    # ------------------------------------------------------------------ lifecycle

    async def __aenter__(self) -> CodeSandbox:
        """Start the spawner thread; returns the sandbox."""
        self._ensure_spawner()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Close the sandbox (kills every worker)."""
        await asyncio.get_running_loop().run_in_executor(None, self.close)

    def close(self) -> None:
        """Kill running and idle workers and stop the spawner thread. Idempotent."""
        self._closed = True
        with self._lock:
            active = list(self._active)
        for worker in active:
            worker.kill()
        if self._spawner is not None:
            self._spawner.close()

    def _ensure_spawner(self) -> _Spawner:
        if self._closed:
            raise SandboxUnavailableError("the sandbox is closed")
        if self._spawner is None:
            self._spawner = _Spawner(self._pool_size)
        return self._spawner

    async def prewarm(self, *languages: Language, wait: bool = False) -> None:
        """Keep ready workers for ``languages``; with ``wait`` block until they are."""
        spawner = self._ensure_spawner()
        langs: tuple[Language, ...] = languages or ("python",)
        spawner.prewarm(langs)
        if wait and self._pool_size:
            loop = asyncio.get_running_loop()
            for lang in langs:
                await loop.run_in_executor(None, spawner.wait_warm, lang, _READY_TIMEOUT_S)

    def isolation(self, language: Language = "python") -> dict[str, list[str]]:
        """Isolation layers of the last worker seen for ``language``: ``active`` and
        ``missing`` (with the reason). Empty lists before the first run/prewarm."""
        layers, missing = self._isolation.get(language, ((), ()))
        return {"active": list(layers), "missing": list(missing)}

    # ---------------------------------------------------------------------- run

    async def _acquire(self, language: Language) -> _Worker:
        if language == "javascript" and importlib.util.find_spec("py_mini_racer") is None:
            raise SandboxUnavailableError(
                "JavaScript code needs the embedded V8 runtime: install agentplug[js] (mini-racer)"
            )
        got = self._ensure_spawner().acquire(language)
        worker = got if isinstance(got, _Worker) else await asyncio.wrap_future(got)
        self._record_isolation(worker)
        if self._strict:
            weak = [e for e in _ESSENTIAL_LAYERS if not any(x.startswith(e) for x in worker.layers)]
            if weak:
                worker.destroy()
                raise SandboxUnavailableError(
                    f"strict sandbox refused to run: missing isolation layers {weak}: "
                    f"{list(worker.missing)}"
                )
        return worker

    def _record_isolation(self, worker: _Worker) -> None:
        self._isolation[worker.language] = (worker.layers, worker.missing)
        if worker.missing and worker.missing not in self._warned:
            self._warned.add(worker.missing)
            _log.warning(
                "code sandbox (%s) runs with weaker isolation on this machine: %s",
                worker.language,
                "; ".join(worker.missing),
            )

    async def run(
        self,
        code: str,
        params: Mapping[str, str],
        *,
        language: Language = "python",
        timeout_s: float = 30,
        memory_mb: int = 256,
        max_output_bytes: int = 64 * 1024,
        fetch: FetchCallable | None = None,
    ) -> SandboxResult:
        """Run ``code`` (the body of an async function seeing ``params`` and ``fetch``).

        The return value becomes ``output`` (str as is, other values JSON-encoded, ``Done``
        for None/undefined). ``print``/``console`` output is not part of the result.
        Python code may import a fixed set of pure standard-library modules (json, re,
        math, datetime, ...; see ``_worker._PY_PRELOAD``); anything else, ``os``
        included, is refused. ``params`` is read-only (``params['x']`` or ``params.x``).

        Never raises for problems of the code itself (errors, time-out, memory): they are
        reported in the :class:`SandboxResult`. Raises :class:`SandboxUnavailableError`
        when no sandbox can be started and ``ValueError`` for invalid arguments.
        """
        if language not in ("python", "javascript"):
            raise ValueError(f"unsupported language {language!r} (python or javascript)")
        if not timeout_s > 0:
            raise ValueError("timeout_s must be > 0")
        if memory_mb < 16:
            raise ValueError("memory_mb must be >= 16")
        if max_output_bytes < 1:
            raise ValueError("max_output_bytes must be >= 1")
        started = time.monotonic()
        if len(code) > _MAX_CODE_CHARS:
            return SandboxResult(ok=False, error=f"code too long (max {_MAX_CODE_CHARS} chars)")
        clean_params = {str(k): str(v) for k, v in params.items()}
        if sum(len(k) + len(v) for k, v in clean_params.items()) > _MAX_PARAMS_CHARS:
            return SandboxResult(
                ok=False, error=f"params too large (max {_MAX_PARAMS_CHARS} chars in total)"
            )
        worker = await self._acquire(language)
        with self._lock:
            self._active.add(worker)
        try:
            result = await self._execute(
                worker, code, clean_params, timeout_s, memory_mb, max_output_bytes, fetch
            )
        finally:
            with self._lock:
                self._active.discard(worker)
            # Single use: kill now (synchronously, so nothing of this run survives the
            # call); reaping and removing the directory happen off the critical path.
            worker.kill()
            asyncio.get_running_loop().run_in_executor(None, worker.destroy)
        duration = (time.monotonic() - started) * 1000
        return result.model_copy(update={"duration_ms": duration})

    async def _execute(
        self,
        worker: _Worker,
        code: str,
        params: dict[str, str],
        timeout_s: float,
        memory_mb: int,
        max_output_bytes: int,
        fetch: FetchCallable | None,
    ) -> SandboxResult:
        run = _Run(
            worker,
            fetch,
            memory_limit=memory_mb * 1024 * 1024,
            max_frame=6 * max_output_bytes + 2 * _MAX_FETCH_BODY + 64 * 1024,
        )
        deadline = run.loop.time() + timeout_s
        job = {
            "t": "run",
            "code": code,
            "params": params,
            "timeout_s": timeout_s,
            "memory_mb": memory_mb,
            "max_output_bytes": max_output_bytes,
        }
        try:
            await run.send(job, deadline)
            while True:
                msg = await run.next_frame(deadline)
                if msg is None:
                    return self._died(run)
                kind = msg.get("t")
                if kind == "fetch":
                    task = asyncio.create_task(run.serve_fetch(msg, deadline))
                    run.fetch_tasks.add(task)
                    task.add_done_callback(run.fetch_tasks.discard)
                elif kind == "result":
                    if msg.get("ok") is True:
                        output = str(msg.get("output", ""))
                        output, truncated = _bound(output, max_output_bytes)
                        truncated = truncated or bool(msg.get("truncated"))
                        if truncated:
                            output += "\n[output truncated]"
                        return SandboxResult(ok=True, output=output, truncated=truncated)
                    error = str(msg.get("error") or "unknown error")[:4096]
                    return SandboxResult(ok=False, error=error)
                else:
                    raise ValueError(f"sandbox sent an unexpected frame type {kind!r}")
        except TimeoutError:
            worker.kill()
            return SandboxResult(
                ok=False,
                timed_out=True,
                error=f"timed out after {timeout_s:g}s (the sandbox process was killed)",
            )
        except (ValueError, UnicodeDecodeError, OSError) as exc:
            worker.kill()
            return SandboxResult(ok=False, error=f"sandbox protocol error: {exc}")
        finally:
            run.cancel_fetches()

    @staticmethod
    def _died(run: _Run) -> SandboxResult:
        if run.memory_exceeded:
            return SandboxResult(ok=False, error="memory limit exceeded (the process was killed)")
        code = run.worker.proc.poll()
        if code is None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                code = run.worker.proc.wait(timeout=1)
        if code is not None and code < 0:
            sig = -code
            reasons: dict[int, str] = {
                signal.SIGXCPU: "CPU time limit exceeded",
                signal.SIGKILL: "killed",
                signal.SIGSEGV: "crashed (possibly out of memory)",
                signal.SIGTRAP: "aborted (possibly out of memory)",
                signal.SIGABRT: "aborted (possibly out of memory)",
            }
            reason = reasons.get(sig, f"signal {sig}")
            return SandboxResult(ok=False, error=f"sandbox process ended: {reason}")
        return SandboxResult(ok=False, error=f"sandbox process exited unexpectedly ({code})")


def _bound(text: str, limit: int) -> tuple[str, bool]:
    data = text.encode("utf-8", "replace")
    if len(data) <= limit:
        return text, False
    return data[:limit].decode("utf-8", "ignore"), True
