"""``agentplug mcp-proxy``: an MCP server that puts agentplug's plugins in front of others.

``agentplug mcp-proxy --config agentplug.json [--api-port 8732] [--state-dir D]``

The proxy speaks MCP over stdio to its client (Claude Desktop, an IDE, any MCP client)
and connects to the upstream servers of ``agent.tools.mcp_servers`` (stdio or streamable
HTTP). ``tools/list`` returns the upstream tools, named as the runner names them
(``<server>__<tool>``, or the server's own names with ``"prefix": false``), minus
``agent.tools.exclude`` and each server's ``include`` / ``exclude``. Every ``tools/call``
goes through the gateway's :class:`~agentplug.agent.pipeline.ToolCallPipeline`, the
runner's own tool-call path:

* a blocked call never reaches the upstream server; the client gets an MCP tool error
  (``isError``) with the gate's public reason, the one the runner's own model reads (a
  handler that fails is named by plugin id only, never by its message);
* rewritten parameters are what the upstream server receives;
* an approval waits, up to its ``timeout_ms``, for a decision through the control API
  (``--api-port``: ``GET /api/approvals``, ``POST /api/approvals/{id}``) or the CLI
  (``agentplug approvals pending|resolve --api URL``); each pending approval is announced
  on stderr with its id. On a durable store (the state directory's SQLite file, or
  ``state.url``) the approval is also published there, so ``agentplug approvals
  resolve ID DECISION`` from any process sharing the store answers it; on an in-memory
  store without ``--api-port`` nothing can answer, so approvals block.

Ids: the MCP connection is one run (``run_id`` ``mcp-<random>``) on the session
``agent:<agent-id>:mcp:<client name>``; the JSON-RPC request id is the
``tool_call_id``. Standing ``allow-always`` grants live in the state directory's store,
so they hold across restarts and are shared with ``agentplug serve`` on the same one.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentplug.agent.config import agent_config
from agentplug.agent.mcp import MCP_EXTRA, McpError, McpToolSource, connect_servers
from agentplug.agent.pipeline import CallIds, ToolRequest
from agentplug.agent.tools import Tool
from agentplug.config.lookup import CONFIG_HELP
from agentplug.core.errors import AgentplugError
from agentplug.store.location import STATE_DIR_HELP

if TYPE_CHECKING:
    from agentplug.gateway import Gateway
    from agentplug.services.approvals import PendingApproval

__all__ = ["McpProxy", "add_mcp_proxy_command", "cmd_mcp_proxy"]

_EXIT_USAGE = 2
_EXIT_FAILED = 1


def _say(text: str) -> None:
    print(f"agentplug mcp-proxy: {text}", file=sys.stderr, flush=True)


class McpProxy:
    """The proxy's tools and its gateway (usable in-process, without stdio)."""

    def __init__(self, gateway: Gateway, sources: list[McpToolSource]) -> None:
        self.gateway = gateway
        self.host = gateway.host
        self.sources = sources
        self.pipeline = gateway.tool_calls
        """Every ``tools/call`` runs through this (the gateway's one tool-call path)."""
        self.run_id = f"mcp-{uuid.uuid4().hex[:12]}"
        config = agent_config(gateway.config.agent)
        self._policy = config.tools.policy()

    def tools(self) -> dict[str, Tool]:
        """The tools offered to the client, by the name it calls them."""
        found: dict[str, Tool] = {}
        for source in self.sources:
            for tool in source.tools():  # named and bounded by the source, unique across them
                if not self._policy.excludes(tool.name):
                    found[tool.name] = tool
        return found

    async def list_tools(self, ctx: Any, params: Any) -> Any:
        """``tools/list``."""
        import mcp_types as types

        return types.ListToolsResult(
            tools=[
                types.Tool(name=name, description=tool.description, input_schema=tool.parameters)
                for name, tool in self.tools().items()
            ]
        )

    def ids(self, ctx: Any) -> CallIds:
        """The hook-context ids of one ``tools/call`` request."""
        client = "client"
        with contextlib.suppress(Exception):
            info = ctx.session.client_params.client_info
            client = str(info.name) or client
        agent_id = self.pipeline.agent_id
        request_id = getattr(ctx, "request_id", None)
        return CallIds(
            run_id=self.run_id,
            session_key=f"agent:{agent_id}:mcp:{client}",
            tool_call_id=None if request_id is None else f"mcp-{request_id}",
            agent_id=agent_id,
            channel="mcp",
        )

    async def call_tool(self, ctx: Any, params: Any) -> Any:
        """``tools/call``: through the pipeline, then (when allowed) the upstream server."""
        import mcp_types as types

        name = str(params.name)
        tool = self.tools().get(name)
        if tool is None:
            known = ", ".join(sorted(self.tools())) or "none"
            return types.CallToolResult(
                content=[
                    types.TextContent(
                        type="text", text=f"unknown tool {name!r}; available tools: {known}"
                    )
                ],
                is_error=True,
            )
        request = ToolRequest(name, dict(params.arguments or {}), self.ids(ctx))
        done = await self.pipeline.run(request, tool)
        structured = (done.output.details or {}).get("structured") if done.allowed else None
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=done.output.content)],
            is_error=done.output.is_error,
            structured_content=structured if isinstance(structured, dict) else None,
        )

    def server(self) -> Any:
        """The MCP low-level server answering ``tools/list`` and ``tools/call``."""
        from mcp.server import Server

        return Server(
            "agentplug-mcp-proxy",
            version=_version(),
            instructions="Tools of upstream MCP servers, gated by agentplug plugins.",
            on_list_tools=self.list_tools,
            on_call_tool=self.call_tool,
        )

    async def aclose(self) -> None:
        """Disconnect the upstream servers."""
        for source in self.sources:
            await source.aclose()


