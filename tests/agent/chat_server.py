"""A real OpenAI-compatible chat-completions server on 127.0.0.1 for the tests.

Each request pops the next scripted answer: ``(status, body, headers)`` where ``body``
is a dict (sent as JSON), ``bytes`` (sent as is), ``"hang"`` (the handler waits until
the server stops), a :class:`Drip` (headers at once, then the body one byte per
interval), an :class:`Unsized` body (no content-length: the body ends when the server
closes), or a function of the recorded request returning one of those (a server that
echoes what it received). Every request's path, headers, JSON body and size in bytes are
recorded; a client that gives up mid-body is counted in ``aborted`` (``sent`` holds the
body bytes each answer managed to write). With ``strict`` set, a request whose messages
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

            def _answer(self, status: int, answer: Any, headers: dict[str, str]) -> None:
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
