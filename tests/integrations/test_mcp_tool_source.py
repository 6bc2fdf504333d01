"""MCP servers as a tool source of the runner: real servers (stdio and streamable HTTP).

Each test starts the upstream server of ``mcp_upstream.py`` through
``agent.tools.mcp_servers`` and checks, from the server's own call log, which calls
reached it and with what arguments.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from agentplug import PluginApi, PluginHost
from agentplug.agent import AgentRunner, ScriptedProvider
from agentplug.agent.mcp import McpError, McpServerConfig
from agentplug.core.errors import ConfigError
from agentplug_hookspecs.tools import ToolCallResult

from tests.integrations.conftest import MCP_MISSING, UpstreamLog, free_port, http_upstream

pytest.importorskip("mcp", reason=MCP_MISSING)


def _call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"tool_calls": [{"id": "call-1", "name": name, "arguments": arguments}]}


def _runner(
    servers: dict[str, Any], responses: list[Any], plugins: dict[str, Any] | None = None
) -> tuple[AgentRunner, list[tuple[str, Any]]]:
    seen: list[tuple[str, Any]] = []

    def record(hook: str) -> Any:
        def handler(event: Any) -> None:
            seen.append((hook, event))

        return handler

    def recorder(api: PluginApi) -> None:
        for hook in ("before_tool_call", "after_tool_call", "tool_result_persist"):
            api.on(hook, record(hook), priority=-1000)

    host = PluginHost()
    host.register(recorder, "recorder")
    for plugin_id, plugin in (plugins or {}).items():
        host.register(plugin, plugin_id)
    runner = AgentRunner(
        host,
        ScriptedProvider(responses),
        config={"tools": {"actions": False, "mcp_servers": servers}},
    )
    return runner, seen


async def _turn(runner: AgentRunner, text: str = "go") -> Any:
    try:
        return await runner.run_turn(text, session_key="s1")
    finally:
        await runner.aclose()


def _tool_message(result: Any) -> dict[str, Any]:
    return next(m for m in result.transcript if m["role"] == "tool")


def test_mcp_tools_join_the_registry_named_by_server(stdio_server: dict[str, Any]) -> None:
    runner, _ = _runner({"up": stdio_server}, ["ok"])

    async def names() -> list[str]:
        try:
            await runner.connect_mcp()
            return sorted(t.name for t in runner.tools.all())
        finally:
            await runner.aclose()

    assert asyncio.run(names()) == ["up__delete_everything", "up__echo", "up__web_search"]


def test_an_allowed_mcp_call_reaches_the_server_through_every_gate_hook(
    stdio_server: dict[str, Any], upstream_log: UpstreamLog
) -> None:
    runner, seen = _runner({"up": stdio_server}, [_call("up__echo", {"text": "hi"}), "done"])
    result = asyncio.run(_turn(runner))
    assert upstream_log.calls() == [{"tool": "echo", "arguments": {"text": "hi"}}]
    assert [hook for hook, _ in seen] == [
        "before_tool_call",
        "after_tool_call",
        "tool_result_persist",
    ]
    assert seen[1][1].result == "echo: hi"
    assert _tool_message(result)["content"] == "echo: hi"


def test_a_blocked_mcp_call_never_reaches_the_server(
    stdio_server: dict[str, Any], upstream_log: UpstreamLog
) -> None:
    def blocker(api: PluginApi) -> None:
        api.on(
            "before_tool_call",
            lambda event: (
                ToolCallResult(block=True, block_reason="not on this host")
                if event.tool_name == "up__delete_everything"
                else None
            ),
        )

    runner, _ = _runner(
        {"up": stdio_server},
        [_call("up__delete_everything", {"confirm": True}), "done"],
        {"blocker": blocker},
    )
    result = asyncio.run(_turn(runner))
    assert upstream_log.calls() == []
    assert _tool_message(result)["content"] == "tool call blocked: not on this host"


def test_rewritten_params_are_what_the_server_receives(
    stdio_server: dict[str, Any], upstream_log: UpstreamLog
) -> None:
    def rewriter(api: PluginApi) -> None:
        api.on(
            "before_tool_call",
            lambda event: ToolCallResult(params={"text": event.params["text"].upper()}),
        )

    runner, _ = _runner(
        {"up": stdio_server}, [_call("up__echo", {"text": "quiet"}), "done"], {"rw": rewriter}
    )
    asyncio.run(_turn(runner))
    assert upstream_log.calls() == [{"tool": "echo", "arguments": {"text": "QUIET"}}]


def test_an_mcp_call_that_needs_approval_does_not_run_without_an_approver(
    stdio_server: dict[str, Any], upstream_log: UpstreamLog
) -> None:
    from agentplug_tool_preflight import register as preflight

    stdio = {**stdio_server, "prefix": False}
    runner, _ = _runner(
        {"up": stdio}, [_call("web_search", {"query": "x"}), "done"], {"tool-preflight": preflight}
    )
    result = asyncio.run(_turn(runner))
    assert upstream_log.calls() == []
    assert "needs approval" in _tool_message(result)["content"]


def test_include_and_exclude_filter_a_servers_tools(stdio_server: dict[str, Any]) -> None:
    runner, _ = _runner(
        {"up": {**stdio_server, "include": ["echo", "web_search"], "exclude": ["web_search"]}},
        ["ok"],
    )

    async def names() -> list[str]:
        try:
            await runner.connect_mcp()
            return [t.name for t in runner.tools.all()]
        finally:
            await runner.aclose()

    assert asyncio.run(names()) == ["up__echo"]


def test_a_server_that_cannot_start_fails_the_turn_with_a_line_naming_it() -> None:
    runner, _ = _runner({"broken": {"command": "/nonexistent/mcp-server"}}, ["ok"])
    result = asyncio.run(_turn(runner))
    assert result.status == "failed"
    assert "MCP server 'broken'" in (result.error or "")
    assert "\n" not in (result.error or "")


def test_a_server_entry_needs_exactly_one_transport() -> None:
    with pytest.raises(ConfigError, match=r"agent\.tools\.mcp_servers\.bad"):
        AgentRunner(
            PluginHost(),
            ScriptedProvider(["ok"]),
            config={"tools": {"mcp_servers": {"bad": {"command": "x", "url": "http://h/mcp"}}}},
        )
    with pytest.raises(ValueError, match="either 'command'"):
        McpServerConfig.model_validate({})


@pytest.fixture
def http_server(upstream_log: UpstreamLog) -> Iterator[str]:
    with http_upstream(upstream_log) as url:
        yield url


def test_a_streamable_http_server_is_a_tool_source_too(
    http_server: str, upstream_log: UpstreamLog
) -> None:
    runner, seen = _runner({"web": {"url": http_server}}, [_call("web__echo", {"text": "x"}), "ok"])
    result = asyncio.run(_turn(runner))
    assert upstream_log.calls() == [{"tool": "echo", "arguments": {"text": "x"}}]
    assert _tool_message(result)["content"] == "echo: x"
    assert seen[0][0] == "before_tool_call"


def test_an_unreachable_http_server_is_an_error_naming_it() -> None:
    url = f"http://127.0.0.1:{free_port()}/mcp"
    runner, _ = _runner({"gone": {"url": url, "timeout_s": 20}}, ["ok"])
    with pytest.raises(McpError, match="MCP server 'gone'"):
        asyncio.run(runner.connect_mcp())
