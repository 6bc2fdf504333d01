"""Behaviour of the code handler: return values, params, fetch bridging, language rule."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from agentplug.actions.code_handler import CodeHandlerDef, detect_language, run_code_handler
from agentplug.sandbox import (
    CodeSandbox,
    FetchRequest,
    FetchResponse,
    SandboxResult,
    SandboxUnavailableError,
)

SEED_HANDLER = {
    "type": "code",
    "code": (
        "const res = await fetch('https://api.example.com/data/' + params.id); "
        "return await res.text();"
    ),
}


class FakeFetch:
    """Records requests and answers with a fixed JSON body."""

    def __init__(self, status: int = 200) -> None:
        self.status = status
        self.requests: list[FetchRequest] = []

    async def __call__(self, request: FetchRequest) -> FetchResponse:
        self.requests.append(request)
        body = json.dumps({"url": request.url, "method": request.method, "body": request.body})
        return FetchResponse(status=self.status, headers={"x-test": "1"}, body=body)


def py(
    sandbox: CodeSandbox, code: str, params: dict[str, str] | None = None, **kw: Any
) -> SandboxResult:
    """Run Python ``code`` in the shared sandbox."""
    return asyncio.run(sandbox.run(code, params or {}, timeout_s=5, **kw))


def test_string_return_value_is_the_output(sandbox: CodeSandbox) -> None:
    r = py(sandbox, "return 'hello ' + params['name']", {"name": "Ada"})
    assert r.ok and r.output == "hello Ada"


def test_other_return_values_are_json_encoded(sandbox: CodeSandbox) -> None:
    r = py(sandbox, "return {'n': 1, 'items': [1, 2], 'ok': True}")
    assert r.ok and json.loads(r.output) == {"n": 1, "items": [1, 2], "ok": True}


def test_returning_nothing_gives_done(sandbox: CodeSandbox) -> None:
    assert py(sandbox, "x = 1").output == "Done"


@pytest.mark.javascript
def test_returning_nothing_gives_done_in_javascript(sandbox: CodeSandbox) -> None:
    r = asyncio.run(sandbox.run("let x = 1;", {}, language="javascript", timeout_s=5))
    assert r.ok and r.output == "Done"


def test_params_are_read_only_in_python(sandbox: CodeSandbox) -> None:
    r = py(sandbox, "params['x'] = 'changed'", {"x": "1"})
    assert not r.ok and "TypeError" in (r.error or "")
    r = py(sandbox, "params.x = 'changed'", {"x": "1"})
    assert not r.ok and "read-only" in (r.error or "")


def test_params_support_attribute_access_like_the_seed(sandbox: CodeSandbox) -> None:
    r = py(sandbox, "return params.city + '!'", {"city": "London"})
    assert r.ok and r.output == "London!"


def test_code_errors_are_reported_not_raised(sandbox: CodeSandbox) -> None:
    r = py(sandbox, "raise ValueError('boom')")
    assert not r.ok and r.error == "ValueError: boom"
    r = py(sandbox, "return (")
    assert not r.ok and "SyntaxError" in (r.error or "")


def test_fetch_is_bridged_to_the_host_callable_in_python(sandbox: CodeSandbox) -> None:
    fake = FakeFetch()
    code = (
        "r = await fetch('https://api.example.com/x', "
        "{'method': 'post', 'headers': {'A': 'b'}, 'body': 'payload'})\n"
        "data = await r.json()\n"
        "return [r.status, r.ok, data['method'], data['body'], r.headers['x-test']]"
    )
    r = py(sandbox, code, fetch=fake)
    assert r.ok, r.error
    assert json.loads(r.output) == [200, True, "POST", "payload", "1"]
    assert fake.requests == [
        FetchRequest(
            url="https://api.example.com/x", method="POST", headers={"A": "b"}, body="payload"
        )
    ]


@pytest.mark.javascript
def test_fetch_is_bridged_to_the_host_callable_in_javascript(sandbox: CodeSandbox) -> None:
    fake = FakeFetch(status=404)
    code = (
        "const r = await fetch('https://api.example.com/y', {method: 'PUT', body: 'b'});"
        "const data = await r.json(); return [r.status, r.ok, data.method, data.body];"
    )
    r = asyncio.run(sandbox.run(code, {}, language="javascript", timeout_s=5, fetch=fake))
    assert r.ok, r.error
    assert json.loads(r.output) == [404, False, "PUT", "b"]


def test_fetch_without_a_host_callable_fails_cleanly(sandbox: CodeSandbox) -> None:
    r = py(sandbox, "await fetch('https://example.org')")
    assert not r.ok and "fetch is not available" in (r.error or "")


def test_fetch_errors_of_the_host_callable_reach_the_code(sandbox: CodeSandbox) -> None:
    async def refusing(request: FetchRequest) -> FetchResponse:
        raise PermissionError(f"blocked by SSRF guard: {request.url}")

    code = (
        "try:\n    await fetch('http://169.254.169.254/')\n"
        "except Exception as exc:\n    return str(exc)"
    )
    r = py(sandbox, code, fetch=refusing)
    assert r.ok and "blocked by SSRF guard" in r.output


@pytest.mark.javascript
def test_seed_javascript_definition_runs_unchanged(sandbox: CodeSandbox) -> None:
    fake = FakeFetch()
    defn = CodeHandlerDef.model_validate(SEED_HANDLER)
    out = asyncio.run(run_code_handler(defn, {"id": "42"}, sandbox=sandbox, fetch=fake))
    assert out.ok, out.output
    assert json.loads(out.output)["url"] == "https://api.example.com/data/42"


def test_code_handler_failure_gives_ok_false_with_the_reason(sandbox: CodeSandbox) -> None:
    defn = CodeHandlerDef(code="while True:\n    pass")
    out = asyncio.run(run_code_handler(defn, {}, sandbox=sandbox, fetch=None, timeout_s=1))
    assert not out.ok and "timed out" in out.output


@pytest.mark.parametrize(
    ("definition", "language"),
    [
        ({"code": "return 'hi'"}, "python"),
        ({"code": "return params.id"}, "python"),
        ({"code": "x = await fetch('u')\nreturn x.status"}, "python"),
        (SEED_HANDLER, "javascript"),
        ({"code": "const x = 1; return x;"}, "javascript"),
        ({"code": "return params.a === 'b';"}, "javascript"),
        ({"code": "return (", "language": None}, "python"),
        ({"code": "return 'hi'", "language": "javascript"}, "javascript"),
        ({"code": "const x = 1;", "language": "python"}, "python"),
    ],
)
def test_language_rule_explicit_wins_then_python_then_js_markers(
    definition: dict[str, Any], language: str
) -> None:
    assert detect_language(CodeHandlerDef.model_validate(definition)) == language


def test_sandbox_isolation_report_lists_active_layers(sandbox: CodeSandbox) -> None:
    py(sandbox, "return 1")
    report = sandbox.isolation("python")
    assert "separate-process" in report["active"]
    # On a machine that lacks a layer it is listed in "missing" with the reason.
    assert all(isinstance(m, str) and m for m in report["missing"])


def test_closed_sandbox_refuses_to_run() -> None:
    box = CodeSandbox(pool_size=0)
    box.close()
    with pytest.raises(SandboxUnavailableError, match="closed"):
        asyncio.run(box.run("return 1", {}))


def test_invalid_arguments_are_rejected(sandbox: CodeSandbox) -> None:
    with pytest.raises(ValueError, match="language"):
        asyncio.run(sandbox.run("return 1", {}, language="ruby"))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="timeout_s"):
        asyncio.run(sandbox.run("return 1", {}, timeout_s=0))


@pytest.mark.javascript
def test_console_exists_in_javascript_and_prints_are_not_the_output(sandbox: CodeSandbox) -> None:
    r = asyncio.run(
        sandbox.run("console.log('noise'); return 'value';", {}, language="javascript", timeout_s=5)
    )
    assert r.ok and r.output == "value"


def test_prints_are_not_the_output_in_python(sandbox: CodeSandbox) -> None:
    assert py(sandbox, "print('noise')\nreturn 'value'").output == "value"


def test_oversized_params_are_refused(sandbox: CodeSandbox) -> None:
    r = py(sandbox, "return 1", {"big": "x" * (2 * 1024 * 1024)})
    assert not r.ok and "params too large" in (r.error or "")
