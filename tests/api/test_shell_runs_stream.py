"""Runs that the API did not start stream on ``WS /api/terminal/runs/{id}/stream`` too.

Issue 13 item 2: a ``SHELL_COMMAND`` run (and a custom shell action's) goes through the
host's terminal runs, so the control API streams and reports it like its own runs.
"""

from __future__ import annotations

import asyncio
import json
import re
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette")
uvicorn = pytest.importorskip("uvicorn")
pytest.importorskip("websockets")

import httpx  # noqa: E402
from agentplug.api.app import create_app  # noqa: E402
from agentplug.api.serve import build_gateway  # noqa: E402
from agentplug.config.model import AgentplugConfig  # noqa: E402
from websockets.sync.client import connect  # noqa: E402

from .served import WAIT_S, start_serve  # noqa: E402

TOKEN = "stream-token-" + "y" * 32
BLOCKING = "echo started; while [ ! -f go ]; do sleep 0.05; done; echo finished"


def collect(url: str) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    with connect(url, open_timeout=WAIT_S) as ws:
        while True:
            message = json.loads(ws.recv(timeout=WAIT_S))
            messages.append(message)
            if message["type"] == "exit":
                return messages


def release_when_started(url: str, go: Path) -> list[dict[str, Any]]:
    """Stream ``url``; create ``go`` once the first output arrived; return every message."""
    messages: list[dict[str, Any]] = []
    with connect(url, open_timeout=WAIT_S) as ws:
        while True:
            message = json.loads(ws.recv(timeout=WAIT_S))
            messages.append(message)
            if message["type"] == "output" and not go.exists():
                go.touch()
            if message["type"] == "exit":
                return messages


class Live:
    def __init__(self, tmp_path: Path) -> None:
        self.workdir = tmp_path / "work"
        self.workdir.mkdir()
        config = AgentplugConfig.parse(
            {"actions": {"shell": {"enabled": True, "cwd": str(self.workdir)}}}
        )
        self.gateway = build_gateway(config, tmp_path / "state")
        self.host = self.gateway.host
        app = create_app(self.gateway, token=TOKEN, state_dir=tmp_path / "state")
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.server = uvicorn.Server(uvicorn.Config(app, lifespan="on", log_level="warning"))
        self.loop: asyncio.AbstractEventLoop | None = None
        self.thread = threading.Thread(target=lambda: asyncio.run(self._main()), daemon=True)
        self.thread.start()
        deadline = time.monotonic() + WAIT_S
        while not self.server.started and time.monotonic() < deadline:
            time.sleep(0.02)
        assert self.server.started

    async def _main(self) -> None:
        self.loop = asyncio.get_running_loop()
        await self.gateway.start()
        await self.server.serve(sockets=[self.sock])

    def run_action(self, text: str) -> Any:
        assert self.loop is not None
        future = asyncio.run_coroutine_threadsafe(self.host.gateway.actions.run(text), self.loop)
        return future.result(WAIT_S)

    def close(self) -> None:
        self.server.should_exit = True
        self.thread.join(WAIT_S)
        self.sock.close()


@pytest.fixture
def live(tmp_path: Path) -> Iterator[Live]:
    server = Live(tmp_path)
    try:
        yield server
    finally:
        server.close()


def test_a_shell_command_run_streams_on_the_terminal_websocket(live: Live) -> None:
    flow = live.run_action('SHELL_COMMAND {"command": "echo one; echo two", "runId": "sc-1"}')
    assert flow.result is not None and flow.result.success
    messages = collect(f"ws://127.0.0.1:{live.port}/api/terminal/runs/sc-1/stream?token={TOKEN}")
    output = "".join(m["data"] for m in messages if m["type"] == "output")
    assert output == "one\ntwo\n"
    assert messages[-1]["exit_code"] == 0
    status = httpx.get(
        f"http://127.0.0.1:{live.port}/api/terminal/runs/sc-1",
        headers={"Authorization": f"Bearer {TOKEN}"},
    ).json()
    assert status["status"] == "exited" and status["source"] == "SHELL_COMMAND"


def test_a_long_custom_shell_action_returns_a_run_id_that_streams(tmp_path: Path) -> None:
    action = {
        "id": "wait-for-go",
        "name": "WAIT_FOR_GO",
        "description": "wait for a file",
        "parameters": [],
        "handler": {"type": "shell", "command": BLOCKING},
        "enabled": True,
        "createdAt": "2025-01-01T00:00:00Z",
        "updatedAt": "2025-01-01T00:00:00Z",
    }
    workdir = tmp_path / "work"
    workdir.mkdir()
    config = {
        "actions": {"shell": {"enabled": True, "cwd": str(workdir), "replyAfterSeconds": 0.2}},
        "customActions": [action],
    }
    server = start_serve(tmp_path, config)
    try:
        answer = server.client.post("/api/custom-actions/wait-for-go/test", json={"params": {}})
        body = answer.json()
        assert answer.status_code == 200 and body["ok"] is True, body
        match = re.search(r"/api/terminal/runs/([0-9a-f]+)/stream", body["output"])
        assert match is not None, body["output"]
        messages = release_when_started(server.ws_url(match.group(1)), workdir / "go")
    finally:
        server.stop()
    output = "".join(m["data"] for m in messages if m["type"] == "output")
    assert output == "started\nfinished\n"
    assert messages[-1]["exit_code"] == 0
