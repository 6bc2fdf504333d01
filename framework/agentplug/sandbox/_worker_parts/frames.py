"""The worker's side of the frame protocol: blocking reads and writes on fd 0 and fd 1.

Part of the sandbox worker (see ``agentplug/sandbox/_worker.py``), loaded by the worker script
as the top-level package ``_worker_parts`` before it confines itself: standard library only,
and relative imports only, so that it never loads agentplug.
"""

from __future__ import annotations

import json
import os
import struct
from collections.abc import Mapping
from typing import Any

__all__ = ["frame_in_blocking", "frame_out"]

_MAX_FRAME = 64 * 1024 * 1024


def frame_out(obj: Mapping[str, Any]) -> None:
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


def frame_in_blocking() -> dict[str, Any]:
    """Read one protocol frame from fd 0 (blocking); it must be a JSON object."""
    (size,) = struct.unpack(">I", _read_exact(0, 4))
    if size > _MAX_FRAME:
        raise ValueError("frame too large")
    obj = json.loads(_read_exact(0, size).decode("utf-8"))
    if not isinstance(obj, dict):
        raise ValueError("frame is not an object")
    return obj
