"""MCP servers as a tool source (``agent.tools.mcp_servers``), over the official ``mcp`` SDK.

```json
{"agent": {"tools": {"mcp_servers": {
  "files": {"command": "python", "args": ["files_server.py"], "env": {"ROOT": "/srv"}},
  "search": {"url": "http://127.0.0.1:8000/mcp", "exclude": ["delete_index"]}
}}}}
```

A server with ``command`` is started as a subprocess and spoken to over stdio; one with
``url`` over streamable HTTP. Its tools join the runner's :class:`ToolRegistry` named
``<server>__<tool>`` (``"prefix": false`` keeps the server's own names). An
:class:`McpToolSource` only lists and runs tools: every call the model makes still goes
through the runner's one gate path (trusted policies, ``before_tool_call``, approvals,
``after_tool_call``, ``tool_result_persist``).

Each connection lives in its own background task, which enters and leaves the SDK's
client context (anyio requires both in the same task); calls from any task of the same
event loop go through it. ``mcp`` is imported only when a connection starts (extra
``agentplug[mcp]``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from agentplug.agent.tools import Tool, ToolCallContext, ToolOutput
from agentplug.core.redaction import register_credentials

__all__ = [
    "MCP_EXTRA",
    "McpError",
    "McpServerConfig",
    "McpToolSource",
    "connect_servers",
    "tool_output",
]

log = logging.getLogger("agentplug.agent.mcp")

MCP_EXTRA = "mcp"
"""The optional extra that installs the ``mcp`` SDK."""

_BAD = re.compile(r"[^A-Za-z0-9_-]")


class McpError(RuntimeError):
    """An MCP server could not be reached or used (one line naming the server)."""


class McpServerConfig(BaseModel):
    """One entry of ``agent.tools.mcp_servers``: ``{command, args, env}`` or ``{url}``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    command: str | None = None
    """Program to start (stdio transport)."""
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] | None = None
    """Environment of the subprocess (the SDK's safe default environment when unset)."""
    cwd: str | None = None
    url: str | None = None
    """Streamable HTTP endpoint (``http://127.0.0.1:8000/mcp``)."""
    headers: dict[str, str] = Field(default_factory=dict)
    prefix: bool = True
    """Name the tools ``<server>__<tool>`` (``false``: the server's own names)."""
    include: list[str] | None = None
    """Only these tools of the server (its own names)."""
    exclude: list[str] = Field(default_factory=list)
    """Never these tools of the server (its own names)."""
    timeout_s: float = Field(default=30.0, gt=0, le=600)
    """Budget of connecting and of each call."""

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerConfig:
        if (self.command is None) == (self.url is None):
            raise ValueError(
                "give either 'command' (stdio, with optional 'args', 'env', 'cwd') or 'url' "
                "(streamable HTTP), not both or neither"
            )
        if self.url is not None and not self.url.startswith(("http://", "https://")):
            raise ValueError(f"url {self.url!r} must start with http:// or https://")
        register_credentials(self.headers)  # never shown again, whoever echoes them
        register_credentials(self.env)
        return self

    def offers(self, tool_name: str) -> bool:
        """Whether the server's tool ``tool_name`` passes ``include`` / ``exclude``."""
        if tool_name in self.exclude:
            return False
        return self.include is None or tool_name in self.include


def tool_output(result: Any) -> ToolOutput:
    """An MCP ``CallToolResult`` as a :class:`ToolOutput` (text joined; the rest in details)."""
    texts: list[str] = []
    other: list[dict[str, Any]] = []
    for block in getattr(result, "content", None) or []:
        if getattr(block, "type", None) == "text":
            texts.append(str(block.text))
        else:
            other.append({"type": getattr(block, "type", "unknown")})
    details: dict[str, Any] = {}
    structured = getattr(result, "structured_content", None)
    if structured is not None:
        details["structured"] = structured
    if other:
        details["content"] = other
    return ToolOutput("\n".join(texts), details or None, bool(getattr(result, "is_error", False)))


def _missing_sdk(server: str) -> McpError:
    return McpError(
        f"MCP server {server!r} needs the optional 'mcp' SDK; install it with: "
        f"pip install 'agentplug[{MCP_EXTRA}]'"
    )


