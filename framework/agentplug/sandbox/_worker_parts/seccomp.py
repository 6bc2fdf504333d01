"""The worker's seccomp filter: denied syscalls, the BPF program and its installation.

Part of the sandbox worker (see ``agentplug/sandbox/_worker.py``), loaded by the worker script
as the top-level package ``_worker_parts`` before it confines itself: standard library only,
and relative imports only, so that it never loads agentplug.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import struct
import sys

__all__ = ["install_seccomp"]

_CLONE_THREAD = 0x00010000


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


def install_seccomp(libc: ctypes.CDLL, layers: list[str], missing: list[str]) -> None:
    """Install the syscall filter on every thread; the outcome goes to ``layers`` (active)
    or ``missing`` (why not)."""
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
