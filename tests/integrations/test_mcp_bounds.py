"""What an MCP server sends is bounded: messages, results, descriptions, schemas, tool count.

Each test starts the real upstream server of ``mcp_upstream.py``; the hostile payloads
(a 100 MB result, a 5 MB description, 300 tools...) are built inside that server
(``$UPSTREAM_EXTRA``), never in the test process.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import pytest
from agentplug import PluginHost
from agentplug.agent import AgentRunner, ScriptedProvider
from agentplug.agent.mcp import McpError, McpToolSource, connect_servers
from agentplug.agent.tools import ToolOutput

from tests.integrations.conftest import (
    MCP_MISSING,
    RESULT_FIRST,
    UpstreamLog,
    http_upstream,
    with_extra,
)

pytest.importorskip("mcp", reason=MCP_MISSING)

T = TypeVar("T")

KEY = "agent.tools.mcp_servers.up"


def _with_source(
    server: dict[str, Any], body: Callable[[McpToolSource], Awaitable[T]], **options: Any
) -> T:
    async def go() -> T:
        source = McpToolSource("up", {**server, **options})
        await source.start()
        try:
            return await body(source)
        finally:
            await source.aclose()

    return asyncio.run(go())


def _names(server: dict[str, Any], **options: Any) -> list[str]:
    async def body(source: McpToolSource) -> list[str]:
        return [tool.name for tool in source.tools()]

    return _with_source(server, body, **options)


def test_a_result_over_max_message_bytes_is_refused_and_the_next_call_succeeds(
    stdio_server: dict[str, Any], upstream_log: UpstreamLog
) -> None:
    # A stuck connection makes the second call time out (timeout_s), failing the test.
    async def body(source: McpToolSource) -> tuple[ToolOutput, ToolOutput]:
        refused = await source.call("big", {"size": 100_000_000})
        return refused, await source.call("echo", {"text": "still here"})

    refused, after = _with_source(with_extra(stdio_server, big=True), body, timeout_s=10)
    assert refused.is_error
    assert f"({KEY}.max_message_bytes)" in refused.content
    assert "\n" not in refused.content
    assert not after.is_error
    assert after.content == "echo: still here"
    assert [call["tool"] for call in upstream_log.calls()] == ["big", "echo"]


def test_a_result_over_max_message_bytes_over_http_is_refused_and_the_next_call_succeeds(
    upstream_log: UpstreamLog,
) -> None:
    async def body(source: McpToolSource) -> tuple[ToolOutput, ToolOutput]:
        refused = await source.call("big", {"size": 100_000_000})
        return refused, await source.call("echo", {"text": "still here"})

    with http_upstream(upstream_log, big=True) as url:
        refused, after = _with_source({"url": url}, body, timeout_s=10)
    assert refused.is_error
    assert f"({KEY}.max_message_bytes)" in refused.content
    assert (after.is_error, after.content) == (False, "echo: still here")


def test_a_result_over_max_result_bytes_is_refused_naming_the_key(
    stdio_server: dict[str, Any],
) -> None:
    async def body(source: McpToolSource) -> ToolOutput:
        return await source.call("big", {"size": 2_000_000})

    refused = _with_source(with_extra(stdio_server, big=True), body)
    assert refused.is_error
    assert f"({KEY}.max_result_bytes)" in refused.content
    assert len(refused.content) < 500


def test_a_long_tool_description_is_cut_with_a_marker(
    stdio_server: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    async def body(source: McpToolSource) -> str:
        return next(t.description for t in source.tools() if t.name == "long_doc")

    server = with_extra(stdio_server, description_bytes=5_000_000)
    with caplog.at_level(logging.WARNING, "agentplug.agent.mcp"):
        description = _with_source(server, body, prefix=False)
    assert len(description.encode()) <= 8192
    assert description.startswith("ddd")
    assert description.endswith("[description cut at 8192 bytes]")
    assert f"{KEY}.max_description_bytes" in caplog.text


def test_a_server_with_more_than_max_tools_offers_only_the_first_and_warns(
    stdio_server: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, "agentplug.agent.mcp"):
        names = _names(with_extra(stdio_server, tool_count=300), prefix=False)
    assert len(names) == 256
    assert names[:4] == ["echo", "web_search", "delete_everything", "t0000"]
    assert f"{KEY}.max_tools" in caplog.text


def test_a_tool_whose_schema_nests_too_deep_is_refused_with_a_warning(
    stdio_server: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, "agentplug.agent.mcp"):
        names = _names(with_extra(stdio_server, schema_depth=60), prefix=False)
    assert "deep" not in names
    assert "echo" in names
    assert "'deep'" in caplog.text and "'up'" in caplog.text
    assert f"{KEY}.max_schema_depth" in caplog.text


def test_a_tool_whose_schema_is_too_large_is_refused_with_a_warning(
    stdio_server: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, "agentplug.agent.mcp"):
        names = _names(with_extra(stdio_server, schema_properties=5000), prefix=False)
    assert "wide" not in names
    assert "echo" in names
    assert f"{KEY}.max_schema_bytes" in caplog.text


def test_upstream_names_that_become_one_tool_name_are_refused_naming_both(
    stdio_server: dict[str, Any],
) -> None:
    with pytest.raises(McpError) as raised:
        _names(with_extra(stdio_server, names=["a.b", "a_b"]))
    message = str(raised.value)
    assert "'a.b'" in message and "'a_b'" in message and "'up__a_b'" in message
    assert "MCP server 'up'" in message
    assert "\n" not in message


def test_two_servers_offering_one_tool_name_are_refused_naming_both(
    stdio_server: dict[str, Any],
) -> None:
    servers = {"one": {**stdio_server, "prefix": False}, "two": {**stdio_server, "prefix": False}}

    async def go() -> None:
        for source in await connect_servers(servers):
            await source.aclose()

    with pytest.raises(McpError) as raised:
        asyncio.run(go())
    message = str(raised.value)
    assert "'one'" in message and "'two'" in message and "'echo'" in message
    assert "\n" not in message


def test_a_namespaced_name_equal_to_another_servers_name_is_refused(
    stdio_server: dict[str, Any],
) -> None:
    servers = {
        "a": with_extra(stdio_server, names=["b__c"]),
        "a__b": with_extra(stdio_server, names=["c"]),
    }

    async def go() -> None:
        for source in await connect_servers(servers):
            await source.aclose()

    with pytest.raises(McpError, match=r"'a__b__c'") as raised:
        asyncio.run(go())
    assert "'b__c'" in str(raised.value) and "'c'" in str(raised.value)


def test_an_mcp_tool_named_like_a_direct_tool_is_refused_naming_both(
    stdio_server: dict[str, Any],
) -> None:
    runner = AgentRunner(
        PluginHost(),
        ScriptedProvider(["ok"]),
        config={"tools": {"actions": False, "mcp_servers": {"up": stdio_server}}},
    )
    runner.tools.add_python(lambda text: text, name="up__echo", description="A local echo.")

    async def go() -> None:
        try:
            await runner.connect_mcp()
        finally:
            await runner.aclose()

    with pytest.raises(McpError) as raised:
        asyncio.run(go())
    message = str(raised.value)
    assert "'up__echo'" in message and "'echo'" in message and "'up'" in message
    assert "python" in message


def test_tool_names_over_64_characters_after_the_prefix_are_not_offered(
    stdio_server: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    # Cut to 64 characters, the two names would have become one.
    long_names = ["x" * 62 + "_1", "x" * 62 + "_2"]
    server = with_extra(stdio_server, names=long_names)
    runner = AgentRunner(
        PluginHost(),
        ScriptedProvider(["ok"]),
        config={"tools": {"actions": False, "mcp_servers": {"up": server}}},
    )

    async def names() -> list[str]:
        try:
            await runner.connect_mcp()
            return [tool.name for tool in runner.tools.all()]
        finally:
            await runner.aclose()

    with caplog.at_level(logging.WARNING, "agentplug.agent.mcp"):
        offered = asyncio.run(names())
    assert offered == ["up__echo", "up__web_search", "up__delete_everything"]
    assert all(name in caplog.text for name in long_names)


def test_a_too_long_answer_whose_id_comes_last_is_refused_and_the_next_call_succeeds() -> None:
    server = {"command": sys.executable, "args": [str(RESULT_FIRST)]}

    async def body(source: McpToolSource) -> tuple[ToolOutput, ToolOutput]:
        refused = await source.call("big", {"size": 40_000_000})
        return refused, await source.call("echo", {"text": "still here"})

    refused, after = _with_source(server, body, timeout_s=10)
    assert refused.is_error
    assert f"({KEY}.max_message_bytes)" in refused.content
    assert (after.is_error, after.content) == (False, "echo: still here")


class _GzipAnswers:
    """An HTTP 'MCP server' answering every POST with a gzip body that inflates to 32 MiB
    (a few KB on the wire): what a client counting wire bytes would let through."""

    def __init__(self) -> None:
        import threading
        import zlib
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        packer = zlib.compressobj(9, zlib.DEFLATED, 31)
        head = b'{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-06-18","pad":"'
        parts = [packer.compress(head)]
        parts += [packer.compress(b"A" * (1 << 20)) for _ in range(32)]
        parts += [packer.compress(b'"}}'), packer.flush()]
        payload = b"".join(parts)

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("content-length") or 0))
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-encoding", "gzip")
                self.send_header("content-length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def do_GET(self) -> None:
                self.send_response(405)
                self.end_headers()

            def do_DELETE(self) -> None:
                self.send_response(200)
                self.end_headers()

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.httpd.server_port}/mcp"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def test_a_compressed_answer_is_refused_naming_the_encoding() -> None:
    server = _GzipAnswers()
    try:
        source = McpToolSource(
            "up", {"url": server.url, "max_message_bytes": 1 << 20, "timeout_s": 10}
        )

        async def start() -> None:
            try:
                await source.start()
            finally:
                await source.aclose()

        with pytest.raises(McpError) as raised:
            asyncio.run(start())
        assert "content-encoding" in str(raised.value) and "gzip" in str(raised.value)
    finally:
        server.close()


def test_an_mcp_tool_named_like_an_action_the_model_is_not_offered_is_refused(
    stdio_server: dict[str, Any],
) -> None:
    from agentplug.actions.model import Action, ActionResult

    class Plugin:
        """Registers ECHO, a side-effecting action that agent.tools does not offer."""

        actions = [
            Action(
                name="ECHO",
                description="Repeat a text on the office speaker.",
                handler=lambda rt, msg, st, opts: ActionResult(success=True, text="said"),
            )
        ]

    host = PluginHost()
    host.register(Plugin(), "speaker")
    server = {**stdio_server, "prefix": False}
    runner = AgentRunner(
        host, ScriptedProvider(["ok"]), config={"tools": {"mcp_servers": {"up": server}}}
    )

    async def go() -> Any:
        try:
            return await runner.run_turn("hi", session_key="s1")
        finally:
            await runner.aclose()

    result = asyncio.run(go())
    assert result.status == "failed"
    assert "'echo'" in (result.error or "") and "ECHO" in (result.error or "")
