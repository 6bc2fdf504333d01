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
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import ctypes
import ctypes.util
import errno
import json
import math
import os
import platform
import resource
import signal
import struct
import sys
from collections.abc import Callable, Iterator, Mapping
from typing import Any

# Modules user code may import (Python). They are imported *before* the chroot so that
# importing them later needs no filesystem access; anything else fails to import because
# the chroot hides the standard library and the audit hook refuses new imports.
_PY_PRELOAD = (
    "abc",
    "array",
    "base64",
    "binascii",
    "bisect",
    "calendar",
    "collections",
    "collections.abc",
    "copy",
    "csv",
    "dataclasses",
    "datetime",
    "decimal",
    "difflib",
    "enum",
    "fractions",
    "functools",
    "hashlib",
    "heapq",
    "hmac",
    "html",
    "itertools",
    "json",
    "math",
    "numbers",
    "operator",
    "random",
    "re",
    "statistics",
    "string",
    "textwrap",
    "time",
    "typing",
    "unicodedata",
    "urllib.parse",
    "uuid",
    "zlib",
    "_strptime",
    "encodings.ascii",
    "encodings.latin_1",
    "encodings.utf_16",
    "encodings.utf_32",
    "encodings.cp1252",
    "encodings.idna",
)
_PY_IMPORT_ALLOW = frozenset(m.split(".")[0] for m in _PY_PRELOAD) | {"asyncio"}

_NOBODY = 65534
_TMPFS_BYTES = 16 * 1024 * 1024
_MAX_FRAME = 64 * 1024 * 1024

# Linux constants (x86_64 / generic); only what this file needs.
_CLONE_NEWNS = 0x00020000
_CLONE_NEWUTS = 0x04000000
_CLONE_NEWIPC = 0x08000000
_CLONE_NEWUSER = 0x10000000
_CLONE_NEWNET = 0x40000000
_CLONE_THREAD = 0x00010000
_PR_SET_PDEATHSIG = 1
_PR_SET_DUMPABLE = 4
_PR_SET_NO_NEW_PRIVS = 38
_AF_UNIX = 1

# x86_64 syscall numbers denied by the seccomp filter (EPERM). Everything that creates a
# process, replaces the program, talks to the network, inspects other processes or changes
# the kernel/mount state.
_X86_64_DENY = {
    "execve": 59,
    "execveat": 322,
    "fork": 57,
    "vfork": 58,
    "ptrace": 101,
    "process_vm_readv": 310,
    "process_vm_writev": 311,
    "pidfd_getfd": 438,
    "pidfd_send_signal": 424,
    "tkill": 200,
    "rt_sigqueueinfo": 129,
    "rt_tgsigqueueinfo": 297,
    "mount": 165,
    "umount2": 166,
    "pivot_root": 155,
    "chroot": 161,
    "unshare": 272,
    "setns": 308,
    "open_tree": 428,
    "move_mount": 429,
    "fsopen": 430,
    "fsconfig": 431,
    "fsmount": 432,
    "fspick": 433,
    "name_to_handle_at": 303,
    "open_by_handle_at": 304,
    "bpf": 321,
    "perf_event_open": 298,
    "userfaultfd": 323,
    "io_uring_setup": 425,
    "io_uring_enter": 426,
    "io_uring_register": 427,
    "keyctl": 250,
    "add_key": 248,
    "request_key": 249,
    "kexec_load": 246,
    "kexec_file_load": 320,
    "init_module": 175,
    "finit_module": 313,
    "delete_module": 176,
    "reboot": 169,
    "swapon": 167,
    "swapoff": 168,
    "acct": 163,
    "mknod": 133,
    "mknodat": 259,
    "iopl": 172,
    "ioperm": 173,
    "personality": 135,
    "socket": 41,
}
_NR_CLONE = 56
_NR_CLONE3 = 435
_NR_SOCKETPAIR = 53
_NR_KILL = 62
_NR_TGKILL = 234
_NR_PRLIMIT64 = 302
_NR_SECCOMP = 317
_AUDIT_ARCH_X86_64 = 0xC000003E


