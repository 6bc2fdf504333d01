"""Single-use sandbox worker process for the ``code`` action handler.

This file is executed as a *script* (``python -I <path> <language> <workdir>``) by
:mod:`agentplug.sandbox.code_sandbox`; it is never imported by the host. It must stay
standard-library only (plus ``py_mini_racer`` for JavaScript) so that the worker does not
load agentplug, pydantic or anything else it does not need.

Life cycle of one worker:

1. harden the process (namespaces, chroot, uid drop, rlimits, seccomp, audit hook; see
   :func:`_harden`), *before* any untrusted input is read;
2. report ``ready`` with the list of isolation layers that are really active;
3. read exactly one job, run it, report the result, exit.

Protocol: frames on fd 0 (host -> worker) and fd 1 (worker -> host), each a 4-byte
big-endian length followed by UTF-8 JSON. The host treats every worker frame as untrusted.

The worker's other parts (seccomp filter, audit hook and import allowlist, frame protocol, job
runtime, JavaScript runner) live in the ``_worker_parts`` package next to this file. They are
imported below, as the top-level package ``_worker_parts``, before :func:`main` confines the
process; they are standard-library only as well.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import ctypes
import ctypes.util
import json
import math
import os
import resource
import signal
import sys
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

# ``-I`` keeps this file's directory off sys.path: add it just for importing the worker's
# parts, all of them, here, before main() confines the process (after the chroot no file of
# the package is reachable). Importing them as the top-level package ``_worker_parts`` never
# loads agentplug; type checkers see the same modules under their package name.
if TYPE_CHECKING:
    from agentplug.sandbox._worker_parts.audit import (
        PY_IMPORT_ALLOW,
        PY_PRELOAD,
        install_audit_hook,
    )
    from agentplug.sandbox._worker_parts.frames import frame_in_blocking, frame_out
    from agentplug.sandbox._worker_parts.javascript import new_isolate, run_javascript
    from agentplug.sandbox._worker_parts.runtime import BoundedSink, Channel, truncate
    from agentplug.sandbox._worker_parts.seccomp import install_seccomp
else:
    _HERE = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, _HERE)
    try:
        from _worker_parts.audit import PY_IMPORT_ALLOW, PY_PRELOAD, install_audit_hook
        from _worker_parts.frames import frame_in_blocking, frame_out
        from _worker_parts.javascript import new_isolate, run_javascript
        from _worker_parts.runtime import BoundedSink, Channel, truncate
        from _worker_parts.seccomp import install_seccomp
    finally:
        sys.path.remove(_HERE)

_NOBODY = 65534
_TMPFS_BYTES = 16 * 1024 * 1024

# Linux constants (x86_64 / generic); only what this file needs.
_CLONE_NEWNS = 0x00020000
_CLONE_NEWUTS = 0x04000000
_CLONE_NEWIPC = 0x08000000
_CLONE_NEWUSER = 0x10000000
_CLONE_NEWNET = 0x40000000
_PR_SET_PDEATHSIG = 1
_PR_SET_DUMPABLE = 4
_PR_SET_NO_NEW_PRIVS = 38


# --------------------------------------------------------------------------- hardening


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


def _close_inherited_fds() -> None:
    # The host already spawns with close_fds=True; closing again here means a host that
    # forgot (or a future refactor) still cannot leak a descriptor into the sandbox.
    try:
        fds = [int(x) for x in os.listdir("/proc/self/fd")]
    except OSError:
        fds = list(range(3, 1024))
    for fd in fds:
        if fd > 2:
            with contextlib.suppress(OSError):
                os.close(fd)


def _unshare(libc: ctypes.CDLL, layers: list[str], missing: list[str]) -> bool:
    """Enter fresh network/mount/IPC/UTS namespaces; return True when running as root.

    As root the namespaces are created directly. Without root a user namespace is created
    first (when the kernel allows unprivileged user namespaces), which also grants the
    capabilities needed for chroot inside it. Must run while the process is single-threaded.
    """
    flags = _CLONE_NEWNET | _CLONE_NEWNS | _CLONE_NEWIPC | _CLONE_NEWUTS
    is_root = os.geteuid() == 0
    if not is_root:
        uid, gid = os.geteuid(), os.getegid()
        if libc.unshare(_CLONE_NEWUSER | flags) != 0:
            err = ctypes.get_errno()
            missing.append(f"namespaces (unshare failed: {os.strerror(err)})")
            return False
        try:
            with open("/proc/self/setgroups", "w") as f:
                f.write("deny")
            with open("/proc/self/uid_map", "w") as f:
                f.write(f"0 {uid} 1")
            with open("/proc/self/gid_map", "w") as f:
                f.write(f"0 {gid} 1")
        except OSError as exc:
            missing.append(f"user namespace id map ({exc})")
        layers.append("user-namespace")
    elif libc.unshare(flags) != 0:
        err = ctypes.get_errno()
        missing.append(f"namespaces (unshare failed: {os.strerror(err)})")
        return is_root
    layers.extend(["net-namespace", "mount-namespace", "ipc-namespace", "uts-namespace"])
    return is_root


def _private_tmpfs(
    libc: ctypes.CDLL, workdir: str, is_root: bool, layers: list[str], missing: list[str]
) -> None:
    """Mount a small tmpfs over the working directory inside our mount namespace.

    RLIMIT_FSIZE bounds one file, not how many: the tmpfs bounds the total size and the
    number of files the code can create, and nothing it writes reaches the host disk.
    Mount propagation is made private first so the mount is invisible to the host.
    """
    if "mount-namespace" not in layers:
        missing.append("tmpfs working directory (no mount namespace): disk use is unbounded")
        return
    ms_rec, ms_private = 0x4000, 0x40000
    ms_nosuid, ms_nodev, ms_noexec = 0x2, 0x4, 0x8
    if libc.mount(b"none", b"/", None, ms_rec | ms_private, None) != 0:
        err = ctypes.get_errno()
        missing.append(f"tmpfs working directory (private propagation: {os.strerror(err)})")
        return
    opts = f"size={_TMPFS_BYTES},nr_inodes=256,mode=0700"
    if is_root:
        opts += f",uid={_NOBODY},gid={_NOBODY}"
    rc = libc.mount(
        b"tmpfs",
        workdir.encode(),
        b"tmpfs",
        ms_nosuid | ms_nodev | ms_noexec,
        opts.encode(),
    )
    if rc != 0:
        err = ctypes.get_errno()
        missing.append(f"tmpfs working directory ({os.strerror(err)}): disk use is unbounded")
        return
    layers.append(f"tmpfs-workdir({_TMPFS_BYTES // (1024 * 1024)}MiB,256 inodes,noexec)")


def _chroot(workdir: str, layers: list[str], missing: list[str]) -> bool:
    # chroot into the empty per-run directory: no host file is reachable by path any more.
    # Escaping a chroot needs CAP_SYS_CHROOT, which the uid drop below removes, and the
    # seccomp filter denies chroot/mount/pivot_root outright.
    try:
        os.chroot(workdir)
        os.chdir("/")
    except OSError as exc:
        missing.append(f"chroot ({exc.strerror}); filesystem relies on the audit hook only")
        return False
    layers.append("chroot(empty tmp dir)")
    return True


def _drop_privileges(is_root: bool, layers: list[str], missing: list[str]) -> None:
    # As real root: become nobody, so no capability survives (CAP_SYS_RESOURCE to raise
    # rlimits, CAP_KILL for host processes, CAP_SYS_CHROOT, CAP_DAC_OVERRIDE...).
    if is_root:
        try:
            os.setgroups([])
            os.setgid(_NOBODY)
            os.setuid(_NOBODY)
            layers.append("uid-drop(nobody)")
        except OSError as exc:
            missing.append(f"uid drop ({exc.strerror})")
    else:
        missing.append("uid drop (host is not root: the code runs as the host user)")


def _prctls(libc: ctypes.CDLL, layers: list[str], missing: list[str]) -> None:
    # NO_NEW_PRIVS: no setuid binary can ever give privileges back (also required for an
    # unprivileged seccomp filter). DUMPABLE=0: other processes of the same uid cannot
    # ptrace us or read /proc/<pid>/mem. PDEATHSIG: the worker dies with the host process
    # (set after the uid change, which would clear it).
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0:
        layers.append("no-new-privs")
    else:
        missing.append("no-new-privs")
    libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)
    if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) == 0:
        layers.append("parent-death-signal")


def _base_rlimits(layers: list[str]) -> None:
    # Hard limits equal soft limits; after the uid drop they can only be lowered.
    def lim(which: int, value: int) -> None:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(which, (value, value))

    lim(resource.RLIMIT_CORE, 0)  # no core dumps that could leak memory to disk
    lim(resource.RLIMIT_FSIZE, 8 * 1024 * 1024)  # bound any file written in the tmp dir
    lim(resource.RLIMIT_NOFILE, 64)  # few descriptors: no fd-exhaustion games
    lim(resource.RLIMIT_MSGQUEUE, 0)
    lim(resource.RLIMIT_MEMLOCK, 0)
    # Writing past RLIMIT_FSIZE should fail with EFBIG, not kill the worker silently.
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    layers.append("rlimits(core=0,fsize,nofile)")


def _harden(language: str, workdir: str) -> tuple[list[str], list[str]]:
    """Apply every OS isolation layer this machine supports; report active and missing."""
    layers = ["separate-process", "empty-env", "fresh-tmp-cwd", "closed-fds"]
    missing: list[str] = []
    libc = _libc()
    is_root = _unshare(libc, layers, missing)
    if language == "javascript":
        # V8 must be loaded (shared library, ICU data) while the host filesystem is still
        # visible; --single-threaded keeps V8 from starting worker threads.
        from py_mini_racer import init_mini_racer

        init_mini_racer()
    _private_tmpfs(libc, workdir, is_root, layers, missing)
    if is_root:
        with contextlib.suppress(OSError):
            os.chown(workdir, _NOBODY, _NOBODY)
    _chroot(workdir, layers, missing)
    _drop_privileges(is_root, layers, missing)
    _prctls(libc, layers, missing)
    _base_rlimits(layers)
    install_seccomp(libc, layers, missing)
    return layers, missing


# ------------------------------------------------------------------------ job runtime


class _FrozenParams(Mapping[str, str]):
    """Read-only params: mapping access (``params['x']``) and attribute access
    (``params.x``, as in the seed's JavaScript)."""

    __slots__ = ("_d",)
    _d: dict[str, str]

    def __init__(self, d: dict[str, str]) -> None:
        object.__setattr__(self, "_d", dict(d))

    def __getitem__(self, key: str) -> str:
        return self._d[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._d)

    def __len__(self) -> int:
        return len(self._d)

    def __getattr__(self, name: str) -> str:
        try:
            return self._d[name]
        except KeyError:
            raise AttributeError(name) from None

    def __setattr__(self, name: str, value: object) -> None:
        raise TypeError("params is read-only")

    def __delattr__(self, name: str) -> None:
        raise TypeError("params is read-only")

    def __repr__(self) -> str:
        return f"params({self._d!r})"


class _Response:
    """What ``await fetch(...)`` returns to Python code."""

    def __init__(self, status: int, headers: dict[str, str], body: str) -> None:
        self.status = status
        self.ok = 200 <= status < 300
        self.headers = dict(headers)
        self._body = body

    async def text(self) -> str:
        """Response body as text."""
        return self._body

    async def json(self) -> Any:
        """Response body parsed as JSON."""
        return json.loads(self._body)


def _fetch_request(url: object, options: object) -> dict[str, Any]:
    opts = options if isinstance(options, Mapping) else {}
    headers = opts.get("headers") or {}
    body = opts.get("body")
    return {
        "url": str(url),
        "method": str(opts.get("method") or "GET").upper(),
        "headers": {str(k): str(v) for k, v in dict(headers).items()},
        "body": None if body is None else str(body),
    }


def _encode_result(value: object) -> str:
    if value is None:
        return "Done"
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(value)


def _compile_python(code: str) -> Callable[..., Any]:
    tree = ast.parse(code, filename="<action>", mode="exec")
    wrapper = ast.parse("async def __action__(params, fetch):\n    pass\n", mode="exec")
    fn = wrapper.body[0]
    assert isinstance(fn, ast.AsyncFunctionDef)
    fn.body = tree.body or [ast.Pass()]
    ast.fix_missing_locations(wrapper)
    compiled = compile(wrapper, "<action>", "exec")
    import builtins

    safe = dict(vars(builtins))
    real_import = builtins.__import__

    def guarded_import(name: str, *args: Any, **kwargs: Any) -> Any:
        if name.split(".")[0] not in PY_IMPORT_ALLOW:
            raise ImportError(f"sandbox: import of {name!r} is not allowed")
        return real_import(name, *args, **kwargs)

    for name in ("open", "input", "breakpoint", "help", "exit", "quit", "copyright"):
        safe.pop(name, None)
    safe["__import__"] = guarded_import
    namespace: dict[str, Any] = {"__builtins__": safe, "__name__": "__action__"}
    exec(compiled, namespace)
    fn_obj: Callable[..., Any] = namespace["__action__"]
    return fn_obj


async def _run_python(job: dict[str, Any], channel: Channel) -> str:
    params = _FrozenParams({str(k): str(v) for k, v in dict(job["params"]).items()})

    async def fetch(url: object, options: object = None) -> _Response:
        reply = await channel.fetch(_fetch_request(url, options))
        if reply.get("error"):
            raise RuntimeError(str(reply["error"]))
        return _Response(int(reply["status"]), dict(reply.get("headers") or {}), reply["body"])

    fn = _compile_python(str(job["code"]))
    return _encode_result(await fn(params, fetch))


def main() -> None:
    """Entry point of the worker script."""
    language, workdir = sys.argv[1], sys.argv[2]
    _close_inherited_fds()
    # /proc must be read before the chroot: statm is used for the memory budget.
    statm = os.open("/proc/self/statm", os.O_RDONLY)
    if language == "python":
        for name in PY_PRELOAD:
            with contextlib.suppress(ImportError):
                __import__(name)
    try:
        layers, missing = _harden(language, workdir)
    except Exception as exc:  # pragma: no cover - reported to the host
        frame_out({"t": "fatal", "error": f"sandbox setup failed: {exc!r}"})
        os._exit(3)
    # The event loop (and its AF_UNIX self-pipe) exists before the audit hook and before
    # any untrusted input.
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    isolate = loop.run_until_complete(new_isolate()) if language == "javascript" else None
    layers.append("python-audit-hook")
    frame_out({"t": "ready", "layers": layers, "missing": missing})

    job = frame_in_blocking()
    limit = int(job["max_output_bytes"])
    sink = BoundedSink(limit)
    sys.stdout = sys.stderr = sink
    _apply_job_limits(job, language, statm)
    channel = Channel(loop)
    # Installed last, right before the untrusted code is compiled and run.
    install_audit_hook(language)
    try:
        if language == "python":
            output = loop.run_until_complete(_run_python(job, channel))
        else:
            output = loop.run_until_complete(run_javascript(job, channel, isolate))
        text, truncated = truncate(output, limit)
        frame_out({"t": "result", "ok": True, "output": text, "truncated": truncated})
    except MemoryError:
        frame_out({"t": "result", "ok": False, "error": "MemoryError: memory limit exceeded"})
    except BaseException as exc:
        if type(exc).__name__ == "JSOOMException":  # V8 stopped at the isolate's heap limit
            error = "JSOOMException: out of memory (the JavaScript heap limit was reached)"
            frame_out({"t": "result", "ok": False, "error": error})
            os._exit(0)
        message, _ = truncate(f"{type(exc).__name__}: {exc}", 4096)
        frame_out({"t": "result", "ok": False, "error": message})
    os._exit(0)


def _apply_job_limits(job: dict[str, Any], language: str, statm_fd: int) -> None:
    """Per-job hard limits (they can only be lowered afterwards: the uid drop removed
    CAP_SYS_RESOURCE).

    Memory bounds the *additional* memory the code may map: RLIMIT_AS is set to the current
    address-space size plus the budget. For JavaScript this does not bound the V8 heap
    itself (V8 reserves ~1 TiB of virtual space up front, and RLIMIT_DATA makes V8 abort
    at isolate creation, measured), so V8's own hard heap limit bounds the heap and the
    host's RSS watchdog bounds the whole process.
    """
    extra = int(job["memory_mb"]) * 1024 * 1024
    try:
        if statm_fd >= 0:
            data = os.pread(statm_fd, 256, 0)
            current = int(data.split()[0]) * os.sysconf("SC_PAGE_SIZE")
            # V8 needs headroom outside its heap (compiler zones, code space growth).
            slack = 0 if language == "python" else 256 * 1024 * 1024
            resource.setrlimit(resource.RLIMIT_AS, (current + extra + slack,) * 2)
    except (OSError, ValueError):
        pass
    # CPU seconds: a backstop in case the host's wall-clock kill ever failed.
    cpu = max(1, math.ceil(float(job["timeout_s"]))) + 1
    with contextlib.suppress(OSError, ValueError):
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))


if __name__ == "__main__":
    main()
