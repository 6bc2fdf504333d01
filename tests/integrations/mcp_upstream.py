"""A real MCP server (the ``mcp`` SDK's ``MCPServer``) that the integration tests start.

Every call it receives is appended as one JSON line to the file named by
``$UPSTREAM_LOG``, so a test can tell which calls reached the server and with what
arguments. ``python mcp_upstream.py`` serves over stdio; ``python mcp_upstream.py http
PORT`` over streamable HTTP on 127.0.0.1.

``$UPSTREAM_EXTRA`` (a JSON object) adds hostile tools, built here so that a test never
holds the payload itself: ``"big": true`` a tool ``big(size)`` answering ``size`` bytes;
``"description_bytes": N`` a tool ``long_doc`` with an N-byte description;
``"tool_count": N`` tools ``t0000``...; ``"names": [...]`` tools with those exact names;
``"schema_depth": N`` a tool ``deep`` whose input schema nests N objects;
``"schema_properties": N`` a tool ``wide`` whose input schema has N properties.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

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


def _named(name: str) -> Any:
    def run() -> str:
        _log(name, {})
        return f"ran {name}"

    return run


def _nested(depth: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(depth):
        schema = {"type": "object", "properties": {"inner": schema}}
    return schema


def _add_extras(extra: dict[str, Any]) -> None:
    if extra.get("big"):

        @server.tool(structured_output=False)
        def big(size: int) -> str:
            """Answer `size` bytes."""
            _log("big", {"size": size})
            return "x" * size

    if "description_bytes" in extra:
        server.add_tool(
            _named("long_doc"), name="long_doc", description="d" * int(extra["description_bytes"])
        )
    for index in range(int(extra.get("tool_count", 0))):
        server.add_tool(_named(f"t{index:04d}"), name=f"t{index:04d}", description="One of many.")
    for name in extra.get("names", []):
        server.add_tool(_named(name), name=name, description=f"The tool {name}.")
    if "schema_depth" in extra:
        depth = int(extra["schema_depth"])
        _add_with_schema("deep", {"type": "object", "properties": {"root": _nested(depth)}})
    if "schema_properties" in extra:
        count = int(extra["schema_properties"])
        properties = {f"field_{index}": {"type": "string"} for index in range(count)}
        _add_with_schema("wide", {"type": "object", "properties": properties})


def _add_with_schema(name: str, schema: dict[str, Any]) -> None:
    server.add_tool(_named(name), name=name, description=f"The tool {name}.")
    tool = server._tool_manager.get_tool(name)
    assert tool is not None
    tool.parameters = schema


_add_extras(json.loads(os.environ.get("UPSTREAM_EXTRA") or "{}"))

if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run()
