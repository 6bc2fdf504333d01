"""An MCP server over stdio, written by hand, that puts ``result`` before ``id``.

The TypeScript SDK writes its answers in that order (``{"result": ..., "jsonrpc": "2.0",
"id": 3}``), so the id of a very long answer only comes at its end. It speaks the
handshake-era protocol (``initialize``; ``server/discover`` is unknown to it) and offers
``echo(text)`` and ``big(size)``; ``big`` streams its answer in 1 MiB pieces, so neither
this process nor the test ever holds it whole.
"""

from __future__ import annotations

import json
import sys
from typing import Any

CHUNK = 1024 * 1024
TOOLS = [
    {
        "name": "echo",
        "description": "Repeat the text.",
        "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}},
    },
    {
        "name": "big",
        "description": "Answer `size` bytes.",
        "inputSchema": {"type": "object", "properties": {"size": {"type": "integer"}}},
    },
]


def _send(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


def _answer(request_id: Any, result: dict[str, Any]) -> None:
    _send(json.dumps({"result": result, "jsonrpc": "2.0", "id": request_id}) + "\n")


def _big(request_id: Any, size: int) -> None:
    _send('{"result": {"content": [{"type": "text", "text": "')
    for start in range(0, size, CHUNK):
        _send("x" * min(CHUNK, size - start))
    _send('"}], "isError": false}, "jsonrpc": "2.0", "id": ' + json.dumps(request_id) + "}\n")


def _handle(message: dict[str, Any]) -> None:
    method, request_id = message.get("method"), message.get("id")
    if request_id is None:
        return  # a notification
    params = message.get("params") or {}
    if method == "initialize":
        _answer(
            request_id,
            {
                "protocolVersion": "2025-11-25",
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "result-first", "version": "1"},
            },
        )
    elif method == "tools/list":
        _answer(request_id, {"tools": TOOLS})
    elif method == "tools/call" and params.get("name") == "big":
        _big(request_id, int(params["arguments"]["size"]))
    elif method == "tools/call":
        text = f"echo: {params.get('arguments', {}).get('text', '')}"
        _answer(request_id, {"content": [{"type": "text", "text": text}], "isError": False})
    elif method == "ping":
        _answer(request_id, {})
    else:
        error = {"code": -32601, "message": f"unknown method {method}"}
        _send(json.dumps({"jsonrpc": "2.0", "id": request_id, "error": error}) + "\n")


if __name__ == "__main__":
    for line in sys.stdin:
        if line.strip():
            _handle(json.loads(line))