def _frame_out(obj: Mapping[str, Any]) -> None:
    """Write one protocol frame to fd 1 (blocking, complete)."""
    data = json.dumps(obj, ensure_ascii=False).encode("utf-8", "replace")
    buf = struct.pack(">I", len(data)) + data
    while buf:
        n = os.write(1, buf)
        buf = buf[n:]


def _read_exact(fd: int, n: int) -> bytes:
    out = b""
    while len(out) < n:
        chunk = os.read(fd, n - len(out))
        if not chunk:
            raise EOFError("host closed the channel")
        out += chunk
    return out


def _frame_in_blocking() -> dict[str, Any]:
    (size,) = struct.unpack(">I", _read_exact(0, 4))
    if size > _MAX_FRAME:
        raise ValueError("frame too large")
    obj = json.loads(_read_exact(0, size).decode("utf-8"))
    if not isinstance(obj, dict):
        raise ValueError("frame is not an object")
    return obj


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


def _bpf(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("HBBI", code, jt, jf, k & 0xFFFFFFFF)


def _seccomp_program(pid: int) -> bytes:
    """Build the BPF filter. Layout: a list of small self-contained blocks, each ending in
    a RET, so every jump is short and forward."""
    ld_w_abs, jeq, jge, jset, ret = 0x20, 0x15, 0x35, 0x45, 0x06
    allow, kill = 0x7FFF0000, 0x80000000

    def errno_(e: int) -> int:
        return 0x00050000 | e

    arg0_lo = 16  # offsetof(struct seccomp_data, args[0]) (little-endian low word)
    prog = [
        _bpf(ld_w_abs, 0, 0, 4),  # A = arch
        _bpf(jeq, 1, 0, _AUDIT_ARCH_X86_64),
        _bpf(ret, 0, 0, kill),  # foreign ABI (i386 int 0x80 etc.): kill
        _bpf(ld_w_abs, 0, 0, 0),  # A = syscall nr
        _bpf(jge, 0, 1, 0x40000000),
        _bpf(ret, 0, 0, errno_(errno.EPERM)),  # x32 ABI numbers
    ]
    for nr in sorted(set(_X86_64_DENY.values())):
        prog += [_bpf(jeq, 0, 1, nr), _bpf(ret, 0, 0, errno_(errno.EPERM))]
    # clone3 hides its flags in memory BPF cannot read: ENOSYS makes libc fall back to
    # clone, whose flags we can check.
    prog += [_bpf(jeq, 0, 1, _NR_CLONE3), _bpf(ret, 0, 0, errno_(errno.ENOSYS))]
    # clone: only threads (CLONE_THREAD) are allowed, never a new process.
    prog += [
        _bpf(jeq, 0, 4, _NR_CLONE),
        _bpf(ld_w_abs, 0, 0, arg0_lo),
        _bpf(jset, 0, 1, _CLONE_THREAD),
        _bpf(ret, 0, 0, allow),
        _bpf(ret, 0, 0, errno_(errno.EPERM)),
    ]
    # socketpair: only AF_UNIX (asyncio's self-pipe); socket() is denied above entirely,
    # so nothing can connect to the network or to a filesystem socket.
    prog += [
        _bpf(jeq, 0, 4, _NR_SOCKETPAIR),
        _bpf(ld_w_abs, 0, 0, arg0_lo),
        _bpf(jeq, 0, 1, _AF_UNIX),
        _bpf(ret, 0, 0, allow),
        _bpf(ret, 0, 0, errno_(errno.EPERM)),
    ]
    # kill / tgkill / prlimit64 only on ourselves: other workers run as the same uid.
    for nr, self_values in (
        (_NR_KILL, (pid, 0)),
        (_NR_TGKILL, (pid,)),
        (_NR_PRLIMIT64, (pid, 0)),
    ):
        n = len(self_values)
        block = [_bpf(jeq, 0, n + 2, nr), _bpf(ld_w_abs, 0, 0, arg0_lo)]
        for i, value in enumerate(self_values):
            block.append(_bpf(jeq, n - i, 0, value))
        block += [_bpf(ret, 0, 0, errno_(errno.EPERM)), _bpf(ret, 0, 0, allow)]
        prog += block
    prog.append(_bpf(ret, 0, 0, allow))
    return b"".join(prog)


def _install_seccomp(libc: ctypes.CDLL, layers: list[str], missing: list[str]) -> None:
    if sys.platform != "linux" or platform.machine() != "x86_64":
        missing.append(f"seccomp (filter only written for linux/x86_64, not {platform.machine()})")
        return
    raw = _seccomp_program(os.getpid())
    count = len(raw) // 8
    buf = ctypes.create_string_buffer(raw, len(raw))

    class _SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    prog = _SockFprog(count, ctypes.cast(buf, ctypes.c_void_p))
    # SECCOMP_SET_MODE_FILTER=1 with SECCOMP_FILTER_FLAG_TSYNC=1: apply to every thread
    # (V8 / mini-racer threads already exist in the JavaScript worker).
    rc = libc.syscall(_NR_SECCOMP, 1, 1, ctypes.byref(prog))
    if rc != 0:
        err = ctypes.get_errno()
        missing.append(f"seccomp ({os.strerror(err)})")
        return
    layers.append("seccomp(no exec/fork/socket/ptrace/mount/kill-others)")


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
    _install_seccomp(libc, layers, missing)
    return layers, missing


# ----------------------------------------------------------------------- audit hook


def _install_audit_hook(language: str) -> None:
    """Extra (non-security-boundary) layer: refuse dangerous operations at Python level.

    CPython audit hooks cannot be removed, but a determined attacker inside the same
    interpreter may still corrupt memory; the OS layers above are the real boundary.
    """
    deny_prefixes: tuple[str, ...] = (
        "os.system",
        "os.exec",
        "os.posix_spawn",
        "os.spawn",
        "os.fork",
        "os.forkpty",
        "os.kill",
        "os.killpg",
        "os.putenv",
        "os.unsetenv",
        "os.chdir",
        "os.chmod",
        "os.chown",
        "os.chroot",
        "os.link",
        "os.symlink",
        "os.truncate",
        "os.startfile",
        "subprocess.",
        "pty.",
        "socket.",
        "resource.",
        "signal.pthread_kill",
        "mmap.",
        "gc.get_",
        "sys._current_frames",
        "sys.addaudithook",
        "_posixsubprocess",
        "fcntl.",
        "syslog.",
        "webbrowser.",
        "urllib.Request",
        "ftplib.",
        "smtplib.",
        "telnetlib.",
        "http.client.",
    )
    if language == "python":
        # mini-racer drives V8 through ctypes, so only the Python worker can refuse it.
        deny_prefixes += ("ctypes.", "code.__new__", "marshal.")
    allow_imports = _PY_IMPORT_ALLOW

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if event.startswith(deny_prefixes):
            raise PermissionError(f"sandbox: {event} is not allowed")
        if event == "open":
            path = args[0] if args else None
            mode = args[1] if len(args) > 1 else "r"
            # Only relative paths inside the (chrooted) working directory.
            if not isinstance(path, str) or path.startswith("/") or ".." in path.split("/"):
                raise PermissionError(f"sandbox: open({path!r}) is not allowed")
            del mode
        elif event in ("os.remove", "os.rename", "os.rmdir", "os.mkdir", "os.scandir"):
            path = args[0] if args else None
            if not isinstance(path, str) or path.startswith("/"):
                raise PermissionError(f"sandbox: {event}({path!r}) is not allowed")
        elif event == "import":
            name = args[0] if args else ""
            if isinstance(name, str) and name.split(".")[0] not in allow_imports:
                raise PermissionError(f"sandbox: import of {name!r} is not allowed")

    sys.addaudithook(hook)


# ------------------------------------------------------------------------ job runtime


class _BoundedSink:
    """Replacement for sys.stdout/sys.stderr: keeps at most ``limit`` characters."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.parts: list[str] = []
        self.size = 0

    def write(self, s: str) -> int:
        if self.size < self.limit:
            piece = str(s)[: self.limit - self.size]
            self.parts.append(piece)
            self.size += len(piece)
        return len(s)

    def flush(self) -> None:
        """Nothing to flush: data stays in memory."""


class _Channel:
    """Async side of the protocol while a job runs: fetch requests and replies."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.buf = b""
        self.pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self.next_id = 0
        os.set_blocking(0, False)
        loop.add_reader(0, self._on_readable)

    def _on_readable(self) -> None:
        try:
            chunk = os.read(0, 65536)
        except BlockingIOError:
            return
        if not chunk:
            self.loop.remove_reader(0)
            for fut in self.pending.values():
                if not fut.done():
                    fut.set_exception(EOFError("host closed the channel"))
            return
        self.buf += chunk
        while len(self.buf) >= 4:
            (size,) = struct.unpack(">I", self.buf[:4])
            if len(self.buf) < 4 + size:
                break
            body, self.buf = self.buf[4 : 4 + size], self.buf[4 + size :]
            msg = json.loads(body.decode("utf-8"))
            waiter = self.pending.pop(int(msg.get("id", -1)), None)
            if waiter is not None and not waiter.done():
                waiter.set_result(msg)

    async def fetch(self, request: dict[str, Any]) -> dict[str, Any]:
        self.next_id += 1
        rid = self.next_id
        fut: asyncio.Future[dict[str, Any]] = self.loop.create_future()
        self.pending[rid] = fut
        _frame_out({"t": "fetch", "id": rid, **request})
        return await fut


def _truncate(text: str, limit: int) -> tuple[str, bool]:
    data = text.encode("utf-8", "replace")
    if len(data) <= limit:
        return text, False
    return data[:limit].decode("utf-8", "ignore"), True


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
        if name.split(".")[0] not in _PY_IMPORT_ALLOW:
            raise ImportError(f"sandbox: import of {name!r} is not allowed")
        return real_import(name, *args, **kwargs)

    for name in ("open", "input", "breakpoint", "help", "exit", "quit", "copyright"):
        safe.pop(name, None)
    safe["__import__"] = guarded_import
    namespace: dict[str, Any] = {"__builtins__": safe, "__name__": "__action__"}
    exec(compiled, namespace)
    fn_obj: Callable[..., Any] = namespace["__action__"]
    return fn_obj


async def _run_python(job: dict[str, Any], channel: _Channel) -> str:
    params = _FrozenParams({str(k): str(v) for k, v in dict(job["params"]).items()})

    async def fetch(url: object, options: object = None) -> _Response:
        reply = await channel.fetch(_fetch_request(url, options))
        if reply.get("error"):
            raise RuntimeError(str(reply["error"]))
        return _Response(int(reply["status"]), dict(reply.get("headers") or {}), reply["body"])

    fn = _compile_python(str(job["code"]))
    return _encode_result(await fn(params, fetch))


_JS_PRELUDE = r"""
(function (raw, paramsJson) {
  const params = Object.freeze(JSON.parse(paramsJson));
  async function fetch(url, options) {
    const o = options || {};
    const reply = JSON.parse(await raw(JSON.stringify({
      url: String(url), method: String(o.method || 'GET').toUpperCase(),
      headers: o.headers || {},
      body: o.body === undefined || o.body === null ? null : String(o.body)
    })));
    if (reply.error) { throw new Error(reply.error); }
    const body = reply.body;
    return Object.freeze({
      status: reply.status, ok: reply.status >= 200 && reply.status < 300,
      headers: Object.freeze(reply.headers || {}),
      text: async () => body, json: async () => JSON.parse(body)
    });
  }
  const fixed = {writable: false, configurable: false};
  Object.defineProperty(globalThis, 'params', Object.assign({value: params}, fixed));
  Object.defineProperty(globalThis, 'fetch', Object.assign({value: fetch}, fixed));
  // console exists in the seed's Node VM; here its output is discarded.
  const noop = function () {};
  const con = Object.freeze({log: noop, info: noop, warn: noop, error: noop, debug: noop});
  Object.defineProperty(globalThis, 'console', Object.assign({value: con}, fixed));
})
"""

_JS_ENCODE = r"""
(function (v) {
  if (v === undefined || v === null) { return 'Done'; }
  if (typeof v === 'string') { return v; }
  try { const s = JSON.stringify(v); return s === undefined ? String(v) : s; }
  catch (e) { return String(v); }
})
"""


async def _new_isolate() -> Any:
    # Created inside our event loop so that mini-racer uses it (instead of a thread of its
    # own), and before the per-job memory rlimits: V8 reserves its code range up front.
    from py_mini_racer import MiniRacer

    return MiniRacer()


async def _run_javascript(job: dict[str, Any], channel: _Channel, mr: Any) -> str:
    mr.set_hard_memory_limit(int(job["memory_mb"]) * 1024 * 1024)

    async def raw_fetch(*args: Any) -> str:
        payload = json.loads(str(args[0]))
        reply = await channel.fetch(payload)
        if reply.get("error"):
            return json.dumps({"error": str(reply["error"])})
        return json.dumps(
            {"status": reply["status"], "headers": reply.get("headers"), "body": reply["body"]}
        )

    async with mr.wrap_py_function(raw_fetch) as js_fetch:
        installer: Any = mr.eval(_JS_PRELUDE)
        installer(js_fetch, json.dumps({str(k): str(v) for k, v in dict(job["params"]).items()}))
        source = (
            "(async function () { const __encode = "
            + _JS_ENCODE
            + "; return __encode(await (async function (params, fetch) {\n"
            + str(job["code"])
            + "\n}).call(undefined, globalThis.params, globalThis.fetch)); })()"
        )
        promise: Any = mr.eval(source)
        value = await promise
    return str(value)


def main() -> None:
    """Entry point of the worker script."""
    language, workdir = sys.argv[1], sys.argv[2]
    _close_inherited_fds()
    # /proc must be read before the chroot: statm is used for the memory budget.
    statm = os.open("/proc/self/statm", os.O_RDONLY)
    if language == "python":
        for name in _PY_PRELOAD:
            with contextlib.suppress(ImportError):
                __import__(name)
    try:
        layers, missing = _harden(language, workdir)
    except Exception as exc:  # pragma: no cover - reported to the host
        _frame_out({"t": "fatal", "error": f"sandbox setup failed: {exc!r}"})
        os._exit(3)
    # The event loop (and its AF_UNIX self-pipe) exists before the audit hook and before
    # any untrusted input.
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    isolate = loop.run_until_complete(_new_isolate()) if language == "javascript" else None
    layers.append("python-audit-hook")
    _frame_out({"t": "ready", "layers": layers, "missing": missing})

    job = _frame_in_blocking()
    limit = int(job["max_output_bytes"])
    sink = _BoundedSink(limit)
    sys.stdout = sys.stderr = sink
    _apply_job_limits(job, language, statm)
    channel = _Channel(loop)
    # Installed last, right before the untrusted code is compiled and run.
    _install_audit_hook(language)
    try:
        if language == "python":
            output = loop.run_until_complete(_run_python(job, channel))
        else:
            output = loop.run_until_complete(_run_javascript(job, channel, isolate))
        text, truncated = _truncate(output, limit)
        _frame_out({"t": "result", "ok": True, "output": text, "truncated": truncated})
    except MemoryError:
        _frame_out({"t": "result", "ok": False, "error": "MemoryError: memory limit exceeded"})
    except BaseException as exc:
        message, _ = _truncate(f"{type(exc).__name__}: {exc}", 4096)
        _frame_out({"t": "result", "ok": False, "error": message})
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
