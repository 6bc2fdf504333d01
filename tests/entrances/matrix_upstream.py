"""The upstream MCP server of the matrix's ``mcp-proxy`` cells (stdio, the ``mcp`` SDK).

It offers every matrix tool (``matrix_plugin.TOOLS``) and ``exec``, each taking a
``nonce`` and an optional ``text``; a call that reaches it is recorded the way every
matrix tool records its runs (``record_run`` into ``$MATRIX_LOG_DIR/runs.jsonl``, with
the environment this server process runs in).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from matrix_plugin import TOOLS, record_run
from mcp.server.mcpserver import MCPServer

server = MCPServer("matrix-upstream")


def _tool(name: str) -> Callable[..., str]:
    def run(nonce: str, text: str = "") -> str:
        return record_run(os.environ.get("MATRIX_LOG_DIR"), name, {"nonce": nonce, "text": text})

    run.__name__ = name
    run.__doc__ = f"The matrix tool {name}."
    return run


for _name in (*TOOLS, "exec"):
    server.add_tool(_tool(_name), name=_name, description=f"The matrix tool {_name}.")

if __name__ == "__main__":
    server.run()
