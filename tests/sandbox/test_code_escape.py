"""Known Python sandbox-escape techniques must have no effect outside the sandbox.

Every test asserts on real effects: the secret file's content and the host environment
secret never come back, canary files stay absent, the counting TCP server sees no
connection, runs stuck past their limit are killed with the documented error, and no
worker process is left behind.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from agentplug.sandbox import CodeSandbox, SandboxResult

TIME_LIMIT_S = 1.5
# What the sandbox reports when it kills a run at its time limit (asserted instead of how
# long the run took: a loaded machine kills late, and a late kill is still a kill).
TIME_LIMIT_ERROR = f"timed out after {TIME_LIMIT_S:g}s (the sandbox process was killed)"

# Prefixes that give the code the worker's module globals (real os, sys, ctypes, builtins).
VIA_PARAMS_GLOBALS = "g = type(params).__init__.__globals__\n"
VIA_TRACEBACK = """
try:
    raise ValueError
except ValueError as exc:
    f = exc.__traceback__.tb_frame
while f.f_back is not None:
    f = f.f_back
g = f.f_globals
"""
VIA_GENERATOR = """
def gen():
    yield it.gi_frame.f_back
it = gen()
frame = next(it)
while frame.f_back is not None:
    frame = frame.f_back
g = frame.f_globals
"""


def run(sandbox: CodeSandbox, code: str, **kwargs: object) -> SandboxResult:
    """Run ``code`` with the targets' paths available as params."""
    params = kwargs.pop("params", {})
    assert isinstance(params, dict)
    return asyncio.run(
        sandbox.run(code, params, timeout_s=kwargs.pop("timeout_s", TIME_LIMIT_S), **kwargs)  # type: ignore[arg-type]
    )


# Same values as in conftest.py (kept literal: test modules cannot import conftest).
FILE_SECRET = "agentplug-file-secret-1b8e44"
HOST_ENV_SECRET = "agentplug-env-secret-7f3a9c"


def leaked(result: SandboxResult) -> bool:
    """Whether anything secret reached the host through the result."""
    text = f"{result.output}\n{result.error}"
    return FILE_SECRET in text or HOST_ENV_SECRET in text


@pytest.fixture
def p(targets: Any) -> Iterator[dict[str, str]]:
    """Params pointing at the targets; checks the canary and server after the test."""
    assert (targets.file_secret, targets.env_secret) == (FILE_SECRET, HOST_ENV_SECRET)
    before = len(targets.connections)
    yield {
        "secret": str(targets.secret_file),
        "canary": str(targets.canary),
        "port": str(targets.server_port),
        "host_pid": str(os.getpid()),
    }
    assert not targets.canary.exists(), "canary was created: the escape had an effect"
    assert len(targets.connections) == before, "the test server saw a connection"


# --------------------------------------------------------------- reading secrets


def test_open_secret_file_by_path_is_not_possible(sandbox: CodeSandbox, p: dict[str, str]) -> None:
    r = run(sandbox, "return open(params['secret']).read()", params=p)
    assert not r.ok and not leaked(r)


def test_builtins_open_recovered_from_worker_globals_cannot_read(
    sandbox: CodeSandbox, p: dict[str, str]
) -> None:
    code = VIA_PARAMS_GLOBALS + "return g['__builtins__'].open(params['secret']).read()"
    r = run(sandbox, code, params=p)
    assert not r.ok and not leaked(r)


def test_io_fileio_from_subclasses_cannot_read(sandbox: CodeSandbox, p: dict[str, str]) -> None:
    code = (
        "cls = [c for c in ().__class__.__mro__[-1].__subclasses__() if c.__name__ == 'FileIO']\n"
        "return cls[0](params['secret']).read().decode()"
    )
    r = run(sandbox, code, params=p)
    assert not r.ok and not leaked(r)


def test_os_open_via_traceback_frames_cannot_read(sandbox: CodeSandbox, p: dict[str, str]) -> None:
    code = VIA_TRACEBACK + (
        "os = g['os']\nfd = os.open(params['secret'], os.O_RDONLY)\nreturn os.read(fd, 100)"
    )
    r = run(sandbox, code, params=p)
    assert not r.ok and not leaked(r)


def test_host_file_invisible_even_without_the_audit_hook_path(
    sandbox: CodeSandbox, p: dict[str, str]
) -> None:
    # os.listdir has no audit veto here; the chroot alone must hide the host tree.
    code = VIA_GENERATOR + "return g['os'].listdir('/')"
    r = run(sandbox, code, params=p)
    assert r.ok, r.error
    assert "etc" not in r.output and "tmp" not in r.output and "proc" not in r.output


