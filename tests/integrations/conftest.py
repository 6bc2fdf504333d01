"""Fixtures of the integration tests: the upstream MCP server and its call log."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

UPSTREAM = Path(__file__).with_name("mcp_upstream.py")
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
