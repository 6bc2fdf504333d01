"""``agentplug serve``'s turn endpoint: a real server process, driven over HTTP.

One server runs for all the cells of a rule module (tests/api/served.py starts it). Each
cell posts one message to ``POST /api/sessions/matrix:<nonce>/messages`` (with the
transcript) in a thread; while that turn waits, approvals are listed at ``GET
/api/approvals`` and answered at ``POST /api/approvals/{id}``, as an operator's UI does.
The client is the HTTP caller: what it reads is the response body (and the server's
stderr).
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import httpx

from tests.api.served import Served, start_serve
from tests.entrances.conftest import matrix_config
from tests.entrances.drivers.chat import subprocess_env
from tests.entrances.entrance import (
    WAIT_S,
    Answer,
    Entrance,
    Logs,
    Observed,
    instruction,
    trace_decision,
)


class ServeEntrance(Entrance):
    """``POST /api/sessions/{key}/messages`` (see the module docstring)."""

    name = "serve"

    def __init__(self, site: Path, folder: Path) -> None:
        super().__init__(Logs(folder / "logs"))
        env = subprocess_env(site, folder)
        self.served: Served = start_serve(folder, matrix_config(self.logs.folder), env=env)

    def _turn(self, content: str, nonce: str, answer: Answer) -> Observed:
        done: list[httpx.Response] = []

        def post() -> None:
            done.append(
                self.served.client.post(
                    f"/api/sessions/matrix:{nonce}/messages",
                    params={"transcript": "1"},
                    json={"content": content},
                )
            )

        turn = threading.Thread(target=post, daemon=True)
        turn.start()
        answered: set[str] = set()
        deadline = time.monotonic() + WAIT_S
        while turn.is_alive() and time.monotonic() < deadline:
            pending = self.served.client.get("/api/approvals").json()["pending"]
            for item in pending:
                if item["id"] in answered:
                    continue
                answered.add(item["id"])
                if answer is not None:
                    reply = self.served.client.post(
                        f"/api/approvals/{item['id']}", json={"decision": answer}
                    )
                    assert reply.status_code == 200, reply.text
            turn.join(0.02)
        turn.join(WAIT_S)
        assert done, f"the turn did not answer\n{self.served.stderr_path.read_text('utf-8')}"
        response = done[0]
        assert response.status_code == 200, response.text
        body: dict[str, Any] = response.json()
        return Observed(
            self.name,
            client=response.text + self.served.stderr_path.read_text("utf-8", errors="replace"),
            reply=body.get("reply"),
            asked=len(answered),
            decision=trace_decision(body.get("trace") or []),
        )

    def call_tool(self, tool: str, params: dict[str, Any], *, answer: Answer = None) -> Observed:
        mark = self.logs.mark()
        observed = self._turn(instruction(tool, params), str(params["nonce"]), answer)
        return self.collect(observed, mark)

    def send(self, text: str, nonce: str) -> Observed:
        mark = self.logs.mark()
        observed = self._turn(json.dumps({"say": text, "nonce": nonce}), nonce, None)
        return self.collect(observed, mark)

    def close(self) -> None:
        self.served.stop()
