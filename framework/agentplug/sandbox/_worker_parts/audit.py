"""The worker's Python-level policy: the importable modules and the audit hook.

Part of the sandbox worker (see ``agentplug/sandbox/_worker.py``), loaded by the worker script
as the top-level package ``_worker_parts`` before it confines itself: standard library only,
and relative imports only, so that it never loads agentplug.
"""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["PY_IMPORT_ALLOW", "PY_PRELOAD", "install_audit_hook"]

# Modules user code may import (Python). They are imported *before* the chroot so that
# importing them later needs no filesystem access; anything else fails to import because
# the chroot hides the standard library and the audit hook refuses new imports.
PY_PRELOAD = (
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
PY_IMPORT_ALLOW = frozenset(m.split(".")[0] for m in PY_PRELOAD) | {"asyncio"}


def install_audit_hook(language: str) -> None:
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
    allow_imports = PY_IMPORT_ALLOW

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
