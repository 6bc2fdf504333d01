"""The operator's ``security.ssrf`` policy governs custom actions' network access."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from agentplug import ConfigError, PluginHost


class _Hello(BaseHTTPRequestHandler):
    hits = 0

    def do_GET(self) -> None:
        _Hello.hits += 1
        body = b"hello from the host API"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        return None


@pytest.fixture
def local_api() -> Iterator[int]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Hello)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _Hello.hits = 0
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def _config(port: int, allow: list[str] | None) -> dict[str, Any]:
    config: dict[str, Any] = {
        "customActions": [
            {
                "id": "ping",
                "name": "PING_HOST_API",
                "description": "call the host's own API",
                "parameters": [],
                "handler": {"type": "http", "method": "GET", "url": f"http://127.0.0.1:{port}/"},
                "enabled": True,
                "createdAt": "2025-01-01T00:00:00Z",
                "updatedAt": "2025-01-01T00:00:00Z",
            }
        ]
    }
    if allow is not None:
        config["security"] = {"ssrf": {"allowHosts": allow}}
    return config


def _run(host: PluginHost) -> Any:
    async def go() -> Any:
        await host.gateway.actions.load()
        return await host.gateway.actions.run("PING_HOST_API")

    return asyncio.run(go())


def test_internal_host_is_blocked_without_an_operator_allowlist(local_api: int) -> None:
    flow = _run(PluginHost(_config(local_api, None)))
    assert flow.result is not None and not flow.result.success
    assert _Hello.hits == 0


def test_operator_allowlist_in_config_admits_the_hosts_own_api(local_api: int) -> None:
    flow = _run(PluginHost(_config(local_api, [f"127.0.0.1:{local_api}"])))
    assert flow.result is not None and flow.result.success
    assert flow.result.text == "hello from the host API" and _Hello.hits == 1


def test_invalid_ssrf_policy_names_the_config_key(local_api: int) -> None:
    config = _config(local_api, None)
    config["security"] = {"ssrf": {"allowHostz": ["x"]}}
    with pytest.raises(ConfigError) as info:
        _run(PluginHost(config))
    assert "security.ssrf.allowHostz" in str(info.value)


def test_actions_test_cli_reads_the_operator_allowlist(local_api: int, tmp_path: Path) -> None:
    path = tmp_path / "agentplug.json"
    path.write_text(json.dumps(_config(local_api, [f"127.0.0.1:{local_api}"])))
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "agentplug.cli",
            "actions",
            "test",
            "ping",
            "--config",
            str(path),
            "--json",
        ],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"ok": True, "output": "hello from the host API"}
