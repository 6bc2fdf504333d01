"""Transports to MCP servers that read at most ``limit`` bytes of any one message.

The SDK's stdio client glues every 64 KiB chunk onto the line read so far and splits the
whole again, so a 100 MB answer costs minutes of copying, and every later answer of that
server queues behind it: the connection looks dead long after the call timed out.
:func:`stdio_transport` reads lines in linear time and holds at most ``limit`` bytes of
one; a longer message streams by and is dropped, and the request it answers (found by
its id) gets an error at once, so the next call on the connection works.
:func:`http_transport` bounds JSON bodies the same way and SSE events with the SDK's own
``max_sse_event_size``.

Imported only when a connection starts (it imports the ``mcp`` SDK).
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import sys
from collections.abc import AsyncIterator, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx2
import mcp_types as types
from anyio.abc import Process
from mcp import StdioServerParameters
from mcp.client.stdio import get_default_environment, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.os.posix.utilities import terminate_posix_process_tree
from mcp.shared.dispatcher import coerce_request_id
from mcp.shared.jsonrpc_dispatcher import cancelled_request_id_from_params
from mcp.shared.message import SessionMessage

__all__ = ["MessageBound", "http_transport", "stdio_transport"]

log = logging.getLogger("agentplug.agent.mcp")

# (read stream, write stream) as the SDK's Client takes them; its own alias is private
_Streams = tuple[Any, Any]

_HEAD = 4096
_TAIL = 256
_EXIT_GRACE_S = 2.0
# The members a JSON-RPC message opens with (before its first nested value) tell a
# response from a request; its id is there or, when the result comes first, at the end.
_TOKEN = re.compile(rb'"(?:[^"\\]|\\.)*"|[{}\[\]:,]|[^\s{}\[\]:,"]+')
_TRAILING_ID = re.compile(rb'"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*")\s*\}\s*$')


@dataclass(frozen=True)
class MessageBound:
    """At most ``limit`` bytes per message from ``server``; ``key`` is its config key."""

    server: str
    limit: int
    key: str

    @property
    def refusal(self) -> str:
        """What a request whose answer was too long is told (one line)."""
        return (
            f"the answer is over max_message_bytes={self.limit} ({self.key}); it was dropped "
            "unread and the connection stays open"
        )


@dataclass
class _Overlong:
    """A line past the bound: its first and last bytes, and its size so far."""

    head: bytes
    tail: bytes
    size: int
    ended: bool = False
    refused: bool = False


@dataclass
class _Lines:
    """Cuts a byte stream into lines; a line over ``limit`` is kept as head and tail only."""

    limit: int
    _parts: list[bytes] = field(default_factory=list)
    _size: int = 0
    _over: _Overlong | None = None

    def feed(self, chunk: bytes) -> Iterator[bytes | _Overlong]:
        """Complete lines of ``chunk`` (an :class:`_Overlong` when a line crosses the bound
        and again when it ends)."""
        start = 0
        while True:
            end = chunk.find(b"\n", start)
            crossed = self._add(chunk[start:] if end < 0 else chunk[start:end])
            if crossed is not None:
                yield crossed
            if end < 0:
                return
            yield self._finish()
            start = end + 1

    def _add(self, piece: bytes) -> _Overlong | None:
        over = self._over
        if over is not None:
            over.size += len(piece)
            over.tail = (over.tail + piece[-_TAIL:])[-_TAIL:]
            return None
        self._size += len(piece)
        if self._size <= self.limit:
            self._parts.append(piece)
            return None
        joined = b"".join(self._parts) + piece
        self._over = _Overlong(joined[:_HEAD], joined[-_TAIL:], self._size)
        self._parts, self._size = [], 0
        return self._over

    def _finish(self) -> bytes | _Overlong:
        over, self._over = self._over, None
        if over is not None:
            over.ended = True
            return over
        line = b"".join(self._parts)
        self._parts, self._size = [], 0
        return line


def _opening_members(head: bytes) -> dict[bytes, bytes]:
    """The top-level members before the first nested value (raw key -> raw value)."""
    tokens = _TOKEN.findall(head)
    members: dict[bytes, bytes] = {}
    if not tokens or tokens[0] != b"{":
        return members
    index = 1
    while index + 2 < len(tokens) and tokens[index + 1] == b":":
        value = tokens[index + 2]
        if value in (b"{", b"["):
            break
        members[tokens[index]] = value
        if index + 3 >= len(tokens) or tokens[index + 3] != b",":
            break
        index += 4
    return members


def _request_id(raw: bytes | None) -> types.RequestId | None:
    if raw is None:
        return None
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    if isinstance(value, bool) or not isinstance(value, int | str):
        return None
    return coerce_request_id(value)


@dataclass
class _Requests:
    """The ids of the requests sent to the server and not answered yet."""

    ids: set[types.RequestId] = field(default_factory=set)

    def sent(self, message: types.JSONRPCMessage) -> None:
        if isinstance(message, types.JSONRPCRequest):
            self.ids.add(coerce_request_id(message.id))
        elif (
            isinstance(message, types.JSONRPCNotification)
            and message.method == "notifications/cancelled"
        ):
            cancelled = cancelled_request_id_from_params(message.params)
            if cancelled is not None:
                self.ids.discard(coerce_request_id(cancelled))

    def answered(self, message: types.JSONRPCMessage) -> None:
        if (
            isinstance(message, types.JSONRPCResponse | types.JSONRPCError)
            and message.id is not None
        ):
            self.ids.discard(coerce_request_id(message.id))

    def answered_by(self, over: _Overlong) -> types.RequestId | None:
        """The pending request an overlong message answers (``None``: not one of ours).

        While the line streams, only an id in its opening members counts; at its end, an
        id closing it counts too, and failing both the one pending request, if only one is.
        """
        opening = _opening_members(over.head)
        if b'"method"' in opening:
            return None  # a request or notification of the server's, not an answer
        found = _request_id(opening.get(b'"id"'))
        if found is None and over.ended:
            trailing = _TRAILING_ID.search(over.tail)
            found = _request_id(trailing.group(1) if trailing else None)
            if found is None and len(self.ids) == 1:
                found = next(iter(self.ids))
        return found if found in self.ids else None


class _Reader:
    """Turns the server's stdout into session messages, refusing overlong ones."""

    def __init__(
        self, params: StdioServerParameters, bound: MessageBound, requests: _Requests
    ) -> None:
        self.params = params
        self.bound = bound
        self.requests = requests

    def message(self, line: bytes) -> SessionMessage | Exception | None:
        text = line.decode(self.params.encoding, self.params.encoding_error_handler)
        if not text.strip():
            return None
        try:
            message = types.jsonrpc_message_adapter.validate_json(text, by_name=False)
        except ValueError as exc:
            log.warning(
                "MCP server %r sent a line that is not JSON-RPC (%s)", self.bound.server, exc
            )
            return exc
        self.requests.answered(message)
        return SessionMessage(message)

    def refusal(self, over: _Overlong) -> SessionMessage | None:
        if over.ended:
            log.warning(
                "MCP server %r sent a message of %d bytes, over max_message_bytes=%d (%s); "
                "it was dropped",
                self.bound.server,
                over.size,
                self.bound.limit,
                self.bound.key,
            )
        if over.refused:
            return None
        answered = self.requests.answered_by(over)
        if answered is None:
            return None
        over.refused = True
        self.requests.ids.discard(answered)
        error = types.ErrorData(code=types.INTERNAL_ERROR, message=self.bound.refusal)
        return SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=answered, error=error))

    async def run(
        self, process: Process, out: anyio.abc.ObjectSendStream[SessionMessage | Exception]
    ) -> None:
        assert process.stdout is not None
        lines = _Lines(self.bound.limit)
        delivering = True  # after the session goes away, stdout is drained so the server can exit
        with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            async with out:
                async for chunk in process.stdout:
                    for item in lines.feed(chunk):
                        found = (
                            self.message(item) if isinstance(item, bytes) else self.refusal(item)
                        )
                        if found is None or not delivering:
                            continue
                        try:
                            await out.send(found)
                        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                            delivering = False