def _version() -> str:
    from agentplug import __version__

    return __version__


def _announce(pending: PendingApproval, api_url: str | None) -> None:
    where = (
        f'POST {api_url}/api/approvals/{pending.id} {{"decision": ...}} or '
        f"`agentplug approvals resolve {pending.id} allow-once --api {api_url}`"
        if api_url
        else "nothing can answer it (start the proxy with --api-port)"
    )
    _say(
        f"approval {pending.id} pending: {pending.request.title!r} for {pending.tool_name} "
        f"(asked by {pending.plugin_id or 'a plugin'}; {pending.timeout_s:g} s); {where}"
    )


async def _serve_api(gateway: Gateway, args: argparse.Namespace, state_dir: Path) -> Any:
    """Start the control API on the loopback interface; return (server, task, url)."""
    import uvicorn

    from agentplug.api.app import create_app
    from agentplug.api.serve import (
        bind_loopback,
        loopback_bind_address,
        read_token,
        socket_url,
        write_token,
    )

    address = loopback_bind_address(args.api_host)
    if args.token_file:
        token, token_path = read_token(Path(args.token_file)), None
    else:
        token, token_path = write_token(state_dir)
    sock = bind_loopback(address, args.api_port)
    # Decisions taken at the proxy's API are its approvals: recorded as decided by "mcp".
    app = create_app(
        gateway, token=token, state_dir=state_dir, config_path=args.config, approvals_by="mcp"
    )
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off")

    class _Server(uvicorn.Server):
        # The proxy's stdio loop owns the process: the API stops when the loop ends.
        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            yield

    server = _Server(config)
    task = asyncio.ensure_future(server.serve(sockets=[sock]))
    while not server.started and not task.done():
        await asyncio.sleep(0.02)
    url = socket_url(sock)
    where = f" (token in {token_path})" if token_path is not None else ""
    _say(f"control API listening on {url}{where}")
    return server, task, url, sock


