"""Fixtures of the integration tests: the upstream MCP server and its call log."""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

UPSTREAM = Path(__file__).with_name("mcp_upstream.py")
RESULT_FIRST = Path(__file__).with_name("mcp_result_first.py")
MCP_MISSING = "the MCP tests need the 'mcp' extra: pip install 'agentplug[mcp]'"


class UpstreamLog:
    """The calls the upstream MCP server received (one JSON line each)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def calls(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        return [json.loads(line) for line in self.path.read_text().splitlines() if line]


@pytest.fixture
def upstream_log(tmp_path: Path) -> UpstreamLog:
    return UpstreamLog(tmp_path / "upstream.jsonl")


@pytest.fixture
def stdio_server(upstream_log: UpstreamLog) -> dict[str, Any]:
    """``agent.tools.mcp_servers`` entry that starts the upstream server over stdio."""
    return {
        "command": sys.executable,
        "args": [str(UPSTREAM)],
        "env": {"UPSTREAM_LOG": str(upstream_log.path)},
    }


def with_extra(server: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """``server`` (a stdio entry) whose upstream also offers the hostile tools of ``extra``
    (see ``mcp_upstream.py``: ``big``, ``description_bytes``, ``tool_count``...)."""
    return {**server, "env": {**server["env"], "UPSTREAM_EXTRA": json.dumps(extra)}}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def http_upstream(log: UpstreamLog, **extra: Any) -> Iterator[str]:
    """The upstream server over streamable HTTP on 127.0.0.1 (``extra``: see ``with_extra``);
    yields its URL."""
    port = free_port()
    env = {"UPSTREAM_LOG": str(log.path), "UPSTREAM_EXTRA": json.dumps(extra)}
    proc = subprocess.Popen(
        [sys.executable, str(UPSTREAM), "http", str(port)],
        env={**env, "PATH": "/usr/bin:/bin"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 120  # a hang guard: listening is what is awaited
        while time.monotonic() < deadline:
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", port)) == 0:
                    break
            if proc.poll() is not None:
                pytest.fail("the upstream HTTP MCP server exited before listening")
            time.sleep(0.1)
        else:
            pytest.fail("the upstream HTTP MCP server did not listen within 120 s")
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(10)


class ExampleHost:
    """A host with the example plugins tool-preflight, message-redactor and audit-log."""

    def __init__(self, tmp: Path, **extra_plugins: Any) -> None:
        from agentplug import PluginHost

        self.audit = tmp / "audit.jsonl"
        config = {
            "plugins": {
                "allow": ["tool-preflight", "message-redactor", "audit-log"],
                "entries": {
                    "tool-preflight": {"config": {"blocked_tools": ["delete_everything"]}},
                    "message-redactor": {"config": {"forbidden": ["project nightingale"]}},
                    "audit-log": {"config": {"path": str(self.audit), "conversation_hooks": False}},
                },
            }
        }
        self.host = PluginHost(config)
        self.host.load_installed()
        assert not self.host.load_errors, self.host.load_errors
        for plugin_id, plugin in extra_plugins.items():
            self.host.register(plugin, plugin_id)

    def audit_lines(self, hook: str | None = None) -> list[dict[str, Any]]:
        if not self.audit.exists():
            return []
        lines = [json.loads(line) for line in self.audit.read_text().splitlines() if line]
        return [line for line in lines if hook is None or line["hook"] == hook]


def rewriter(api: Any) -> None:
    """A plugin that rewrites ``echo``'s text to upper case."""
    from agentplug_hookspecs.tools import ToolCallResult

    def handler(event: Any) -> Any:
        if event.tool_name == "echo":
            return ToolCallResult(params={"text": str(event.params.get("text", "")).upper()})
        return None

    api.on("before_tool_call", handler)
