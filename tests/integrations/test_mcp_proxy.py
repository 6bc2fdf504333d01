"""``agentplug mcp-proxy``: a real MCP client session through the proxy to a real server.

The proxy runs as a subprocess (``python -m agentplug.cli mcp-proxy``) with the
installed example plugins ``tool-preflight`` and ``audit-log`` plus a test plugin
installed as a real distribution (entry point ``agentplug``) that rewrites and fails;
the upstream server's own call log says which calls reached it.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.integrations.conftest import MCP_MISSING, UpstreamLog, with_extra

pytest.importorskip("mcp", reason=MCP_MISSING)
pytest.importorskip("uvicorn", reason="approvals through the proxy need the 'api' extra")

SECRET = "internal-detail-7f3a"

PLUGIN = f'''
from agentplug_hookspecs.tools import ToolCallResult

def before_tool_call(event):
    if event.tool_name == "echo" and event.params.get("text") == "boom":
        raise RuntimeError("{SECRET}")
    if event.tool_name == "echo" and event.params.get("text") == "quiet":
        return ToolCallResult(params={{"text": "QUIET"}})
    return None

def register(api):
    api.on("before_tool_call", before_tool_call)
'''


def _install_plugin(site: Path) -> None:
    site.mkdir()
    (site / "proxy_test_plugin.py").write_text(PLUGIN)
    info = site / "proxy_test_plugin-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: proxy-test-plugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[agentplug]\nproxy-test = proxy_test_plugin:register\n")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Proxy:
    """How to reach one proxy: the MCP server parameters and its control API."""

    def __init__(self, tmp: Path, stdio_server: dict[str, Any], **options: Any) -> None:
        from mcp import StdioServerParameters

        site = tmp / "site"
        _install_plugin(site)
        self.audit = tmp / "audit.jsonl"
        self.port = _free_port()
        self.token = "t" * 32
        token_file = tmp / "token"
        token_file.write_text(self.token)
        token_file.chmod(0o600)
        config = {
            "plugins": {
                "allow": ["tool-preflight", "audit-log", "proxy-test"],
                "entries": {
                    "tool-preflight": {"config": {"blocked_tools": ["delete_everything"]}},
                    "audit-log": {"config": {"path": str(self.audit)}},
                },
            },
            "agent": {
                "tools": {"mcp_servers": {"up": {**stdio_server, "prefix": False, **options}}}
            },
        }
        path = tmp / "agentplug.json"
        path.write_text(json.dumps(config))
        self.params = StdioServerParameters(
            command=sys.executable,
            args=[
                "-m",
                "agentplug.cli",
                "mcp-proxy",
                "--config",
                str(path),
                "--state-dir",
                str(tmp / "state"),
                "--api-port",
                str(self.port),
                "--token-file",
                str(token_file),
            ],
            env={"PYTHONPATH": str(site), "AGENTPLUG_CACHE_DIR": str(tmp / "cache")},
            cwd=str(tmp),
        )

    @property
    def api(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def audit_lines(self) -> list[dict[str, Any]]:
        if not self.audit.exists():
            return []
        return [json.loads(line) for line in self.audit.read_text().splitlines() if line]

    def run(self) -> subprocess.CompletedProcess[str]:
        """Run the proxy with no client (stdin at its end); its exit code and stderr."""
        return subprocess.run(
            [self.params.command, *self.params.args],
            env={**os.environ, **(self.params.env or {})},
            cwd=self.params.cwd,
            capture_output=True,
            text=True,
            timeout=120,
            stdin=subprocess.DEVNULL,
        )

    def session(self, body: Callable[[Any], Awaitable[Any]]) -> Any:
        from mcp import Client

        async def go() -> Any:
            async with Client(self.params, read_timeout_seconds=90) as client:
                return await body(client)

        return asyncio.run(go())


@pytest.fixture
def proxy(tmp_path: Path, stdio_server: dict[str, Any]) -> Proxy:
    return Proxy(tmp_path, stdio_server)


def _text(result: Any) -> str:
    return "\n".join(block.text for block in result.content if block.type == "text")


def test_the_proxy_lists_the_upstream_servers_tools(proxy: Proxy) -> None:
    async def body(client: Any) -> list[str]:
        return sorted(tool.name for tool in (await client.list_tools()).tools)

    assert proxy.session(body) == ["delete_everything", "echo", "web_search"]


def test_an_allowed_call_reaches_the_upstream_server_and_the_audit_log_sees_it(
    proxy: Proxy, upstream_log: UpstreamLog
) -> None:
    async def body(client: Any) -> Any:
        return await client.call_tool("echo", {"text": "hello"})

    result = proxy.session(body)
    assert not result.is_error
    assert _text(result) == "echo: hello"
    assert upstream_log.calls() == [{"tool": "echo", "arguments": {"text": "hello"}}]
    hooks = [(line["hook"], line.get("event", {}).get("tool_name")) for line in proxy.audit_lines()]
    assert ("before_tool_call", "echo") in hooks
    assert ("after_tool_call", "echo") in hooks


def test_a_blocked_call_is_a_tool_error_with_the_public_reason_and_never_reaches_upstream(
    proxy: Proxy, upstream_log: UpstreamLog
) -> None:
    async def body(client: Any) -> Any:
        return await client.call_tool("delete_everything", {"confirm": True})

    result = proxy.session(body)
    assert result.is_error
    assert "blocked by the operator" in _text(result)
    assert upstream_log.calls() == []


def test_a_failing_handler_blocks_without_its_confidential_message(
    proxy: Proxy, upstream_log: UpstreamLog
) -> None:
    async def body(client: Any) -> Any:
        return await client.call_tool("echo", {"text": "boom"})

    result = proxy.session(body)
    assert result.is_error
    assert SECRET not in _text(result)
    assert "proxy-test" in _text(result)
    assert upstream_log.calls() == []


def test_rewritten_params_are_what_the_upstream_server_receives(
    proxy: Proxy, upstream_log: UpstreamLog
) -> None:
    async def body(client: Any) -> Any:
        return await client.call_tool("echo", {"text": "quiet"})

    assert _text(proxy.session(body)) == "echo: QUIET"
    assert upstream_log.calls() == [{"tool": "echo", "arguments": {"text": "QUIET"}}]


async def _answer_first_approval(proxy: Proxy, decision: str) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {proxy.token}"}
    async with httpx.AsyncClient(base_url=proxy.api, headers=headers, timeout=10) as http:
        for _ in range(600):
            pending = (await http.get("/api/approvals")).json()["pending"]
            if pending:
                answer = await http.post(
                    f"/api/approvals/{pending[0]['id']}", json={"decision": decision}
                )
                assert answer.status_code == 200, answer.text
                return dict(pending[0])
            await asyncio.sleep(0.1)
    raise AssertionError("no approval became pending")


def _search_with_answer(proxy: Proxy, decision: str) -> tuple[Any, dict[str, Any]]:
    async def body(client: Any) -> tuple[Any, dict[str, Any]]:
        call = asyncio.ensure_future(client.call_tool("web_search", {"query": "mcp"}))
        pending = await _answer_first_approval(proxy, decision)
        return await call, pending

    result: tuple[Any, dict[str, Any]] = proxy.session(body)
    return result


def test_an_approval_waits_for_the_control_api_and_allow_once_runs_the_call(
    proxy: Proxy, upstream_log: UpstreamLog
) -> None:
    result, pending = _search_with_answer(proxy, "allow-once")
    assert pending["title"] == "Run web search"
    assert not result.is_error
    assert _text(result) == "results for mcp"
    assert upstream_log.calls() == [{"tool": "web_search", "arguments": {"query": "mcp"}}]


def test_an_approval_denied_through_the_control_api_never_reaches_upstream(
    proxy: Proxy, upstream_log: UpstreamLog
) -> None:
    result, _ = _search_with_answer(proxy, "deny")
    assert result.is_error
    assert "denied" in _text(result)
    assert upstream_log.calls() == []


def test_an_approval_decided_at_the_proxys_api_is_recorded_as_mcp_and_a_late_one_is_409(
    proxy: Proxy, upstream_log: UpstreamLog
) -> None:
    async def body(client: Any) -> tuple[Any, list[httpx.Response]]:
        call = asyncio.ensure_future(client.call_tool("web_search", {"query": "mcp"}))
        pending = await _answer_first_approval(proxy, "allow-once")
        headers = {"Authorization": f"Bearer {proxy.token}"}
        async with httpx.AsyncClient(base_url=proxy.api, headers=headers, timeout=10) as http:
            result = await call
            late = await http.post(f"/api/approvals/{pending['id']}", json={"decision": "deny"})
        return result, [late]

    result, (late,) = proxy.session(body)
    assert not result.is_error
    assert late.status_code == 409, late.text
    assert late.json()["by"] == "mcp"
    assert "was already resolved (allow-once by mcp at " in late.json()["error"]


async def _cli(*args: str) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "agentplug.cli",
        "approvals",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await proc.communicate()
    return int(proc.returncode or 0), out.decode()


def test_an_approval_answered_from_the_cli_with_allow_always_grants_the_next_call(
    proxy: Proxy, tmp_path: Path, upstream_log: UpstreamLog
) -> None:
    api = ["--api", proxy.api, "--token-file", str(tmp_path / "token")]

    async def body(client: Any) -> tuple[Any, Any, str]:
        first = asyncio.ensure_future(client.call_tool("web_search", {"query": "one"}))
        for _ in range(600):  # a hang guard: the pending approval is what is awaited
            code, listing = await _cli("pending", "--json", *api)
            assert code == 0, listing
            pending = json.loads(listing)
            if pending:
                break
            await asyncio.sleep(0.1)
        else:
            raise AssertionError("no approval became pending")
        code, answer = await _cli("resolve", pending[0]["id"], "allow-always", *api)
        assert code == 0, answer
        second = await client.call_tool("web_search", {"query": "two"})  # the grant answers
        return await first, second, answer

    first, second, answer = proxy.session(body)
    assert "allow-always" in answer
    assert not first.is_error and not second.is_error
    assert [c["arguments"]["query"] for c in upstream_log.calls()] == ["one", "two"]


def _proxy_cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agentplug.cli", "mcp-proxy", *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )


def test_the_proxy_refuses_to_serve_its_api_beyond_loopback(tmp_path: Path) -> None:
    done = _proxy_cli(tmp_path, "--api-port", "0", "--api-host", "0.0.0.0")
    assert done.returncode == 2
    assert "refusing to bind the control API to '0.0.0.0'" in done.stderr
    assert done.stdout == ""  # stdout is the MCP channel


def test_the_proxy_without_upstream_servers_says_which_key_to_set(tmp_path: Path) -> None:
    (tmp_path / "empty.json").write_text("{}")
    done = _proxy_cli(tmp_path, "--config", "empty.json", "--no-plugins")
    assert done.returncode == 2
    assert "agent.tools.mcp_servers" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_the_proxy_cuts_a_long_upstream_description_in_tools_list(
    tmp_path: Path, stdio_server: dict[str, Any]
) -> None:
    proxy = Proxy(tmp_path, with_extra(stdio_server, description_bytes=5_000_000))

    async def body(client: Any) -> str:
        listed = (await client.list_tools()).tools
        return next(str(tool.description) for tool in listed if tool.name == "long_doc")

    description = proxy.session(body)
    assert len(description.encode()) <= 8192
    assert description.endswith("[description cut at 8192 bytes]")


def test_the_proxy_lists_at_most_max_tools_of_a_server(
    tmp_path: Path, stdio_server: dict[str, Any]
) -> None:
    proxy = Proxy(tmp_path, with_extra(stdio_server, tool_count=300))

    async def body(client: Any) -> int:
        return len((await client.list_tools()).tools)

    assert proxy.session(body) == 256


def test_the_proxy_refuses_a_too_large_result_and_the_next_call_succeeds(
    tmp_path: Path, stdio_server: dict[str, Any]
) -> None:
    # timeout_s bounds each upstream call: a stuck upstream connection fails the second one.
    proxy = Proxy(tmp_path, with_extra(stdio_server, big=True), timeout_s=10)

    async def body(client: Any) -> tuple[Any, Any]:
        refused = await client.call_tool("big", {"size": 100_000_000})
        return refused, await client.call_tool("echo", {"text": "after"})

    refused, after = proxy.session(body)
    assert refused.is_error
    assert "agent.tools.mcp_servers.up.max_message_bytes" in _text(refused)
    assert not after.is_error
    assert _text(after) == "echo: after"


def test_the_proxy_refuses_to_start_when_two_upstream_names_become_one(
    tmp_path: Path, stdio_server: dict[str, Any]
) -> None:
    done = Proxy(tmp_path, with_extra(stdio_server, names=["a.b", "a_b"])).run()
    assert done.returncode == 1
    errors = [line for line in done.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1
    assert "'a.b'" in errors[0] and "'a_b'" in errors[0] and "'up'" in errors[0]
