"""Job runtime shared by both languages: bounded output sink, fetch channel, truncation.

Part of the sandbox worker (see ``agentplug/sandbox/_worker.py``), loaded by the worker script
as the top-level package ``_worker_parts`` before it confines itself: standard library only,
and relative imports only, so that it never loads agentplug.
"""

from __future__ import annotations

import asyncio
import json
import os
import struct
from typing import Any

from .frames import frame_out

__all__ = ["BoundedSink", "Channel", "truncate"]


class BoundedSink:
    """Replacement for sys.stdout/sys.stderr: keeps at most ``limit`` characters."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.parts: list[str] = []
        self.size = 0

    def write(self, s: str) -> int:
        """Keep what still fits; report everything as written."""
        if self.size < self.limit:
            piece = str(s)[: self.limit - self.size]
            self.parts.append(piece)
            self.size += len(piece)
        return len(s)

    def flush(self) -> None:
        """Nothing to flush: data stays in memory."""


class Channel:
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
        """Send a ``fetch`` frame to the host and wait for its reply."""
        self.next_id += 1
        rid = self.next_id
        fut: asyncio.Future[dict[str, Any]] = self.loop.create_future()
        self.pending[rid] = fut
        frame_out({"t": "fetch", "id": rid, **request})
        return await fut


def truncate(text: str, limit: int) -> tuple[str, bool]:
    """``text`` cut to ``limit`` UTF-8 bytes, and whether it was cut."""
    data = text.encode("utf-8", "replace")
    if len(data) <= limit:
        return text, False
    return data[:limit].decode("utf-8", "ignore"), True