async def _run(args: argparse.Namespace) -> int:
    from mcp.server.stdio import stdio_server

    from agentplug.api.serve import ServeError, serve_state_dir
    from agentplug.cli.common import command_config, command_state
    from agentplug.gateway import Gateway
    from agentplug.services.approvals import ProgrammaticResolver

    config, _source = command_config(args)  # --config, $AGENTPLUG_CONFIG, ./agentplug.*
    servers = agent_config(config.agent).tools.mcp_servers
    if not servers:
        _say(
            "error: no upstream servers: add agent.tools.mcp_servers to the config "
            '({"name": {"command": ..., "args": [...]}} or {"name": {"url": ...}})'
        )
        return _EXIT_USAGE
    try:
        state_dir = serve_state_dir(args.state_dir, config)
    except ServeError as exc:
        _say(f"error: {exc}")
        return _EXIT_FAILED
    api_url: list[str | None] = [None]
    resolver = ProgrammaticResolver(on_pending=lambda p: _announce(p, api_url[0]))
    with contextlib.redirect_stdout(sys.stderr):  # stdout carries MCP messages only
        gateway = Gateway.from_config(
            config, load_plugins=True, state_dir=state_dir, resolver=resolver
        )
        for problem in await gateway.start(host_name="mcp-proxy"):
            _say(f"warning: {problem}")
        _say(command_state(args, config).describe())
    api = None
    try:
        if args.api_port is not None:
            api = await _serve_api(gateway, args, state_dir)
            api_url[0] = api[2]
        sources = await connect_servers(servers)
    except (McpError, AgentplugError, OSError, ServeError) as exc:
        _say(f"error: {exc}")
        if api is not None:
            api[0].should_exit = True
            await api[1]
        await gateway.stop()
        return _EXIT_FAILED
    proxy = McpProxy(gateway, sources)
    _say(f"serving {len(proxy.tools())} tools from {', '.join(servers)} over stdio")
    server = proxy.server()
    try:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())
    finally:
        await proxy.aclose()
        if api is not None:
            api[0].should_exit = True
            with contextlib.suppress(Exception):
                await api[1]
            api[3].close()
        await gateway.stop()
    return 0


def cmd_mcp_proxy(args: argparse.Namespace) -> int:
    """Run ``agentplug mcp-proxy``; return the exit code."""
    try:
        import mcp  # noqa: F401
    except ImportError:
        _say(f"needs the optional 'mcp' SDK; install it with: pip install 'agentplug[{MCP_EXTRA}]'")
        return _EXIT_FAILED
    from agentplug.api.serve import ServeError, loopback_bind_address

    if args.api_port is not None and not 0 <= args.api_port <= 65535:
        _say(f"error: --api-port {args.api_port} is not a TCP port (0-65535)")
        return _EXIT_USAGE
    try:
        loopback_bind_address(args.api_host)  # refuse a public bind before starting anything
    except ServeError as exc:
        _say(f"error: {exc}")
        return _EXIT_USAGE
    try:
        return asyncio.run(_run(args))
    except AgentplugError as exc:
        _say(f"error: {exc}")
        return _EXIT_USAGE
    except KeyboardInterrupt:
        return 0


def add_mcp_proxy_command(subparsers: Any) -> None:
    """Add ``agentplug mcp-proxy`` to the command parser."""
    p = subparsers.add_parser(
        "mcp-proxy",
        help="an MCP server (stdio) gating the tools of upstream MCP servers with the plugins",
        description="Serve the tools of agent.tools.mcp_servers over MCP stdio; every "
        "tools/call goes through the plugins' gate (policies, before_tool_call, approvals, "
        "after_tool_call, tool_result_persist) before it reaches the upstream server.",
    )
    p.add_argument("--config", metavar="FILE", help=CONFIG_HELP)
    p.add_argument("--state-dir", metavar="DIR", help=STATE_DIR_HELP)
    p.add_argument(
        "--api-port",
        type=int,
        metavar="PORT",
        help="also serve the control API on this loopback port (0: any) so approvals can "
        "be answered (GET/POST /api/approvals)",
    )
    p.add_argument("--api-host", default="127.0.0.1", help="loopback address of the API")
    p.add_argument("--token-file", metavar="FILE", help="bearer token of the API")
    p.set_defaults(func=cmd_mcp_proxy, reports_load_errors=True)
