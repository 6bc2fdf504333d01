"""Hostile request bodies against a real ``agentplug serve`` (issue 18, items 1 and 2).

A body nested 10 000 deep or holding a 5000-digit integer is a 400 with one line saying
why, one log line and the keep-alive connection kept; a chunked body is streamed and
reading stops at the 1 MiB limit, so a 400 MB upload never reaches the server's memory.
"""

from __future__ import annotations

import select
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

from agentplug.api.routes.base import MAX_BODY_BYTES
from agentplug.config.datafiles import MAX_DEPTH

from .served import WAIT_S, Served, raw_exchange, start_serve

DEEP = b"[" * 10_000 + b"]" * 10_000
DEEP_OBJECT = b'{"a":' * 10_000 + b"1" + b"}" * 10_000
HUGE_INT = b'{"command": ' + b"7" * 5000 + b"}"

ROUTES_WITH_BODIES = [
    ("POST", "/api/terminal/run"),
    ("POST", "/api/plugins/install"),
    ("POST", "/api/custom-actions"),
    ("PUT", "/api/custom-actions/greet"),
    ("POST", "/api/custom-actions/greet/test"),
    ("POST", "/api/approvals/some-id"),
    ("PATCH", "/api/sessions/s1/plugins/p1"),
]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    server = start_serve(tmp_path_factory.mktemp("hostile"), {"customActions": []})
    try:
        yield server
    finally:
        server.stop()


@pytest.mark.parametrize(("method", "path"), ROUTES_WITH_BODIES)
@pytest.mark.parametrize("body", [DEEP, DEEP_OBJECT], ids=["array", "object"])
def test_a_body_nested_10000_deep_is_a_400_that_says_so_and_keeps_the_connection(
    served: Served, method: str, path: str, body: bytes
) -> None:
    refused, after = raw_exchange(served, [(method, path, body), ("GET", "/api/health", b"")])
    assert refused.status == 400
    error = refused.json()["error"]
    assert error == f"request body: JSON nested deeper than {MAX_DEPTH} levels"
    assert "\n" not in error
    assert after.status == 200  # same socket: the keep-alive connection survived


@pytest.mark.parametrize(("method", "path"), ROUTES_WITH_BODIES)
def test_a_5000_digit_integer_is_a_400_number_too_long_and_keeps_the_connection(
    served: Served, method: str, path: str
) -> None:
    refused, after = raw_exchange(served, [(method, path, HUGE_INT), ("GET", "/api/health", b"")])
    assert refused.status == 400
    error = refused.json()["error"]
    assert error.startswith("request body: number too long (5000 characters")
    assert "\n" not in error
    assert after.status == 200


def test_a_refused_body_logs_one_line_and_no_traceback(tmp_path: Path) -> None:
    server = start_serve(tmp_path, {})
    try:
        answers = raw_exchange(
            server,
            [
                ("POST", "/api/terminal/run", DEEP),
                ("POST", "/api/terminal/run", HUGE_INT),
            ],
        )
    finally:
        stderr = server.stop()
    assert [a.status for a in answers] == [400, 400]
    assert "Traceback" not in stderr
    deep = [line for line in stderr.splitlines() if "nested deeper" in line]
    long = [line for line in stderr.splitlines() if "number too long" in line]
    assert len(deep) == 1 and "POST /api/terminal/run answered 400" in deep[0]
    assert len(long) == 1 and "POST /api/terminal/run answered 400" in long[0]


def _chunked_upload(served: Served, total: int, chunk: int = 1 << 20) -> tuple[int, int | None]:
    """Stream ``total`` bytes as a chunked POST; stop once the server answers or closes.

    Returns the bytes sent and the status read (``None`` when the connection was reset
    before an answer could be read).
    """
    sent = 0
    piece = b" " * chunk
    frame = f"{chunk:x}\r\n".encode("ascii") + piece + b"\r\n"
    with socket.create_connection(("127.0.0.1", served.port), timeout=WAIT_S) as sock:
        sock.sendall(
            (
                f"POST /api/terminal/run HTTP/1.1\r\nHost: 127.0.0.1:{served.port}\r\n"
                f"Authorization: Bearer {served.token}\r\nContent-Type: application/json\r\n"
                "Transfer-Encoding: chunked\r\n\r\n"
            ).encode("ascii")
        )
        try:
            while sent < total:
                readable, _, _ = select.select([sock], [], [], 0)
                if readable:
                    break
                sock.sendall(frame)
                sent += chunk
            else:
                sock.sendall(b"0\r\n\r\n")
        except OSError:  # the server closed the connection under our feet
            pass
        try:
            head = sock.recv(4096)
        except OSError:
            return sent, None
    if not head.startswith(b"HTTP/1.1 "):
        return sent, None
    return sent, int(head.split()[1])


def test_a_chunked_body_is_streamed_and_reading_stops_at_the_limit(tmp_path: Path) -> None:
    server = start_serve(tmp_path, {})
    try:
        before = server.memory_kib("VmHWM")
        total = 400 * 1024 * 1024
        sent, status = _chunked_upload(server, total)
        peak = server.memory_kib("VmHWM")
        still_alive = server.client.get("/api/health").status_code
    finally:
        stderr = server.stop()
    print(
        f"\nserver peak RSS: {before / 1024:.1f} MiB before, {peak / 1024:.1f} MiB after a "
        f"{total >> 20} MiB chunked upload ({sent >> 20} MiB sent before the server stopped it)"
    )
    assert status in (413, None)
    assert sent < total  # the server stopped reading: the rest was never sent
    assert peak - before < 32 * 1024  # KiB: nowhere near the 400 MB body
    assert still_alive == 200
    assert "Traceback" not in stderr


def test_a_chunked_body_over_the_limit_is_a_413(tmp_path: Path) -> None:
    server = start_serve(tmp_path, {})
    try:
        _, status = _chunked_upload(server, 4 * MAX_BODY_BYTES, chunk=64 * 1024)
    finally:
        server.stop()
    assert status == 413
