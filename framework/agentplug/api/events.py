"""``GET /api/events``: the control room's live feed, as server-sent events (:class:`EventHub`).

One stream per open page carries:

* ``approvals``: the whole inbox (pending approvals and the latest settled ones, see
  :func:`~agentplug.services.approvals.feed.approvals_snapshot`), first when the stream
  opens and again after every change. Changes come from the state store's
  ``approvals.feed`` channel, so an approval asked or decided on any gateway sharing the
  store shows up; one watcher per application blocks on the channel (in a thread, in short
  slices) while at least one stream is open;
* ``turn_started`` / ``turn_ended``: a turn of the gateway began / ended (``turn_ended``
  holds its summary and trace, see :class:`~agentplug.agent.turnlog.TurnLog`).

Server-sent events rather than a WebSocket: the feed only flows to the page, browsers
reconnect an ``EventSource`` by themselves, and it is plain HTTP that the login cookie
authenticates like any other ``GET``. Bounds: at most :data:`MAX_STREAMS` streams at once
(429 past it); each has a queue of :data:`QUEUE_SIZE` events, and a stream whose reader
falls that far behind is closed (its page reconnects and starts from a fresh snapshot); a
comment every :data:`KEEPALIVE_S` seconds finds dead connections.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from agentplug.api.responses import error_response
from agentplug.services.approvals.feed import approvals_snapshot
from agentplug.services.approvals.shared import FEED_CHANNEL
from agentplug.store import StateStoreUnavailable

if TYPE_CHECKING:
    from agentplug.gateway import Gateway

__all__ = ["KEEPALIVE_S", "MAX_STREAMS", "QUEUE_SIZE", "SWEEP_S", "EventHub", "sse_frame"]

log = logging.getLogger("agentplug.api")

MAX_STREAMS = 32
"""Event streams open at once (pages, tabs); more are answered 429."""
QUEUE_SIZE = 64
"""Events a stream may fall behind before it is closed."""
KEEPALIVE_S = 10.0
"""Seconds between keep-alive comments on a quiet stream."""
SWEEP_S = 5.0
"""Seconds between two looks at the inbox when nothing notified a change (approvals of a
gateway that died waiting time out without a notification from it)."""
_WATCH_SLICE_S = 0.5
_CLOSE: tuple[str, Any] = ("close", None)
SSE_HEADERS = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
"""Headers of every server-sent event stream of the API."""


def sse_frame(kind: str, data: Any) -> str:
    """One server-sent event: ``event: <kind>`` and its data as one JSON line."""
    return f"event: {kind}\ndata: {json.dumps(data, default=str, separators=(',', ':'))}\n\n"


class EventHub:
    """The live feed of one control API (see the module docstring)."""

    def __init__(self, gateway: Gateway) -> None:
        self.gateway = gateway
        self._queues: set[asyncio.Queue[tuple[str, Any]]] = set()
        self._watcher: asyncio.Task[None] | None = None
        self._unsubscribe_turns: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closed = False
        self._last_approvals: Any = None

    @property
    def streams(self) -> int:
        """Streams open now."""
        return len(self._queues)

    async def stream(self, request: Request) -> Response:
        """``GET /api/events``: the feed as ``text/event-stream``."""
        if self._closed:
            return error_response(503, "the server is stopping")
        if len(self._queues) >= MAX_STREAMS:
            return error_response(
                429, f"{len(self._queues)} event streams are open (the limit is {MAX_STREAMS})"
            )
        queue = self._open()
        try:
            snapshot = await self._snapshot()
        except StateStoreUnavailable as exc:
            self._queues.discard(queue)
            return error_response(503, f"cannot read the approvals: {exc}")
        # The stream opens with the inbox: what was published while the snapshot was
        # read (a turn's start) goes after it, nothing in between is lost.
        early = [queue.get_nowait() for _ in range(queue.qsize())]
        for item in [("approvals", snapshot), *early]:
            try:
                queue.put_nowait(item)
            except asyncio.QueueFull:
                self._end(queue)
                break
        return StreamingResponse(
            self._frames(queue), media_type="text/event-stream", headers=SSE_HEADERS
        )

    async def _frames(self, queue: asyncio.Queue[tuple[str, Any]]) -> AsyncIterator[str]:
        try:
            yield "retry: 1000\n\n"
            while True:
                try:
                    kind, data = await asyncio.wait_for(queue.get(), KEEPALIVE_S)
                except TimeoutError:
                    yield ": keep-alive\n\n"
                    continue
                if kind == "close":
                    return
                yield sse_frame(kind, data)
        finally:
            self._queues.discard(queue)

    def _open(self) -> asyncio.Queue[tuple[str, Any]]:
        queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue(QUEUE_SIZE)
        self._queues.add(queue)
        self._loop = asyncio.get_running_loop()
        if self._unsubscribe_turns is None:
            self._unsubscribe_turns = self.gateway.turns.subscribe(self._turn_heard)
        if self._watcher is None or self._watcher.done():
            self._watcher = asyncio.ensure_future(self._watch())
        return queue

    def publish(self, kind: str, data: Any) -> None:
        """Send an event to every open stream (on the loop); a stream that fell
        :data:`QUEUE_SIZE` events behind is closed instead."""
        for queue in list(self._queues):
            try:
                queue.put_nowait((kind, data))
            except asyncio.QueueFull:
                self._end(queue)

    def _end(self, queue: asyncio.Queue[tuple[str, Any]]) -> None:
        """Close one stream: what it had not read yet is dropped, the close comes next."""
        self._queues.discard(queue)
        while not queue.empty():
            queue.get_nowait()
        queue.put_nowait(_CLOSE)

    def _turn_heard(self, kind: str, row: dict[str, Any]) -> None:
        # Turns may run on another thread's loop (a sync host): hop onto ours.
        loop = self._loop
        if loop is None or loop.is_closed() or not self._queues:
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            self.publish(kind, row)
        else:
            loop.call_soon_threadsafe(self.publish, kind, row)

    async def _snapshot(self) -> dict[str, Any]:
        broker = self.gateway.approvals
        if broker.shared:  # store reads may wait on a lost connection: not on the loop
            return await asyncio.to_thread(approvals_snapshot, broker)
        return approvals_snapshot(broker)

    async def _watch(self) -> None:
        """Publish a new inbox whenever the feed channel moves, while streams are open."""
        store = self.gateway.approvals.store
        seen = await asyncio.to_thread(store.version, FEED_CHANNEL)
        since_sweep = 0.0
        while self._queues and not self._closed:
            try:
                now = await asyncio.to_thread(store.wait_change, FEED_CHANNEL, seen, _WATCH_SLICE_S)
            except Exception as exc:  # a lost store: say nothing new, try again
                log.warning("approvals feed: waiting for changes failed (%s)", exc)
                await asyncio.sleep(_WATCH_SLICE_S)
                continue
            since_sweep += _WATCH_SLICE_S if now == seen else 0.0
            if now == seen and since_sweep < SWEEP_S:
                continue
            # A change, or time to sweep approvals of gateways that died waiting.
            seen, since_sweep = now, 0.0
            try:
                snapshot = await self._snapshot()
            except Exception as exc:
                log.warning("approvals feed: reading the approvals failed (%s)", exc)
                continue
            view = (snapshot["pending"], snapshot["history"])
            if view != self._last_approvals:
                self._last_approvals = view
                self.publish("approvals", snapshot)

    async def aclose(self) -> None:
        """End every stream (their pages see the connection close) and the watcher."""
        self._closed = True
        for queue in list(self._queues):
            self._end(queue)
        if self._unsubscribe_turns is not None:
            self._unsubscribe_turns()
            self._unsubscribe_turns = None
        watcher, self._watcher = self._watcher, None
        if watcher is not None:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await watcher
