"""JavaScript escape attempts must fail; the JS path runs behind the same OS isolation."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from agentplug.sandbox import CodeSandbox, FetchRequest, FetchResponse, SandboxResult

pytestmark = pytest.mark.javascript

TIME_LIMIT_S = 1.5
# What the sandbox reports when it ends a run at one of its limits (never how long it took:
# the machine may be loaded, and a slow kill is still a kill).
TIME_LIMIT_ERROR = f"timed out after {TIME_LIMIT_S:g}s (the sandbox process was killed)"
CPU_LIMIT_ERROR = "sandbox process ended: CPU time limit exceeded"
MEMORY_LIMIT_ERROR = "memory limit exceeded (the process was killed)"
FILE_SECRET = "agentplug-file-secret-1b8e44"
HOST_ENV_SECRET = "agentplug-env-secret-7f3a9c"


def run_js(sandbox: CodeSandbox, code: str, params: dict[str, str] | None = None) -> SandboxResult:
    """Run JavaScript ``code`` with the standard test limits."""
    return asyncio.run(
        sandbox.run(code, params or {}, language="javascript", timeout_s=TIME_LIMIT_S)
    )


def leaked(result: SandboxResult) -> bool:
    """Whether a secret reached the host through the result."""
    text = f"{result.output}\n{result.error}"
    return FILE_SECRET in text or HOST_ENV_SECRET in text


@pytest.fixture
def js_params(targets: Any) -> dict[str, str]:
    """Paths and port of the shared targets, for code that tries to reach them."""
    return {"secret": str(targets.secret_file), "port": str(targets.server_port)}


def test_function_constructor_cannot_reach_process(sandbox: CodeSandbox) -> None:
    r = run_js(sandbox, "return this.constructor.constructor('return process')().env;")
    assert not r.ok
    assert "process is not defined" in (r.error or "")
    assert not leaked(r)


def test_function_constructor_global_has_no_host_objects(sandbox: CodeSandbox) -> None:
    r = run_js(
        sandbox,
        "const g = Function('return this')();"
        "return ['process','require','module','Deno','Bun','os','fs'].filter(k => k in g);",
    )
    assert r.ok, r.error
    assert json.loads(r.output) == []


def test_require_is_not_available(sandbox: CodeSandbox, js_params: dict[str, str]) -> None:
    r = run_js(sandbox, "return require('fs').readFileSync(params.secret, 'utf8');", js_params)
    assert not r.ok
    assert "require is not defined" in (r.error or "")
    assert not leaked(r)


def test_dynamic_import_is_not_available(sandbox: CodeSandbox) -> None:
    r = run_js(sandbox, "const fs = await import('fs'); return fs.readFileSync('/etc/hostname');")
    assert not r.ok


def test_global_this_exposes_only_language_builtins(sandbox: CodeSandbox) -> None:
    r = run_js(sandbox, "return Object.getOwnPropertyNames(globalThis);")
    assert r.ok, r.error
    names = set(json.loads(r.output))
    assert not names & {"process", "require", "module", "global", "Buffer", "__dirname"}
    assert {"params", "fetch"} <= names


def test_host_environment_is_not_reachable(sandbox: CodeSandbox) -> None:
    r = run_js(
        sandbox,
        "try { return JSON.stringify(process.env); } catch (e) {}"
        "try { return globalThis.constructor.constructor('return process')().env; }"
        "catch (e) { return 'no process: ' + e.message; }",
    )
    assert r.ok and r.output.startswith("no process")
    assert not leaked(r)


def killed_at_a_limit(result: SandboxResult) -> bool:
    """The run failed because the sandbox killed it at its time, CPU or memory limit.

    Which limit a flood reaches first depends on how fast the machine runs it: a
    microtask chain grows the heap as it spins, so a slow machine meets the wall-clock
    limit and a fast one the memory limit. Each is the sandbox doing its job.
    """
    return not result.ok and result.error in (
        TIME_LIMIT_ERROR,
        CPU_LIMIT_ERROR,
        MEMORY_LIMIT_ERROR,
    )


def test_infinite_loop_is_killed(sandbox: CodeSandbox) -> None:
    r = run_js(sandbox, "while (true) {}")
    assert r.timed_out and not r.ok
    assert r.error == TIME_LIMIT_ERROR


def test_busy_loop_inside_a_promise_is_killed(sandbox: CodeSandbox) -> None:
    r = run_js(sandbox, "await new Promise(() => { while (true) {} }); return 'never';")
    assert r.timed_out
    assert r.error == TIME_LIMIT_ERROR


def test_promise_that_never_settles_is_killed(sandbox: CodeSandbox) -> None:
    r = run_js(sandbox, "await new Promise(() => {}); return 'never';")
    assert r.timed_out
    assert r.error == TIME_LIMIT_ERROR


def test_microtask_flood_is_killed(sandbox: CodeSandbox) -> None:
    r = run_js(
        sandbox,
        "const spin = () => Promise.resolve().then(spin); spin(); await new Promise(() => {});",
    )
    assert killed_at_a_limit(r), r


def test_memory_blowup_is_stopped(sandbox: CodeSandbox) -> None:
    r = asyncio.run(
        sandbox.run(
            "const a = []; while (true) { a.push(new Array(1e6).fill(1.5)); }",
            {},
            language="javascript",
            timeout_s=10,
            memory_mb=64,
        )
    )
    assert not r.ok
    assert not r.timed_out, "memory must be bounded before the time limit"
    assert "out of memory" in (r.error or "") or r.error == MEMORY_LIMIT_ERROR, r


def test_huge_string_output_is_bounded(sandbox: CodeSandbox) -> None:
    r = asyncio.run(
        sandbox.run(
            "return 'x'.repeat(5 * 1024 * 1024);",
            {},
            language="javascript",
            timeout_s=5,
            max_output_bytes=1000,
        )
    )
    assert r.ok and r.truncated
    assert len(r.output) < 1100


def test_params_are_frozen(sandbox: CodeSandbox) -> None:
    r = run_js(
        sandbox,
        "'use strict';"
        "try { params.id = 'changed'; } catch (e) {}"
        "try { globalThis.params = {id: 'replaced'}; } catch (e) {}"
        "return [params.id, Object.isFrozen(params), globalThis.params.id];",
        {"id": "original"},
    )
    assert r.ok, r.error
    assert json.loads(r.output) == ["original", True, "original"]


def test_fetch_cannot_be_replaced_to_bypass_the_host(sandbox: CodeSandbox) -> None:
    calls: list[FetchRequest] = []

    async def fake_fetch(request: FetchRequest) -> FetchResponse:
        calls.append(request)
        return FetchResponse(status=200, body="via host")

    async def main() -> SandboxResult:
        return await sandbox.run(
            "try { globalThis.fetch = async () => ({text: async () => 'forged'}); } catch (e) {}"
            "const r = await globalThis.fetch('https://example.org/'); return await r.text();",
            {},
            language="javascript",
            timeout_s=5,
            fetch=fake_fetch,
        )

    r = asyncio.run(main())
    assert r.ok and r.output == "via host"
    assert [c.url for c in calls] == ["https://example.org/"]


def test_no_network_without_the_fetch_bridge(sandbox: CodeSandbox, targets: Any) -> None:
    before = len(targets.connections)
    r = run_js(
        sandbox,
        "const r = await fetch('http://127.0.0.1:' + params.port + '/'); return r.status;",
        {"port": str(targets.server_port)},
    )
    assert not r.ok
    assert "fetch is not available" in (r.error or "")
    assert len(targets.connections) == before
