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

What a server sends is bounded (docs/limits.md): each message it sends, each result, each
description, each input schema, the number of its tools. One offered name means one
tool: two upstream tools whose names become one (``a.b`` and ``a_b``), within a server,
across servers or against a tool the registry already has, fail the start.

Each connection lives in its own background task, which enters and leaves the SDK's
client context (anyio requires both in the same task); calls from any task of the same
event loop go through it. ``mcp`` is imported only when a connection starts (extra
``agentplug[mcp]``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from agentplug.agent.tools import Tool, ToolCallContext, ToolError, ToolOutput
from agentplug.core.redaction import register_credentials, scrub, scrub_clipped

if TYPE_CHECKING:
    from agentplug.agent.mcp_transport import MessageBound

__all__ = [
    "MCP_EXTRA",
    "McpError",
    "McpServerConfig",
    "McpToolSource",
    "connect_servers",
    "refuse_action_clashes",
    "tool_output",
]

log = logging.getLogger("agentplug.agent.mcp")

MCP_EXTRA = "mcp"
"""The optional extra that installs the ``mcp`` SDK."""

_BAD = re.compile(r"[^A-Za-z0-9_-]")
_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
_MAX_PAGES = 16
_KIB = 1024
_MIB = 1024 * _KIB


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
    max_message_bytes: int = Field(default=16 * _MIB, ge=64 * _KIB, le=1024 * _MIB)
    """Bytes of one message read from the server; a longer one is dropped as it streams by
    and the call it answers is refused (the connection stays open)."""
    max_result_bytes: int = Field(default=1 * _MIB, ge=1, le=1024 * _MIB)
    """Bytes of one tool result (its text and structured content); a larger one is refused."""
    max_description_bytes: int = Field(default=8 * _KIB, ge=256, le=1 * _MIB)
    """Bytes of one tool description; a longer one is cut, ending with a marker."""
    max_schema_bytes: int = Field(default=64 * _KIB, ge=256, le=16 * _MIB)
    """Bytes of one tool's input schema (as compact JSON); a tool with a larger one is
    not offered."""
    max_schema_depth: int = Field(default=32, ge=2, le=1000)
    """Nesting of objects and arrays in one input schema; a deeper one is not offered."""
    max_tools: int = Field(default=256, ge=1, le=10_000)
    """Tools offered from the server (after include/exclude); the rest are not offered."""

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


def _cut(text: str, limit: int) -> str:
    """``text`` in at most ``limit`` UTF-8 bytes, ending with a marker when it was cut."""
    data = text.encode()
    if len(data) <= limit:
        return text
    marker = f" [description cut at {limit} bytes]"
    return data[: limit - len(marker)].decode("utf-8", "ignore") + marker


def _nests_deeper(value: Any, limit: int) -> bool:
    """Whether objects and arrays in ``value`` nest deeper than ``limit`` (no recursion)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


def _result_bytes(result: Any) -> int:
    size = sum(
        len(str(block.text).encode())
        for block in getattr(result, "content", None) or []
        if getattr(block, "type", None) == "text"
    )
    structured = getattr(result, "structured_content", None)
    if structured is not None:
        size += len(json.dumps(structured, separators=(",", ":"), default=str))
    return size


class McpToolSource:
    """The tools of one MCP server (a :class:`~agentplug.agent.tools.ToolSource`).

    ``await source.start()`` connects and lists the tools; ``tools()`` returns them, named
    as the model calls them (``<server>__<tool>``, or the server's own names with
    ``prefix`` off, made callable); ``await source.call(name, arguments)`` runs one by the
    server's own name; ``await source.aclose()`` disconnects.
    """

    def __init__(self, name: str, config: McpServerConfig | Mapping[str, Any]) -> None:
        self.name = name
        if not isinstance(config, McpServerConfig):
            config = McpServerConfig.model_validate(config)
        self.config = config
        self._client: Any = None
        self._tools: list[Tool] = []
        self._upstream: dict[str, str] = {}
        self._ready: asyncio.Future[None] | None = None
        self._stop: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None

    def key(self, option: str | None = None) -> str:
        """The config key of this server (or of one of its options), for messages."""
        where = f"agent.tools.mcp_servers.{self.name}"
        return f"{where}.{option}" if option else where

    def _bound(self) -> MessageBound:
        from agentplug.agent.mcp_transport import MessageBound

        limit = self.config.max_message_bytes
        return MessageBound(self.name, limit, self.key("max_message_bytes"))

    def _transport(self) -> Any:
        try:
            from mcp import StdioServerParameters

            from agentplug.agent.mcp_transport import http_transport, stdio_transport
        except ImportError:
            raise _missing_sdk(self.name) from None
        cfg = self.config
        bound = self._bound()
        if cfg.command is not None:
            params = StdioServerParameters(
                command=cfg.command, args=list(cfg.args), env=cfg.env, cwd=cfg.cwd
            )
            return stdio_transport(params, bound)
        return http_transport(str(cfg.url), cfg.headers, cfg.timeout_s, bound)

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
                f"({self.key('timeout_s')})"
            ) from None
        except McpError:
            await self.aclose()
            raise

    async def _hold(self, client_type: Any, transport: Any) -> None:
        assert self._ready is not None and self._stop is not None
        try:
            async with client_type(transport, read_timeout_seconds=self.config.timeout_s) as c:
                self._client = c
                self._tools = await self._list(c)
                if not self._ready.done():
                    self._ready.set_result(None)
                await self._stop.wait()
        except Exception as exc:
            where = self.config.command or self.config.url
            error = (
                exc
                if isinstance(exc, McpError)
                else McpError(
                    f"MCP server {self.name!r} ({where}) failed: {type(exc).__name__}: "
                    f"{_first_line(exc)} (check {self.key()})"
                )
            )
            if not self._ready.done():
                self._ready.set_exception(error)
            else:
                log.warning("%s", error)
        finally:
            self._client = None

    async def _list(self, client: Any) -> list[Tool]:
        """The tools to offer: listed page by page, each bounded, at most ``max_tools``."""
        limit = self.config.max_tools
        offered: list[tuple[str, Tool]] = []
        cursor: str | None = None
        for _ in range(_MAX_PAGES):
            page = await client.list_tools(cursor=cursor)
            for spec in page.tools:
                if len(offered) > limit:
                    break
                original = str(spec.name)
                tool = self._tool(original, spec) if self.config.offers(original) else None
                if tool is not None:
                    offered.append((original, tool))
            cursor = page.next_cursor
            if cursor is None or len(offered) > limit:
                break
        if len(offered) > limit:
            log.warning(
                "MCP server %r lists more than %d tools; only the first %d are offered (%s)",
                self.name,
                limit,
                limit,
                self.key("max_tools"),
            )
            del offered[limit:]
        owners: dict[str, str] = {}
        for original, tool in offered:
            _claim(owners, tool.name, f"tool {original!r} of MCP server {self.name!r}", self)
        self._upstream = {tool.name: original for original, tool in offered}
        return [tool for _, tool in offered]

    def _refuse(self, original: str, why: str, option: str) -> None:
        log.warning(
            "MCP server %r: tool %r is not offered: %s (%s)",
            self.name,
            original,
            why,
            self.key(option),
        )

    def _tool(self, original: str, spec: Any) -> Tool | None:
        cfg = self.config
        own = _BAD.sub("_", original) or "tool"
        name = f"{self.name}__{own}" if cfg.prefix else own
        if not _NAME.fullmatch(name):
            why = f"its name {name!r} is not 1-64 letters, digits, '_' or '-'"
            self._refuse(original, f"{why} (cutting it could make two tools one)", "prefix")
            return None
        schema = dict(spec.input_schema or {"type": "object"})
        if _nests_deeper(schema, cfg.max_schema_depth):
            why = f"its input schema nests deeper than {cfg.max_schema_depth} levels"
            self._refuse(original, why, "max_schema_depth")
            return None
        size = len(json.dumps(schema, separators=(",", ":"), default=str))
        if size > cfg.max_schema_bytes:
            why = f"its input schema is {size} bytes, over {cfg.max_schema_bytes}"
            self._refuse(original, why, "max_schema_bytes")
            return None
        description = str(spec.description or f"{original} (MCP server {self.name})")
        cut = _cut(description, cfg.max_description_bytes)
        if cut is not description:
            log.warning(
                "MCP server %r: the description of tool %r is %d bytes; cut to %d (%s)",
                self.name,
                original,
                len(description.encode()),
                cfg.max_description_bytes,
                self.key("max_description_bytes"),
            )

        async def run(params: dict[str, Any], call: ToolCallContext) -> ToolOutput:
            return await self.call(original, params)

        return Tool(
            name=name, description=cut, parameters=schema, run=run, source=f"mcp:{self.name}"
        )

    def tools(self) -> list[Tool]:
        """The tools listed when the server connected (filtered and bounded)."""
        return list(self._tools)

    def upstream_name(self, name: str) -> str:
        """The server's own name of the tool offered as ``name``."""
        return self._upstream.get(name, name)

    async def call(self, tool_name: str, arguments: Mapping[str, Any]) -> ToolOutput:
        """Run the server's tool ``tool_name`` (its own name) with ``arguments``."""
        from mcp.shared.exceptions import MCPError

        client = self._client
        if client is None:
            return ToolOutput(f"MCP server {self.name!r} is not connected", is_error=True)
        cfg = self.config
        try:
            result = await asyncio.wait_for(
                client.call_tool(tool_name, dict(arguments)), cfg.timeout_s
            )
        except TimeoutError:
            return ToolOutput(
                f"MCP tool {tool_name!r} of {self.name!r} did not answer within "
                f"{cfg.timeout_s:g} s ({self.key('timeout_s')})",
                is_error=True,
            )
        except MCPError as exc:
            message, raw = _first_line(exc), str(exc)
            # the SDK wraps a refused JSON body in its own words, and words its SSE bound
            if self.key("max_message_bytes") in raw or f"{cfg.max_message_bytes} byte limit" in raw:
                message = self._bound().refusal
            return ToolOutput(
                f"MCP tool {tool_name!r} of {self.name!r} failed: {message}", is_error=True
            )
        size = _result_bytes(result)
        if size > cfg.max_result_bytes:
            return ToolOutput(
                f"MCP tool {tool_name!r} of {self.name!r} refused: its result is {size} bytes, "
                f"over max_result_bytes={cfg.max_result_bytes} ({self.key('max_result_bytes')});"
                " raise the bound or ask the tool for less",
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


def refuse_action_clashes(sources: Iterable[McpToolSource], actions: Iterable[str]) -> None:
    """Raise :class:`~agentplug.agent.tools.ToolError` for an MCP tool named like any
    registered action (offered or not, names compared as the action registry does,
    case-insensitively): policies and grants written for the action would govern it, and
    allowing the action later would break every turn."""
    names = {name.upper(): name for name in actions}
    for source in sources:
        for tool in source.tools():
            action = names.get(tool.name.upper())
            if action is not None:
                raise ToolError(
                    f"tool {tool.name!r} of MCP server {source.name!r} has the name of "
                    f"the action {action!r}: one name must mean one tool (a policy for "
                    "it would govern both); keep the server's prefix (prefix: true) or "
                    "exclude one"
                )


def _first_line(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        return _first_line(exc.exceptions[0])
    text = scrub(str(exc)).strip().splitlines()
    return scrub_clipped(text[0], 300) if text else type(exc).__name__


def _claim(owners: dict[str, str], name: str, who: str, source: McpToolSource) -> None:
    """Record that ``who`` is offered as ``name``; a name must mean one tool, or a policy
    written for one would govern the other (:class:`McpError` naming both)."""
    other = owners.get(name)
    if other is not None:
        raise McpError(
            f"{who} and {other} would both be named {name!r}, so a policy for one would "
            f"govern the other: exclude one ({source.key('exclude')}) or rename a server"
        )
    owners[name] = who


async def connect_servers(
    servers: Mapping[str, McpServerConfig | Mapping[str, Any]],
    taken: Mapping[str, str] | None = None,
) -> list[McpToolSource]:
    """Start one :class:`McpToolSource` per server (all or none: a failure closes the rest).

    No two of their tools, nor any of them and a name in ``taken`` (name -> what holds it),
    may share a name (:class:`McpError` naming both).
    """
    started: list[McpToolSource] = []
    try:
        for name, cfg in servers.items():
            source = McpToolSource(name, cfg)
            await source.start()
            started.append(source)
        owners = dict(taken or {})
        for source in started:
            for tool in source.tools():
                who = f"tool {source.upstream_name(tool.name)!r} of MCP server {source.name!r}"
                _claim(owners, tool.name, who, source)
    except BaseException:
        for source in started:
            await source.aclose()
        raise
    return started
