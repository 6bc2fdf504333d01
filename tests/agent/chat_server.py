"""A real OpenAI-compatible chat-completions server on 127.0.0.1 for the tests.

Each request pops the next scripted answer: ``(status, body, headers)`` where ``body``
is a dict (sent as JSON), ``bytes`` (sent as is), ``"hang"`` (the handler waits until
the server stops), a :class:`Drip` (headers at once, then the body one byte per
interval), an :class:`Unsized` body (no content-length: the body ends when the server
closes), a :class:`Stream` (server-sent events as a streaming chat-completions server
sends them: :meth:`ChatServer.stream_reply`, :meth:`ChatServer.stream_tool_calls`), or
a function of the recorded request returning one of those (a server that
echoes what it received). Every request's path, headers, JSON body and size in bytes are
recorded; a client that gives up mid-body is counted in ``aborted`` (``sent`` holds the
body bytes each answer managed to write). :meth:`ChatServer.fail` and
:meth:`ChatServer.rate_limit` (HTTP 429 with ``Retry-After``) script failures; a
request with no answer left is answered HTTP 500. With ``strict`` set, a request whose messages
break the chat-completions protocol is answered HTTP 400 as OpenAI answers it
(:func:`protocol_errors` says what is checked).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Drip:
    """A body sent one byte every ``interval`` seconds after the headers."""

    data: bytes
    interval: float


@dataclass(frozen=True)
class Unsized:
    """A body sent without a content-length (HTTP/1.0: it ends when the connection closes)."""

    data: bytes


@dataclass(frozen=True)
class Stream:
    """A streamed answer (``text/event-stream``): each event a ``data:`` line (a dict is
    sent as JSON, a string as is), one every ``interval`` seconds, then ``data: [DONE]``
    unless ``done`` is false; with ``hang`` the server then waits (until it stops)
    instead of closing."""

    events: tuple[Any, ...]
    interval: float = 0.0
    done: bool = True
    hang: bool = False


def text_chunks(text: str, size: int = 4) -> list[dict[str, Any]]:
    """Chat-completion chunks streaming ``text`` ``size`` characters at a time."""
    chunks: list[dict[str, Any]] = [
        {"id": "chatcmpl-s", "model": "test-model-2024", "choices": [
            {"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}
        ]}
    ]  # fmt: skip
    for start in range(0, len(text), size):
        piece = text[start : start + size]
        chunks.append({"id": "chatcmpl-s", "choices": [{"index": 0, "delta": {"content": piece}}]})
    return chunks


def tool_call_chunks(
    *calls: tuple[str, Any], call_id: str = "call_s", size: int = 5
) -> list[dict[str, Any]]:
    """Chunks streaming tool calls: each call's id and name once, its arguments in
    ``size``-character fragments (calls interleaved, as parallel calls arrive)."""
    fragments: list[list[str]] = []
    for _name, args in calls:
        text = args if isinstance(args, str) else json.dumps(args)
        fragments.append([text[i : i + size] for i in range(0, len(text), size)] or [""])
    chunks: list[dict[str, Any]] = []
    for index, (name, _args) in enumerate(calls):
        head = {"index": index, "id": f"{call_id}{index}", "type": "function",
                "function": {"name": name, "arguments": ""}}  # fmt: skip
        chunks.append({"choices": [{"index": 0, "delta": {"tool_calls": [head]}}]})
    for step in range(max(len(f) for f in fragments)):
        for index, parts in enumerate(fragments):
            if step < len(parts):
                piece = {"index": index, "function": {"arguments": parts[step]}}
                chunks.append({"choices": [{"index": 0, "delta": {"tool_calls": [piece]}}]})
    return chunks


def finish(reason: str = "stop", usage: Any = None) -> list[dict[str, Any]]:
    """The closing chunks: the finish reason, then (when given) the usage chunk."""
    out: list[dict[str, Any]] = [{"choices": [{"index": 0, "delta": {}, "finish_reason": reason}]}]
    if usage is not None:
        out.append({"choices": [], "usage": usage})
    return out


def protocol_errors(messages: Any) -> list[str]:
    """What OpenAI refuses in a request's ``messages``: an assistant message's tool calls
    must each be answered by exactly one ``tool`` message right after it, and a ``tool``
    message must answer a call of the assistant message before it."""
    errors: list[str] = []
    open_ids: list[str] = []
    answered: set[str] = set()
    for index, message in enumerate(messages if isinstance(messages, list) else []):
        role = message.get("role") if isinstance(message, dict) else None
        if role == "tool":
            call_id = message.get("tool_call_id")
            if call_id not in open_ids or call_id in answered:
                errors.append(f"messages[{index}]: tool message for unknown call {call_id!r}")
            answered.add(str(call_id))
            continue
        missing = [c for c in open_ids if c not in answered]
        if missing:
            errors.append(
                f"messages[{index}]: an assistant message with 'tool_calls' must be followed "
                f"by tool messages responding to each 'tool_call_id' (missing {missing})"
            )
        open_ids, answered = [], set()
        if role == "assistant":
            open_ids = [str(c.get("id")) for c in message.get("tool_calls") or []]
    missing = [c for c in open_ids if c not in answered]
    if missing:
        errors.append(f"the last assistant message's tool calls {missing} are unanswered")
    return errors


class ChatServer:
    def __init__(self) -> None:
        self.answers: list[tuple[int, Any, dict[str, str]]] = []
        self.requests: list[dict[str, Any]] = []
        self.sent: list[int] = []
        """Body bytes written per answer (fewer than the body when the client gave up)."""
        self.aborted = 0
        self.answered = threading.Event()
        """Set each time a handler has finished writing (or given up on) an answer."""
        self.strict = False
        """Answer HTTP 400 to requests that break the protocol (:func:`protocol_errors`)."""
        self.stop = threading.Event()
        self.get_text = "ok"
        """What a GET answers (a stand-in web API for custom http actions)."""
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                server.requests.append({"path": self.path, "headers": {}, "body": None})
                data = server.get_text.encode()
                self.send_response(200)
                self.send_header("content-type", "text/plain")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length)
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = None
                record = {
                    "path": self.path,
                    "headers": {k.lower(): v for k, v in self.headers.items()},
                    "body": body,
                    "size": len(raw),
                }
                server.requests.append(record)
                del raw
                problems = protocol_errors((body or {}).get("messages")) if server.strict else []
                del body
                if problems:
                    invalid = {"message": problems[0], "type": "invalid_request_error"}
                    status, answer, headers = 400, {"error": invalid}, {}
                else:
                    status, answer, headers = (
                        server.answers.pop(0)
                        if server.answers
                        else (500, {"error": "no answer"}, {})
                    )
                if callable(answer):
                    answer = answer(record)
                if isinstance(answer, str) and answer == "hang":
                    server.stop.wait(10)
                    return
                try:
                    self._answer(status, answer, headers)
                except (BrokenPipeError, ConnectionResetError):
                    server.aborted += 1
                finally:
                    server.answered.set()

            def _stream(self, status: int, answer: Stream, headers: dict[str, str]) -> None:
                self.send_response(status)
                self.send_header("content-type", "text/event-stream")
                self.send_header("cache-control", "no-cache")
                for key, value in headers.items():
                    self.send_header(key, value)
                self.end_headers()
                server.sent.append(0)
                lines = [
                    f"data: {e if isinstance(e, str) else json.dumps(e)}\n\n".encode()
                    for e in answer.events
                ]
                if answer.done:
                    lines.append(b"data: [DONE]\n\n")
                for line in lines:
                    if answer.interval and server.stop.wait(answer.interval):
                        return
                    self.wfile.write(line)
                    self.wfile.flush()
                    server.sent[-1] += len(line)
                if answer.hang:
                    server.stop.wait(10)

            def _answer(self, status: int, answer: Any, headers: dict[str, str]) -> None:
                if isinstance(answer, Stream):
                    self._stream(status, answer, headers)
                    return
                if isinstance(answer, Drip | Unsized):
                    data = answer.data
                elif isinstance(answer, bytes):
                    data = answer
                else:
                    data = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                if not isinstance(answer, Unsized):
                    self.send_header("content-length", str(len(data)))
                for key, value in headers.items():
                    self.send_header(key, value)
                self.end_headers()
                server.sent.append(0)
                if isinstance(answer, Drip):
                    for index in range(len(data)):
                        if server.stop.wait(answer.interval):
                            return
                        self.wfile.write(data[index : index + 1])
                        self.wfile.flush()
                        server.sent[-1] += 1
                    return
                step = 1 << 20
                for start in range(0, len(data), step):
                    self.wfile.write(data[start : start + step])
                    server.sent[-1] += len(data[start : start + step])

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.httpd.block_on_close = False
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def base_url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    def reply(self, text: str, *, request_id: str = "req_1", usage: Any = None) -> None:
        body = {
            "id": "chatcmpl-1",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": "stop",
                }
            ],
            "usage": usage or {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7},
        }
        self.answers.append((200, body, {"x-request-id": request_id}))

    def tool_calls(self, *calls: tuple[str, Any], call_id: str = "call_a") -> None:
        body = {
            "id": "chatcmpl-2",
            "choices": [
                {
                    "index": 0,
                    "message": {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [
                            {
                                "id": f"{call_id}{i}",
                                "type": "function",
                                "function": {
                                    "name": name,
                                    "arguments": args
                                    if isinstance(args, str)
                                    else json.dumps(args),
                                },
                            }
                            for i, (name, args) in enumerate(calls)
                        ],
                    },
                    "finish_reason": "tool_calls",
                }
            ],
        }
        self.answers.append((200, body, {}))

    def raw(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        self.answers.append((status, body, headers or {}))

    def stream_reply(
        self, text: str, *, usage: Any = None, size: int = 4, interval: float = 0.0
    ) -> None:
        """A streamed reply of ``text`` (then its usage chunk when given)."""
        events = (*text_chunks(text, size), *finish("stop", usage))
        self.answers.append((200, Stream(events, interval), {"x-request-id": "req_stream"}))

    def stream_tool_calls(
        self, *calls: tuple[str, Any], usage: Any = None, call_id: str = "call_s"
    ) -> None:
        """Streamed tool calls (arguments in fragments), then their usage when given."""
        events = (*tool_call_chunks(*calls, call_id=call_id), *finish("tool_calls", usage))
        self.answers.append((200, Stream(events), {}))

    def fail(
        self,
        status: int = 500,
        message: str = "upstream crashed",
        headers: dict[str, str] | None = None,
    ) -> None:
        """An error answer with an OpenAI-style error body."""
        self.answers.append((status, {"error": {"message": message}}, headers or {}))

    def rate_limit(self, retry_after: str | None = "0", message: str = "slow down") -> None:
        """HTTP 429, with ``Retry-After`` when given."""
        headers = {"retry-after": retry_after} if retry_after is not None else {}
        self.fail(429, message, headers)

    def completion(self, message: dict[str, Any]) -> bytes:
        """The JSON body of a chat completion whose ``choices[0].message`` is ``message``."""
        body = {
            "id": "chatcmpl-3",
            "choices": [{"index": 0, "message": {"role": "assistant", **message}}],
        }
        return json.dumps(body).encode()


@contextmanager
def chat_server() -> Iterator[ChatServer]:
    server = ChatServer()
    server.thread.start()
    try:
        yield server
    finally:
        server.stop.set()
        server.httpd.shutdown()
        server.httpd.server_close()