@contextlib.asynccontextmanager
async def stdio_transport(
    params: StdioServerParameters, bound: MessageBound
) -> AsyncIterator[_Streams]:
    """Start the server of ``params`` and speak to it over stdio (see the module docstring).

    On Windows the SDK's own stdio client is used: it has no message bound.
    """
    if sys.platform == "win32":  # pragma: no cover - the SDK's job objects and pipes
        async with stdio_client(params) as streams:
            yield streams
        return
    process = await anyio.open_process(
        [params.command, *params.args],
        env=get_default_environment() | (params.env or {}),
        stderr=sys.stderr,
        cwd=params.cwd,
        start_new_session=True,
    )
    read_in, read_out = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_in, write_out = anyio.create_memory_object_stream[SessionMessage](0)
    requests = _Requests()

    async def write() -> None:
        assert process.stdin is not None
        try:
            async with write_out:
                async for item in write_out:
                    requests.sent(item.message)
                    text = item.message.model_dump_json(by_alias=True, exclude_unset=True)
                    data = (text + "\n").encode(params.encoding, params.encoding_error_handler)
                    await process.stdin.send(data)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            await read_in.aclose()  # the session sees the end instead of waiting forever

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(_Reader(params, bound, requests).run, process, read_in)
        tasks.start_soon(write)
        try:
            yield read_out, write_in
        finally:
            with anyio.CancelScope(shield=True):
                read_out.close()
                write_in.close()
                await _stop(process)
            tasks.cancel_scope.cancel()


