"""Host side of one job in a worker: frame I/O, the ``fetch`` bridge and the memory watch."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import struct
from typing import Any

from pydantic import ValidationError

from agentplug.sandbox.models import FetchCallable, FetchRequest, FetchResponse
from agentplug.sandbox.process import Worker, encode_frame, rss_bytes

__all__ = ["MAX_FETCH_BODY", "JobRun"]

_MAX_FETCHES_PER_RUN = 32
MAX_FETCH_BODY = 1024 * 1024
_WATCH_INTERVAL_S = 0.05


class JobRun:
    """Host side of one job: frame I/O, fetch bridging, limits."""

    def __init__(
        self,
        worker: Worker,
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
        """Write one frame to the worker; raises TimeoutError at the deadline."""
        data = encode_frame(obj)
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
        rss = rss_bytes(self.worker.proc.pid)
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
        """Answer one ``fetch`` frame of the worker through the host's fetch callable."""
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
                if len(body) > MAX_FETCH_BODY:
                    body = body[:MAX_FETCH_BODY]
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
        """Cancel the fetches still being served."""
        for task in self.fetch_tasks:
            task.cancel()
