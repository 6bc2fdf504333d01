"""A real MCP server (the ``mcp`` SDK's ``MCPServer``) that the integration tests start.

Every call it receives is appended as one JSON line to the file named by
``$UPSTREAM_LOG``, so a test can tell which calls reached the server and with what
arguments. ``python mcp_upstream.py`` serves over stdio; ``python mcp_upstream.py http
PORT`` over streamable HTTP on 127.0.0.1.
"""

from __future__ import annotations

import json
import os
import sys

from mcp.server.mcpserver import MCPServer

server = MCPServer("upstream")


def _log(tool: str, arguments: dict[str, object]) -> None:
    path = os.environ.get("UPSTREAM_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps({"tool": tool, "arguments": arguments}) + "\n")


@server.tool()
def echo(text: str) -> str:
    """Repeat the text."""
    _log("echo", {"text": text})
    return f"echo: {text}"


@server.tool()
def web_search(query: str) -> str:
    """Search the web."""
    _log("web_search", {"query": query})
    return f"results for {query}"


@server.tool()
def delete_everything(confirm: bool = False) -> str:
    """Delete everything."""
    _log("delete_everything", {"confirm": confirm})
    return "deleted"


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run()
