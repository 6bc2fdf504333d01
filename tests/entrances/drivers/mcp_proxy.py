"""``mcp-proxy``: the :class:`~agentplug.cli.mcp_proxy.McpProxy` in-process, a real MCP
client session in front of it and a real upstream server (stdio subprocess) behind it.

The gateway is built as the command builds it (the config's plugins, a resolver for the
approvals; here a :class:`Desk` in place of the control API). Each call opens an MCP
client session on the proxy's server (the SDK's in-memory transport), so it goes through
``tools/call`` with a real request id; the upstream server records the calls that reach
it. The client is the MCP client: what it reads is the ``CallToolResult``. There is no
model; the client reads the result itself.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from agentplug import Gateway
from agentplug.agent import agent_config
from agentplug.agent.mcp import connect_servers
from agentplug.cli.mcp_proxy import McpProxy

from tests.entrances.conftest import installed, matrix_config
from tests.entrances.entrance import (
    Answer,
    Desk,
    Entrance,
    Logs,
    LoopThread,
    Observed,
    audit_decision,
    audit_mark,
)

UPSTREAM = Path(__file__).parents[1] / "matrix_upstream.py"


class McpProxyEntrance(Entrance):
    """``tools/call`` through the proxy (see the module docstring)."""

    name = "mcp-proxy"
    exec_tool = "exec"  # an MCP tool carries no kind: the gate knows ``exec`` by its name

    def __init__(self, site: Path, folder: Path) -> None:
        super().__init__(Logs(folder / "logs"))
        self.desk = Desk()
        self.thread = LoopThread()
        servers = {
            "up": {
                "command": sys.executable,
                "args": [str(UPSTREAM)],
                "env": {"MATRIX_LOG_DIR": str(self.logs.folder)},
                "prefix": False,
            }
        }
        config = matrix_config(self.logs.folder)
        config["agent"]["tools"] = {"mcp_servers": servers}
        with installed(site):
            self.gateway = Gateway.from_config(config, load_plugins=True, resolver=self.desk)
        assert not self.gateway.host.load_errors, self.gateway.host.load_errors

        async def start() -> McpProxy:
            problems = await self.gateway.start(host_name="mcp-proxy")
            assert not problems, problems
            sources = await connect_servers(agent_config(config["agent"]).tools.mcp_servers)
            return McpProxy(self.gateway, sources)

        self.proxy = self.thread.run(start())

    def call_tool(self, tool: str, params: dict[str, Any], *, answer: Answer = None) -> Observed:
        from mcp import Client

        mark = self.logs.mark()
        audit = self.gateway.tool_calls.gate.audit
        before = audit_mark(audit)
        asked = self.desk.expect(answer)

        async def call() -> Any:
            async with Client(self.proxy.server()) as client:
                return await client.call_tool(tool, params)

        result = self.thread.run(call())
        text = "\n".join(block.text for block in result.content if block.type == "text")
        observed = Observed(
            self.name,
            client=result.model_dump_json(),
            asked=len(self.desk.asked) - asked,
            decision=audit_decision(audit, tool, before),
            read_by_client=text,
        )
        return self.collect(observed, mark)

    def close(self) -> None:
        async def stop() -> None:
            await self.proxy.aclose()
            await self.gateway.stop()

        self.thread.run(stop())
        self.thread.stop()
