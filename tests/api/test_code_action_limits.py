"""Code-action tests are capped like terminal runs, and sandbox memory is bounded.

Issue 18 item 8: 200 concurrent ``POST /api/custom-actions/{id}/test`` started 200
sandbox processes. Against a real ``agentplug serve``: the sandboxed code fetches a gate
on 127.0.0.1 (admitted by ``security.ssrf.allowHosts``) that holds every request until
the test lets go, so the number of code runs in progress is counted where they are.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

from agentplug.api.routes.custom_actions import MAX_ACTIVE_CODE_TESTS
from agentplug.sandbox import SandboxBudget

from .served import WAIT_S, start_serve


class Gate:
    """An HTTP server whose ``/hold`` answers only once :attr:`release` is set."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.lock = threading.Lock()
        self.in_flight = 0
        self.most = 0
        gate = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                with gate.lock:
                    gate.in_flight += 1
                    gate.most = max(gate.most, gate.in_flight)
                gate.release.wait(WAIT_S)
                with gate.lock:
                    gate.in_flight -= 1
                self.send_response(200)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def gate() -> Iterator[Gate]:
    g = Gate()
    try:
        yield g
    finally:
        g.close()


def _wait_for(condition: Any) -> None:
    for _ in range(int(WAIT_S / 0.02)):  # an upper bound on polls, not a timing claim
        if condition():
            return
        time.sleep(0.02)
    pytest.fail("gave up waiting")


def test_code_action_tests_past_the_limit_are_429_and_never_start_a_sandbox(
    tmp_path: Path, gate: Gate
) -> None:
    config = {
        "security": {"ssrf": {"allowHosts": [f"127.0.0.1:{gate.port}"], "timeoutSeconds": 60}},
        "customActions": [
            {
                "id": "hold",
                "name": "HOLD",
                "description": "wait at the gate",
                "parameters": [],
                "handler": {
                    "type": "code",
                    "language": "python",
                    "code": f"r = await fetch('http://127.0.0.1:{gate.port}/hold')\n"
                    "return r.status",
                },
                "enabled": True,
                "createdAt": "2025-01-01T00:00:00Z",
                "updatedAt": "2025-01-01T00:00:00Z",
            }
        ],
    }
    server = start_serve(tmp_path, config)
    total = 40
    answers: list[httpx.Response] = []
    lock = threading.Lock()

    def post(_: int) -> None:
        response = httpx.post(
            f"{server.url}/api/custom-actions/hold/test",
            json={"params": {}},
            headers=server.auth,
            timeout=WAIT_S * 2,
        )
        with lock:
            answers.append(response)

    try:
        with ThreadPoolExecutor(max_workers=total) as pool:
            futures = [pool.submit(post, i) for i in range(total)]
            _wait_for(lambda: len(answers) == total - MAX_ACTIVE_CODE_TESTS)
            _wait_for(lambda: gate.in_flight == MAX_ACTIVE_CODE_TESTS)
            refused = [a for a in answers if a.status_code == 429]
            gate.release.set()
            for future in futures:
                future.result()
    finally:
        server.stop()
    assert len(refused) == total - MAX_ACTIVE_CODE_TESTS
    assert "code-action tests are still running" in refused[0].json()["error"]
    assert gate.most == MAX_ACTIVE_CODE_TESTS
    ran = [a.json() for a in answers if a.status_code == 200]
    assert [(r["ok"], r["output"]) for r in ran] == [(True, "200")] * MAX_ACTIVE_CODE_TESTS


def test_the_sandbox_budget_holds_runs_until_their_memory_fits() -> None:
    budget = SandboxBudget(max_memory_mb=512)
    order: list[str] = []

    async def run(name: str, started: asyncio.Event, finish: asyncio.Event) -> None:
        async with budget.reserve(256):
            order.append(f"{name} in ({budget.in_use_mb} MB)")
            started.set()
            await finish.wait()
        order.append(f"{name} out")

    async def main() -> None:
        events = {n: (asyncio.Event(), asyncio.Event()) for n in "abc"}
        tasks = {n: asyncio.create_task(run(n, *events[n])) for n in "abc"}
        await events["a"][0].wait()
        await events["b"][0].wait()
        assert not events["c"][0].is_set() and budget.in_use_mb == 512
        assert not budget.try_reserve(16)
        events["a"][1].set()
        await events["c"][0].wait()
        events["b"][1].set()
        events["c"][1].set()
        await asyncio.gather(*tasks.values())

    asyncio.run(main())
    assert order[:3] == ["a in (256 MB)", "b in (512 MB)", "a out"]
    assert "c in (512 MB)" in order and budget.in_use_mb == 0
    with pytest.raises(ValueError, match="can never fit"):
        budget.try_reserve(1024)