def test_host_environment_is_not_visible(sandbox: CodeSandbox, p: dict[str, str]) -> None:
    code = VIA_PARAMS_GLOBALS + "return sorted(g['os'].environ)"
    r = run(sandbox, code, params=p)
    assert r.ok, r.error
    # Started with an empty environment; CPython itself only adds LC_CTYPE (PEP 538).
    assert set(json.loads(r.output)) <= {"LC_CTYPE"}
    assert not leaked(r)


def test_host_process_environ_in_proc_is_unreachable(
    sandbox: CodeSandbox, p: dict[str, str]
) -> None:
    code = VIA_PARAMS_GLOBALS + (
        "os = g['os']\n"
        "fd = os.open('/proc/' + params['host_pid'] + '/environ', os.O_RDONLY)\n"
        "return os.read(fd, 100000)"
    )
    r = run(sandbox, code, params=p)
    assert not r.ok and not leaked(r)


def test_gc_get_objects_finds_nothing_of_the_host(sandbox: CodeSandbox, p: dict[str, str]) -> None:
    code = VIA_PARAMS_GLOBALS + (
        "gc = g['sys'].modules['gc']\nreturn repr([o for o in gc.get_objects()][:100000])"
    )
    r = run(sandbox, code, params=p)
    assert not leaked(r)


def test_chroot_breakout_sequence_fails(sandbox: CodeSandbox, p: dict[str, str]) -> None:
    code = VIA_PARAMS_GLOBALS + (
        "os = g['os']\n"
        "os.mkdir('x')\n"
        "os.chroot('x')\n"
        "for _ in range(20):\n    os.chdir('..')\n"
        "os.chroot('.')\n"
        "return open(params['secret']).read()"
    )
    r = run(sandbox, code, params=p)
    assert not r.ok and not leaked(r)


# ------------------------------------------------------------- spawning processes


def test_dunder_import_os_system_is_blocked(sandbox: CodeSandbox, p: dict[str, str]) -> None:
    r = run(sandbox, "__import__('os').system('touch ' + params['canary'])", params=p)
    assert not r.ok


def test_subclasses_walk_to_os_wrap_close_system(sandbox: CodeSandbox, p: dict[str, str]) -> None:
    code = (
        "for c in ().__class__.__mro__[-1].__subclasses__():\n"
        "    if c.__name__ == '_wrap_close':\n"
        "        return c.__init__.__globals__['system']('touch ' + params['canary'])\n"
        "return 'not found'"
    )
    r = run(sandbox, code, params=p)
    assert not r.ok or r.output == "not found"


def test_catch_warnings_builtins_recovery_then_import(
    sandbox: CodeSandbox, p: dict[str, str]
) -> None:
    code = (
        "for c in object.__subclasses__():\n"
        "    if c.__name__ == 'catch_warnings':\n"
        "        b = c()._module.__builtins__\n"
        "        os = b['__import__']('os')\n"
        "        return os.popen('cat ' + params['secret']).read()\n"
        "return 'not found'"
    )
    r = run(sandbox, code, params=p)
    assert not leaked(r)
    assert not r.ok or r.output == "not found"


def test_os_system_via_generator_frame_globals(sandbox: CodeSandbox, p: dict[str, str]) -> None:
    r = run(sandbox, VIA_GENERATOR + "g['os'].system('touch ' + params['canary'])", params=p)
    assert not r.ok


def test_os_execv_is_blocked(sandbox: CodeSandbox, p: dict[str, str]) -> None:
    code = VIA_PARAMS_GLOBALS + "g['os'].execv('/bin/touch', ['touch', params['canary']])"
    r = run(sandbox, code, params=p)
    assert not r.ok


def test_os_posix_spawn_is_blocked(sandbox: CodeSandbox, p: dict[str, str]) -> None:
    code = VIA_PARAMS_GLOBALS + (
        "g['os'].posix_spawn('/bin/touch', ['touch', params['canary']], {})"
    )
    r = run(sandbox, code, params=p)
    assert not r.ok


def test_subprocess_and_pty_cannot_be_imported(sandbox: CodeSandbox, p: dict[str, str]) -> None:
    for module in ("subprocess", "pty", "importlib", "pickle", "code", "ctypes", "socket"):
        r = run(sandbox, f"import {module}\nreturn 'imported'", params=p)
        assert not r.ok, module


def test_subprocess_import_through_real_builtins_is_blocked(
    sandbox: CodeSandbox, p: dict[str, str]
) -> None:
    code = VIA_TRACEBACK + (
        "sp = g['__builtins__'].__import__('subprocess')\nsp.run(['touch', params['canary']])"
    )
    r = run(sandbox, code, params=p)
    assert not r.ok


