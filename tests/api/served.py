"""A real ``agentplug serve`` process on 127.0.0.1, for tests that need the whole server.

:func:`start_serve` runs the console command in a subprocess (its own state directory,
an ephemeral port, the config written by the test), waits for its "listening" line and
returns a :class:`Served` handle; :meth:`Served.stop` sends SIGTERM and returns what the
server wrote on stderr. :func:`raw_exchange` speaks HTTP/1.1 over one socket, so a test
can see whether the server kept the connection open.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

WAIT_S = 60.0
"""Upper bound for the server to answer (never a timing assertion)."""


@dataclass
class Served:
    """A running ``agentplug serve``: its URL, token, process and files."""

    proc: subprocess.Popen[str]
    url: str
    port: int
    token: str
    config_path: Path
    state_dir: Path
    stderr_path: Path
    client: httpx.Client
    _stopped: bool = field(default=False, repr=False)

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    def ws_url(self, run_id: str) -> str:
        return f"ws://127.0.0.1:{self.port}/api/terminal/runs/{run_id}/stream?token={self.token}"

    def memory_kib(self, field_name: str = "VmHWM") -> int:
        """A memory figure of the server process from /proc (``VmHWM``: peak RSS)."""
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith(field_name + ":"):
                return int(line.split()[1])
        raise AssertionError(f"no {field_name} in /proc/{self.pid}/status")

    def stop(self) -> str:
        """SIGTERM the server, wait for it and return its stderr."""
        if not self._stopped:
            self._stopped = True
            self.client.close()
            if self.proc.poll() is None:
                self.proc.send_signal(signal.SIGTERM)
                try:
                    self.proc.wait(WAIT_S)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait(WAIT_S)
        return self.stderr_path.read_text(encoding="utf-8", errors="replace")


def _agentplug() -> list[str]:
    script = shutil.which("agentplug", path=str(Path(sys.executable).parent))
    return [script] if script else [sys.executable, "-m", "agentplug.cli"]


def start_serve(
    tmp_path: Path,
    config: dict[str, Any] | None = None,
    *,
    env: dict[str, str] | None = None,
    name: str = "served",
) -> Served:
    """Start ``agentplug serve --port 0`` with ``config`` (written to a JSON file)."""
    folder = tmp_path / name
    folder.mkdir()
    config_path = folder / "agentplug.json"
    config_path.write_text(json.dumps(config or {}, indent=2), encoding="utf-8")
    state_dir = folder / "state"
    stderr_path = folder / "stderr.txt"
    environment = {
        **os.environ,
        "AGENTPLUG_CACHE_DIR": str(folder / "cache"),
        "AGENTPLUG_LOG_LEVEL": "WARNING",
        **(env or {}),
    }
    environment.pop("AGENTPLUG_CONFIG", None)
    with open(stderr_path, "w", encoding="utf-8") as stderr:
        proc = subprocess.Popen(
            [
                *_agentplug(),
                "serve",
                "--port",
                "0",
                "--config",
                str(config_path),
                "--state-dir",
                str(state_dir),
            ],
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            env=environment,
            cwd=folder,
        )
    watchdog = threading.Timer(WAIT_S, proc.kill)
    watchdog.start()
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
    finally:
        watchdog.cancel()
    if "listening on http://127.0.0.1:" not in line:
        proc.kill()
        proc.wait(WAIT_S)
        raise AssertionError(
            f"agentplug serve did not start: {line!r}\n{stderr_path.read_text('utf-8')}"
        )
    url = line.split("listening on ", 1)[1].split()[0]
    port = int(url.rsplit(":", 1)[1])
    token = (state_dir / "api-token").read_text(encoding="utf-8").strip()
    client = httpx.Client(
        base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=WAIT_S
    )
    return Served(proc, url, port, token, config_path, state_dir, stderr_path, client)


@dataclass
class RawResponse:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


def _read_response(reader: Any) -> RawResponse:
    status_line = reader.readline()
    if not status_line:
        raise ConnectionError("the server closed the connection")
    status = int(status_line.split()[1])
    headers: dict[str, str] = {}
    while True:
        line = reader.readline().decode("latin-1").rstrip("\r\n")
        if not line:
            break
        key, _, value = line.partition(":")
        headers[key.strip().lower()] = value.strip()
    body = reader.read(int(headers.get("content-length", "0")))
    return RawResponse(status, headers, body)


def raw_exchange(served: Served, requests: list[tuple[str, str, bytes]]) -> list[RawResponse]:
    """Send each ``(method, path, body)`` in turn over ONE connection; return the answers.

    Raises ``ConnectionError`` when the server closed the connection before an answer.
    """
    responses = []
    with socket.create_connection(("127.0.0.1", served.port), timeout=WAIT_S) as sock:
        reader = sock.makefile("rb")
        for method, path, body in requests:
            head = (
                f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{served.port}\r\n"
                f"Authorization: Bearer {served.token}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\n\r\n"
            )
            try:
                sock.sendall(head.encode("ascii") + body)
            except OSError as exc:
                raise ConnectionError(f"the server closed the connection: {exc}") from exc
            responses.append(_read_response(reader))
    return responses
