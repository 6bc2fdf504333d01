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

Warm starts: background *spawner* threads keep ``pool_size`` ready (already hardened,
idle) workers per language that has been used, so a warm run only pays for IPC, and
refill the pool ``parallel`` workers at a time, so a burst that drains it is back at warm
speed quickly. Workers are single-use: no state survives between runs.

The host side is split by job: :mod:`agentplug.sandbox.process` (one worker process),
:mod:`agentplug.sandbox.spawner` (the spawner thread and the pool of ready workers) and
:mod:`agentplug.sandbox.job` (the channel of one run); this module holds :class:`CodeSandbox`.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import logging
import signal
import subprocess
import threading
import time
from collections.abc import Mapping
from types import TracebackType

from agentplug.sandbox.errors import SandboxUnavailableError
from agentplug.sandbox.job import MAX_FETCH_BODY, JobRun
from agentplug.sandbox.models import FetchCallable, Language, SandboxResult
from agentplug.sandbox.process import READY_TIMEOUT_S, Worker
from agentplug.sandbox.spawner import Spawner

__all__ = ["CodeSandbox", "SandboxUnavailableError"]

_log = logging.getLogger(__name__)

_MAX_CODE_CHARS = 256 * 1024
_MAX_PARAMS_CHARS = 1024 * 1024

# Without these the sandbox is considered weakened (strict mode refuses to run).
_ESSENTIAL_LAYERS = ("net-namespace", "chroot", "seccomp")


class CodeSandbox:
    """Runs untrusted Python or JavaScript action code in isolated, single-use processes.

    Use as ``async with CodeSandbox() as sandbox: await sandbox.run(...)`` or call
    :meth:`close` when done; closing kills idle and running workers.
    """

    def __init__(
        self, *, pool_size: int = 1, strict: bool = False, parallel: int | None = None
    ) -> None:
        """``pool_size`` ready workers are kept per language once it has been used and
        ``parallel`` of them start at a time (default: up to 4, never more than the pool);
        ``strict`` refuses to run when an essential isolation layer is unavailable."""
        if pool_size < 0:
            raise ValueError("pool_size must be >= 0")
        if parallel is not None and parallel < 1:
            raise ValueError("parallel must be >= 1")
        self._pool_size = pool_size
        self._parallel = parallel if parallel is not None else max(1, min(pool_size, 4))
        self._strict = strict
        self._spawner: Spawner | None = None
        self._active: set[Worker] = set()
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

    def _ensure_spawner(self) -> Spawner:
        if self._closed:
            raise SandboxUnavailableError("the sandbox is closed")
        if self._spawner is None:
            self._spawner = Spawner(self._pool_size, self._parallel)
        return self._spawner

    async def prewarm(self, *languages: Language, wait: bool = False) -> None:
        """Keep ready workers for ``languages``; with ``wait`` block until they are."""
        spawner = self._ensure_spawner()
        langs: tuple[Language, ...] = languages or ("python",)
        spawner.prewarm(langs)
        if wait and self._pool_size:
            loop = asyncio.get_running_loop()
            for lang in langs:
                await loop.run_in_executor(None, spawner.wait_warm, lang, READY_TIMEOUT_S)

    @property
    def pool_size(self) -> int:
        """Ready workers kept per language."""
        return self._pool_size

    @property
    def parallel(self) -> int:
        """Workers started at the same time when the pool refills."""
        return self._parallel

    def ready(self, language: Language = "python") -> int:
        """Ready (idle, hardened) workers of ``language`` right now."""
        return 0 if self._spawner is None else self._spawner.ready_count(language)

    @property
    def peak_parallel_starts(self) -> int:
        """The most workers seen starting at the same time so far (pool refills)."""
        return 0 if self._spawner is None else self._spawner.peak_starting

    def isolation(self, language: Language = "python") -> dict[str, list[str]]:
        """Isolation layers of the last worker seen for ``language``: ``active`` and
        ``missing`` (with the reason). Empty lists before the first run/prewarm."""
        layers, missing = self._isolation.get(language, ((), ()))
        return {"active": list(layers), "missing": list(missing)}

    # ---------------------------------------------------------------------- run

    async def _acquire(self, language: Language) -> Worker:
        if language == "javascript" and importlib.util.find_spec("py_mini_racer") is None:
            raise SandboxUnavailableError(
                "JavaScript code needs the embedded V8 runtime: install agentplug[js] (mini-racer)"
            )
        got = self._ensure_spawner().acquire(language)
        worker = got if isinstance(got, Worker) else await asyncio.wrap_future(got)
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

    def _record_isolation(self, worker: Worker) -> None:
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
        math, datetime, ...; see ``_worker.PY_PRELOAD``); anything else, ``os``
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
        spawner = self._ensure_spawner()
        spawner.run_started()
        try:
            worker = await self._acquire(language)
        except BaseException:
            spawner.run_ended()
            raise
        with self._lock:
            self._active.add(worker)
        try:
            result = await self._execute(
                worker, code, clean_params, timeout_s, memory_mb, max_output_bytes, fetch
            )
        finally:
            with self._lock:
                self._active.discard(worker)
            spawner.run_ended()
            # Single use: kill now (synchronously, so nothing of this run survives the
            # call); reaping and removing the directory happen off the critical path.
            worker.kill()
            asyncio.get_running_loop().run_in_executor(None, worker.destroy)
        duration = (time.monotonic() - started) * 1000
        return result.model_copy(update={"duration_ms": duration})

    async def _execute(
        self,
        worker: Worker,
        code: str,
        params: dict[str, str],
        timeout_s: float,
        memory_mb: int,
        max_output_bytes: int,
        fetch: FetchCallable | None,
    ) -> SandboxResult:
        run = JobRun(
            worker,
            fetch,
            memory_limit=memory_mb * 1024 * 1024,
            max_frame=6 * max_output_bytes + 2 * MAX_FETCH_BODY + 64 * 1024,
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
    def _died(run: JobRun) -> SandboxResult:
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