def test_ctypes_libc_system_is_blocked(sandbox: CodeSandbox, p: dict[str, str]) -> None:
    code = VIA_PARAMS_GLOBALS + (
        "ctypes = g['ctypes']\n"
        "libc = ctypes.CDLL('libc.so.6')\n"
        "return libc.system(('touch ' + params['canary']).encode())"
    )
    r = run(sandbox, code, params=p)
    assert not r.ok


def test_pickle_gadget_is_blocked(sandbox: CodeSandbox, p: dict[str, str]) -> None:
    code = VIA_PARAMS_GLOBALS + (
        "b = g['__builtins__']\n"
        "pickle = b.__import__('pickle')\n"
        "payload = b\"cos\\nsystem\\n(S'touch \" + params['canary'].encode() + b\"'\\ntR.\"\n"
        "return pickle.loads(payload)"
    )
    r = run(sandbox, code, params=p)
    assert not r.ok


def test_os_fork_is_blocked(sandbox: CodeSandbox, p: dict[str, str]) -> None:
    code = VIA_PARAMS_GLOBALS + (
        "os = g['os']\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    open(params['canary'], 'w').write('x')\n"
        "return pid"
    )
    r = run(sandbox, code, params=p)
    assert not r.ok


def test_fork_bomb_leaves_no_process_behind(
    p: dict[str, str], forked_copies: Callable[[], set[int]]
) -> None:
    async def main() -> SandboxResult:
        async with CodeSandbox(pool_size=0) as box:
            return await box.run(
                VIA_PARAMS_GLOBALS + "os = g['os']\nwhile True:\n    os.fork()",
                p,
                timeout_s=TIME_LIMIT_S,
            )

    r = asyncio.run(main())
    assert not r.ok
    assert forked_copies() == set()


def test_kill_cannot_hit_processes_of_the_same_uid_or_the_host(
    sandbox: CodeSandbox, p: dict[str, str]
) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to start a bystander process as the sandbox's uid")
    bystander = subprocess.Popen(["sleep", "30"], user=65534, group=65534)
    try:
        code = VIA_PARAMS_GLOBALS + (
            "os = g['os']\n"
            "for target in (-1, int(params['bystander']), int(params['host_pid'])):\n"
            "    try:\n        os.kill(target, 9)\n    except Exception:\n        pass\n"
            "    try:\n        g['sys'].modules['posix'].kill(target, 9)\n"
            "    except Exception:\n        pass\n"
            "return 'tried'"
        )
        r = run(sandbox, code, params={**p, "bystander": str(bystander.pid)})
        assert r.ok and r.output == "tried"
        time.sleep(0.2)
        assert bystander.poll() is None, "a process of the sandbox's uid was killed"
    finally:
        bystander.kill()
        bystander.wait()


# -------------------------------------------------------------------- networking


def test_tcp_connection_to_host_server_is_impossible(
    sandbox: CodeSandbox, p: dict[str, str]
) -> None:
    code = VIA_PARAMS_GLOBALS + (
        "socket = g['sys'].modules['socket']\n"
        "s = socket.create_connection(('127.0.0.1', int(params['port'])), timeout=1)\n"
        "return 'connected'"
    )
    r = run(sandbox, code, params=p)
    assert not r.ok


def test_raw_socket_syscall_is_denied_below_the_audit_hook(
    sandbox: CodeSandbox, p: dict[str, str]
) -> None:
    # _socket.socket() raises the audit event too; ctypes would bypass the hook but is
    # itself refused, so the seccomp filter stands behind both.
    code = VIA_PARAMS_GLOBALS + (
        "_socket = g['sys'].modules['_socket']\n"
        "s = _socket.socket(_socket.AF_INET, _socket.SOCK_RAW, 1)\n"
        "return 'raw socket'"
    )
    r = run(sandbox, code, params=p)
    assert not r.ok


def test_asyncio_open_connection_to_host_server_is_impossible(
    sandbox: CodeSandbox, p: dict[str, str]
) -> None:
    code = (
        "import asyncio\n"
        "reader, writer = await asyncio.open_connection('127.0.0.1', int(params['port']))\n"
        "return 'connected'"
    )
    r = run(sandbox, code, params=p)
    assert not r.ok


# ------------------------------------------------------------ time and resources


def test_busy_loop_is_killed_at_the_limit(sandbox: CodeSandbox, p: dict[str, str]) -> None:
    r = run(sandbox, "while True:\n    pass", params=p)
    assert r.timed_out and not r.ok
    assert r.error == TIME_LIMIT_ERROR


def test_ignoring_sigterm_does_not_survive_the_limit(
    sandbox: CodeSandbox, p: dict[str, str]
) -> None:
    code = VIA_PARAMS_GLOBALS + (
        "signal = g['signal']\n"
        "for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGXCPU):\n"
        "    signal.signal(s, signal.SIG_IGN)\n"
        "while True:\n    pass"
    )
    r = run(sandbox, code, params=p)
    assert r.timed_out
    assert r.error == TIME_LIMIT_ERROR