async def _stop(process: Process) -> None:
    """Close stdin, give the server a moment to exit, then end its process group."""
    assert process.stdin is not None
    with contextlib.suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
        await process.stdin.aclose()
    if not await _exited(process):
        await terminate_posix_process_tree(process, _EXIT_GRACE_S)
        await _exited(process)
    with anyio.move_on_after(_EXIT_GRACE_S), contextlib.suppress(Exception):
        await process.aclose()


async def _exited(process: Process) -> bool:
    # Polled: process.wait() also waits for the pipes, which a grandchild may hold open.
    with anyio.move_on_after(_EXIT_GRACE_S):
        while process.returncode is None:
            await anyio.sleep(0.01)
    return process.returncode is not None


class _TooLong(httpx2.StreamError):
    """A JSON body over the bound (caught by the SDK as a failed read of that answer)."""


class _BoundedBody(httpx2.AsyncByteStream):
    def __init__(self, inner: Any, bound: MessageBound) -> None:
        self._inner = inner
        self._bound = bound

    async def __aiter__(self) -> AsyncIterator[bytes]:
        size = 0
        async for chunk in self._inner:
            size += len(chunk)
            if size > self._bound.limit:
                log.warning(
                    "MCP server %r sent an answer over max_message_bytes=%d (%s); it was dropped",
                    self._bound.server,
                    self._bound.limit,
                    self._bound.key,
                )
                raise _TooLong(self._bound.refusal)
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()


class _RefusedBody(httpx2.AsyncByteStream):
    """A body refused before any byte of it is read (a compressed one)."""

    def __init__(self, inner: Any, reason: str) -> None:
        self._inner = inner
        self._reason = reason

    async def __aiter__(self) -> AsyncIterator[bytes]:
        await self._inner.aclose()
        raise _TooLong(self._reason)
        yield b""  # pragma: no cover - makes this an async generator

    async def aclose(self) -> None:
        await self._inner.aclose()


class _BoundedTransport(httpx2.AsyncBaseTransport):
    """Wraps each JSON response body in a :class:`_BoundedBody` (SSE has its own bound)
    and refuses compressed bodies: the bounds count bytes as they arrive, and a few KB
    of gzip inflate to gigabytes before any bound could see them."""

    def __init__(self, inner: httpx2.AsyncBaseTransport, bound: MessageBound) -> None:
        self._inner = inner
        self._bound = bound

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await self._inner.handle_async_request(request)
        encoding = response.headers.get("content-encoding", "").strip().lower()
        if encoding not in ("", "identity"):
            log.warning(
                "MCP server %r sent a %s-encoded answer although asked for identity; refused",
                self._bound.server,
                encoding[:40],
            )
            del response.headers["content-encoding"]
            response.stream = _RefusedBody(
                response.stream,
                f"the answer has content-encoding {encoding[:40]!r} although identity was "
                "asked: compressed answers are refused (they would inflate past "
                f"max_message_bytes before it could be counted; {self._bound.key})",
            )
        elif response.headers.get("content-type", "").lower().startswith("application/json"):
            response.stream = _BoundedBody(response.stream, self._bound)
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()


@contextlib.asynccontextmanager
async def http_transport(
    url: str, headers: Mapping[str, str], timeout_s: float, bound: MessageBound
) -> AsyncIterator[_Streams]:
    """Speak streamable HTTP to ``url``, reading at most ``bound.limit`` bytes per message."""
    # identity: the bound counts bytes on the wire, which a compressed body would multiply
    client = httpx2.AsyncClient(
        headers={"accept-encoding": "identity", **headers},
        timeout=httpx2.Timeout(timeout_s, read=max(timeout_s, 300.0)),
        transport=_BoundedTransport(httpx2.AsyncHTTPTransport(), bound),
    )
    async with (
        client,
        streamable_http_client(url, http_client=client, max_sse_event_size=bound.limit) as streams,
    ):
        yield streams