class McpToolSource:
    """The tools of one MCP server (a :class:`~agentplug.agent.tools.ToolSource`).

    ``await source.start()`` connects and lists the tools; ``tools()`` returns them
    (names sanitised to what a model can call); ``await source.call(name, arguments)``
    runs one by the server's own name; ``await source.aclose()`` disconnects.
    """

    def __init__(self, name: str, config: McpServerConfig | Mapping[str, Any]) -> None:
        self.name = name
        if not isinstance(config, McpServerConfig):
            config = McpServerConfig.model_validate(config)
        self.config = config
        self._client: Any = None
        self._tools: list[Tool] = []
        self._ready: asyncio.Future[None] | None = None
        self._stop: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None

    @property
    def namespace(self) -> str | None:
        """The registry namespace (``None`` when ``prefix`` is off)."""
        return self.name if self.config.prefix else None

    def _transport(self) -> Any:
        try:
            from mcp import StdioServerParameters
        except ImportError:
            raise _missing_sdk(self.name) from None
        cfg = self.config
        if cfg.command is not None:
            return StdioServerParameters(
                command=cfg.command, args=list(cfg.args), env=cfg.env, cwd=cfg.cwd
            )
        if cfg.headers:
            import httpx2  # the SDK's HTTP client
            from mcp.client.streamable_http import streamable_http_client

            http = httpx2.AsyncClient(headers=dict(cfg.headers), timeout=cfg.timeout_s)
            return streamable_http_client(str(cfg.url), http_client=http)
        return str(cfg.url)

    async def start(self) -> None:
        """Connect, list the tools; raise :class:`McpError` naming the server on failure."""
        if self._task is not None:
            return
        try:
            from mcp import Client
        except ImportError:
            raise _missing_sdk(self.name) from None
        transport = self._transport()
        loop = asyncio.get_running_loop()
        self._ready = loop.create_future()
        self._stop = asyncio.Event()
        self._task = asyncio.ensure_future(self._hold(Client, transport))
        try:
            await asyncio.wait_for(asyncio.shield(self._ready), self.config.timeout_s)
        except TimeoutError:
            await self.aclose()
            raise McpError(
                f"MCP server {self.name!r} did not answer within {self.config.timeout_s:g} s "
                f"(agent.tools.mcp_servers.{self.name}.timeout_s)"
            ) from None
        except McpError:
            await self.aclose()
            raise

    async def _hold(self, client_type: Any, transport: Any) -> None:
        assert self._ready is not None and self._stop is not None
        try:
            async with client_type(transport, read_timeout_seconds=self.config.timeout_s) as c:
                self._client = c
                listed = await c.list_tools()
                self._tools = [self._tool(t) for t in listed.tools if self.config.offers(t.name)]
                if not self._ready.done():
                    self._ready.set_result(None)
                await self._stop.wait()
        except Exception as exc:
            where = self.config.command or self.config.url
            error = McpError(
                f"MCP server {self.name!r} ({where}) failed: {type(exc).__name__}: "
                f"{_first_line(exc)} (check agent.tools.mcp_servers.{self.name})"
            )
            if not self._ready.done():
                self._ready.set_exception(error)
            else:
                log.warning("%s", error)
        finally:
            self._client = None

    def _tool(self, spec: Any) -> Tool:
        original = str(spec.name)
        name = _BAD.sub("_", original)[:64] or "tool"

        async def run(params: dict[str, Any], call: ToolCallContext) -> ToolOutput:
            return await self.call(original, params)

        schema = dict(spec.input_schema or {"type": "object"})
        return Tool(
            name=name,
            description=str(spec.description or f"{original} (MCP server {self.name})"),
            parameters=schema,
            run=run,
            source=f"mcp:{self.name}",
        )

    def tools(self) -> list[Tool]:
        """The tools listed when the server connected (filtered by include/exclude)."""
        return list(self._tools)

    async def call(self, tool_name: str, arguments: Mapping[str, Any]) -> ToolOutput:
        """Run the server's tool ``tool_name`` (its own name) with ``arguments``."""
        client = self._client
        if client is None:
            return ToolOutput(f"MCP server {self.name!r} is not connected", is_error=True)
        try:
            result = await asyncio.wait_for(
                client.call_tool(tool_name, dict(arguments)), self.config.timeout_s
            )
        except TimeoutError:
            return ToolOutput(
                f"MCP tool {tool_name!r} of {self.name!r} did not answer within "
                f"{self.config.timeout_s:g} s",
                is_error=True,
            )
        return tool_output(result)

    async def aclose(self) -> None:
        """Disconnect (stops the subprocess of a stdio server)."""
        task, self._task = self._task, None
        if task is None:
            return
        if self._stop is not None:
            self._stop.set()
        with contextlib.suppress(Exception, asyncio.CancelledError):
            await asyncio.wait_for(task, 10)
        if not task.done():
            task.cancel()
            with contextlib.suppress(BaseException):
                await task


def _first_line(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        return _first_line(exc.exceptions[0])
    text = str(exc).strip().splitlines()
    return text[0][:300] if text else type(exc).__name__


async def connect_servers(
    servers: Mapping[str, McpServerConfig | Mapping[str, Any]],
) -> list[McpToolSource]:
    """Start one :class:`McpToolSource` per server (all or none: a failure closes the rest)."""
    started: list[McpToolSource] = []
    try:
        for name, cfg in servers.items():
            source = McpToolSource(name, cfg)
            await source.start()
            started.append(source)
    except BaseException:
        for source in started:
            await source.aclose()
        raise
    return started