def test_async_loop_that_never_returns_is_killed(sandbox: CodeSandbox, p: dict[str, str]) -> None:
    code = "import asyncio\nwhile True:\n    await asyncio.sleep(0)"
    r = run(sandbox, code, params=p)
    assert r.timed_out
    assert r.error == TIME_LIMIT_ERROR


def test_awaiting_forever_is_killed(sandbox: CodeSandbox, p: dict[str, str]) -> None:
    r = run(sandbox, "import asyncio\nawait asyncio.Event().wait()", params=p)
    assert r.timed_out
    assert r.error == TIME_LIMIT_ERROR


def test_huge_memory_allocation_fails(sandbox: CodeSandbox, p: dict[str, str]) -> None:
    r = run(sandbox, "x = bytearray(8 * 1024 ** 3)\nreturn len(x)", params=p, memory_mb=64)
    assert not r.ok
    assert "memory" in (r.error or "").lower()


def test_raising_rlimits_back_does_not_give_more_memory(
    sandbox: CodeSandbox, p: dict[str, str]
) -> None:
    code = VIA_PARAMS_GLOBALS + (
        "resource = g['resource']\n"
        "try:\n"
        "    resource.setrlimit(resource.RLIMIT_AS, (-1, -1))\n"
        "except Exception:\n"
        "    pass\n"
        "return len(bytearray(2 * 1024 ** 3))"
    )
    r = run(sandbox, code, params=p, memory_mb=64)
    assert not r.ok
    assert r.output != str(2 * 1024**3)


def test_huge_output_is_bounded(sandbox: CodeSandbox, p: dict[str, str]) -> None:
    r = run(sandbox, "return 'x' * (20 * 1024 * 1024)", params=p, max_output_bytes=1000)
    assert r.ok and r.truncated
    assert r.output.startswith("x" * 1000)
    assert len(r.output) < 1100


def test_printing_a_lot_does_not_flood_the_host(sandbox: CodeSandbox, p: dict[str, str]) -> None:
    r = run(sandbox, "for _ in range(200000):\n    print('y' * 100)\nreturn 'ok'", params=p)
    assert r.ok and r.output == "ok"


def test_writing_to_the_protocol_fd_cannot_forge_a_success_elsewhere(
    sandbox: CodeSandbox, p: dict[str, str]
) -> None:
    code = VIA_PARAMS_GLOBALS + (
        "os = g['os']\nos.write(1, b'\\xff\\xff\\xff\\xffgarbage')\nreturn 'x'"
    )
    r = run(sandbox, code, params=p)
    assert not r.ok
    assert "protocol" in (r.error or "")


def test_writing_files_outside_is_not_possible(sandbox: CodeSandbox, p: dict[str, str]) -> None:
    code = VIA_PARAMS_GLOBALS + (
        "os = g['os']\n"
        "fd = os.open(params['canary'], os.O_WRONLY | os.O_CREAT, 0o644)\n"
        "os.write(fd, b'x')\n"
        "return 'written'"
    )
    r = run(sandbox, code, params=p)
    assert not r.ok


def test_sys_modules_swap_does_not_leak_into_the_next_run(
    sandbox: CodeSandbox, p: dict[str, str]
) -> None:
    first = run(
        sandbox,
        VIA_PARAMS_GLOBALS + "g['sys'].modules['json'] = None\nreturn g['os'].getpid()",
        params=p,
    )
    second = run(sandbox, "import json\nreturn json.dumps([1])", params=p)
    assert first.ok and second.ok
    assert second.output == "[1]"


def test_each_run_gets_a_fresh_process(sandbox: CodeSandbox, p: dict[str, str]) -> None:
    code = VIA_PARAMS_GLOBALS + "return g['os'].getpid()"
    pids = {run(sandbox, code, params=p).output for _ in range(3)}
    assert len(pids) == 3


def test_disk_use_in_the_working_directory_is_bounded(
    sandbox: CodeSandbox, p: dict[str, str]
) -> None:
    code = VIA_PARAMS_GLOBALS + (
        "os = g['os']\n"
        "written = 0\n"
        "for i in range(200):\n"
        "    fd = os.open('f%d' % i, os.O_WRONLY | os.O_CREAT, 0o600)\n"
        "    os.write(fd, b'x' * (1024 * 1024))\n"
        "    os.close(fd)\n"
        "    written += 1\n"
        "return written"
    )
    r = run(sandbox, code, params=p, timeout_s=10)
    assert not r.ok
    assert "No space left" in (r.error or "") or "File too large" in (r.error or "")
