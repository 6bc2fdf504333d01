"""Custom actions defined in the config file (ACTIONS.md section 3)."""

from __future__ import annotations

import asyncio
import copy
import inspect
import json
import threading
from collections.abc import Collection, Iterator, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from agentplug.actions.custom import (
    CodeHandlerDef,
    CustomActionConfigError,
    CustomActionDef,
    CustomActionServices,
    HttpHandlerDef,
    ShellHandlerDef,
    bind_runtime,
    build_test_handler,
    def_to_action,
    load_custom_actions,
    register_custom_action_live,
)
from agentplug.actions.flow import SimpleActionRuntime, run_action_flow
from agentplug.actions.handler_output import HandlerOutput
from agentplug.actions.model import ActionResult, HandlerOptions, Message
from agentplug.actions.registry import ActionConflictError, ActionRegistry
from agentplug.security.ssrf import SSRFPolicy

SEED_WEATHER: dict[str, Any] = {
    "id": "weather-check",
    "name": "CHECK_WEATHER",
    "description": "Check the current weather for a given city",
    "similes": ["WEATHER", "GET_WEATHER", "FORECAST"],
    "parameters": [
        {"name": "city", "description": "The city name to check weather for", "required": True}
    ],
    "handler": {"type": "http", "method": "GET", "url": "https://wttr.in/{{city}}?format=3"},
    "enabled": True,
    "createdAt": "2025-01-01T00:00:00Z",
    "updatedAt": "2025-01-01T00:00:00Z",
}


def definition(**changes: Any) -> dict[str, Any]:
    entry = copy.deepcopy(SEED_WEATHER)
    entry.update(changes)
    return entry


class StandIns:
    """Handler back-ends that record calls instead of doing I/O."""

    def __init__(self, output: HandlerOutput | None = None, error: Exception | None = None) -> None:
        self.calls: list[tuple[str, dict[str, str]]] = []
        self.output = output or HandlerOutput(ok=True, output="London: +12C")
        self.error = error

    async def _answer(self, kind: str, params: Mapping[str, str]) -> HandlerOutput:
        self.calls.append((kind, dict(params)))
        if self.error is not None:
            raise self.error
        return self.output

    async def http(
        self, defn: HttpHandlerDef, params: Mapping[str, str], declared: Collection[str]
    ) -> HandlerOutput:
        return await self._answer("http", params)

    async def shell(
        self, defn: ShellHandlerDef, params: Mapping[str, str], declared: Collection[str]
    ) -> HandlerOutput:
        return await self._answer("shell", params)

    async def code(self, defn: CodeHandlerDef, params: Mapping[str, str]) -> HandlerOutput:
        return await self._answer("code", params)

    @property
    def services(self) -> CustomActionServices:
        return CustomActionServices(http=self.http, shell=self.shell, code=self.code)


def run_handler(defn: Any, params: dict[str, Any], services: CustomActionServices) -> ActionResult:
    action = def_to_action(defn, services=services)

    async def call() -> object:
        options = HandlerOptions(parameters=params)
        returned = action.handler(SimpleActionRuntime(), Message(text=""), None, options)
        assert inspect.isawaitable(returned)
        return await returned

    result = asyncio.run(call())
    assert isinstance(result, ActionResult)
    return result


# ---------------------------------------------------------------------------
# A real HTTP server on loopback


class _Recorder(BaseHTTPRequestHandler):
    requests: list[dict[str, Any]]

    def _reply(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length).decode() if length else ""
        self.server.requests.append(  # type: ignore[attr-defined]
            {
                "method": self.command,
                "path": self.path,
                "body": body,
                "content_type": self.headers.get("Content-Type"),
            }
        )
        status = 500 if self.path.startswith("/fail") else 200
        payload = json.dumps({"method": self.command, "path": self.path, "body": body})
        data = payload.encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = _reply

    def log_message(self, format: str, *args: Any) -> None:
        """Keep test output quiet."""


class LocalServer:
    def __init__(self) -> None:
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
        self.httpd.requests = []  # type: ignore[attr-defined]
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    @property
    def requests(self) -> list[dict[str, Any]]:
        recorded: list[dict[str, Any]] = self.httpd.requests  # type: ignore[attr-defined]
        return recorded

    @property
    def policy(self) -> SSRFPolicy:
        return SSRFPolicy(allow_hosts=[f"127.0.0.1:{self.httpd.server_address[1]}"])


@pytest.fixture
def server() -> Iterator[LocalServer]:
    local = LocalServer()
    local.thread.start()
    yield local
    local.httpd.shutdown()
    local.httpd.server_close()


# ---------------------------------------------------------------------------
# Definitions and loading


def test_seed_definition_loads_unchanged() -> None:
    defn = CustomActionDef.model_validate(SEED_WEATHER)
    assert defn.created_at == "2025-01-01T00:00:00Z"
    assert isinstance(defn.handler, HttpHandlerDef)
    assert defn.model_dump(by_alias=True, exclude_none=True) == SEED_WEATHER


def test_seed_handler_shapes_all_load() -> None:
    handlers = [
        {
            "type": "http",
            "method": "POST",
            "url": "https://api.example.com/data/{{query}}",
            "headers": {"Authorization": "Bearer sk-xxx", "Content-Type": "application/json"},
            "bodyTemplate": '{"search": "{{query}}"}',
        },
        {"type": "shell", "command": "curl -s https://api.example.com/status?q={{query}}"},
        {
            "type": "code",
            "code": "const res = await fetch('https://api.example.com/data/' + params.id); "
            "return await res.text();",
        },
    ]
    kinds = [type(CustomActionDef.model_validate(definition(handler=h)).handler) for h in handlers]
    assert kinds == [HttpHandlerDef, ShellHandlerDef, CodeHandlerDef]


def test_load_keeps_only_enabled_definitions() -> None:
    config = {
        "customActions": [
            definition(),
            definition(id="off", name="TURNED_OFF", enabled=False),
        ]
    }
    result = load_custom_actions(config, services=StandIns().services)
    assert [a.name for a in result.actions] == ["CHECK_WEATHER"]
    assert [d.id for d in result.disabled] == ["off"]
    assert result.errors == []


def test_malformed_entry_is_reported_with_index_id_and_field_and_the_others_load() -> None:
    broken = definition(id="broken", name="BROKEN")
    del broken["handler"]["url"]
    config = {"customActions": [broken, definition(id="ok", name="FINE")]}
    result = load_custom_actions(config, services=StandIns().services)
    assert [a.name for a in result.actions] == ["FINE"]
    assert [(e.index, e.id, e.field) for e in result.errors] == [(0, "broken", "handler.url")]
    assert "customActions[0] (id 'broken'): field 'handler.url'" in str(result.errors[0])


def test_unknown_handler_type_is_reported_on_the_handler_field() -> None:
    config = {"customActions": [definition(handler={"type": "ftp", "url": "x"})]}
    result = load_custom_actions(config, services=StandIns().services)
    assert result.actions == []
    assert [(e.index, e.field) for e in result.errors] == [(0, "handler")]
    assert "ftp" in result.errors[0].message


def test_entry_that_is_not_an_object_is_reported() -> None:
    result = load_custom_actions(
        {"customActions": ["CHECK_WEATHER", definition()]}, services=StandIns().services
    )
    assert [a.name for a in result.actions] == ["CHECK_WEATHER"]
    assert [(e.index, e.field) for e in result.errors] == [(0, "(entry)")]


def test_missing_required_field_is_reported_by_its_camel_case_name() -> None:
    entry = definition()
    del entry["createdAt"]
    result = load_custom_actions({"customActions": [entry]}, services=StandIns().services)
    assert [e.field for e in result.errors] == ["createdAt"]


def test_timestamp_must_be_iso_8601() -> None:
    result = load_custom_actions(
        {"customActions": [definition(updatedAt="yesterday")]}, services=StandIns().services
    )
    assert [e.field for e in result.errors] == ["updatedAt"]
    assert "ISO 8601" in result.errors[0].message


def test_blank_description_is_reported() -> None:
    result = load_custom_actions(
        {"customActions": [definition(description=" ")]}, services=StandIns().services
    )
    assert [e.field for e in result.errors] == ["description"]


def test_duplicate_id_is_reported_and_the_later_entry_skipped() -> None:
    config = {"customActions": [definition(), definition(name="OTHER_NAME")]}
    result = load_custom_actions(config, services=StandIns().services)
    assert [a.name for a in result.actions] == ["CHECK_WEATHER"]
    assert [(e.index, e.field) for e in result.errors] == [(1, "id")]


def test_config_file_path_is_read(tmp_path: Path) -> None:
    path = tmp_path / "eliza.json"
    path.write_text(json.dumps({"customActions": [definition()], "other": 1}))
    result = load_custom_actions(path, services=StandIns().services)
    assert [a.name for a in result.actions] == ["CHECK_WEATHER"]


def test_unreadable_config_raises_naming_the_path(tmp_path: Path) -> None:
    missing = tmp_path / "nope.json"
    with pytest.raises(CustomActionConfigError, match=r"nope\.json"):
        load_custom_actions(missing)


def test_custom_actions_must_be_an_array() -> None:
    with pytest.raises(CustomActionConfigError, match="'customActions' must be a JSON array"):
        load_custom_actions({"customActions": {"id": "x"}})


def test_config_without_custom_actions_loads_nothing() -> None:
    result = load_custom_actions({"plugins": {}}, services=StandIns().services)
    assert (result.actions, result.errors) == ([], [])


# ---------------------------------------------------------------------------
# Conversion


def test_every_parameter_is_typed_string() -> None:
    entry = definition(
        parameters=[
            {"name": "city", "description": "c", "required": True},
            {"name": "days", "description": "d", "required": False},
        ]
    )
    action = def_to_action(entry, services=StandIns().services)
    assert [(p.name, p.required, p.schema_.type) for p in action.parameters] == [
        ("city", True, "string"),
        ("days", False, "string"),
    ]
    assert action.similes == ("WEATHER", "GET_WEATHER", "FORECAST")


def test_validate_always_passes() -> None:
    action = def_to_action(definition(), services=StandIns().services)

    async def call() -> object:
        allowed = action.validate(SimpleActionRuntime(), Message(text="anything"), None)
        return await allowed if inspect.isawaitable(allowed) else allowed

    assert asyncio.run(call()) is True


def test_missing_required_parameter_fails_before_any_io() -> None:
    stand_ins = StandIns()
    result = run_handler(definition(), {}, stand_ins.services)
    assert result == ActionResult(success=False, text="Missing required parameter: city")
    assert stand_ins.calls == []


def test_success_result_carries_output_action_id_and_params() -> None:
    stand_ins = StandIns()
    result = run_handler(definition(), {"city": "London", "undeclared": "x"}, stand_ins.services)
    assert result == ActionResult(
        success=True,
        text="London: +12C",
        data={"action_id": "weather-check", "params": {"city": "London"}},
    )
    assert stand_ins.calls == [("http", {"city": "London"})]


def test_handler_not_ok_gives_a_failed_result_with_its_output() -> None:
    stand_ins = StandIns(output=HandlerOutput(ok=False, output="HTTP 503"))
    result = run_handler(definition(), {"city": "London"}, stand_ins.services)
    assert (result.success, result.text) == (False, "HTTP 503")


def test_raised_error_becomes_action_failed() -> None:
    stand_ins = StandIns(error=RuntimeError("terminal service is down"))
    result = run_handler(definition(), {"city": "London"}, stand_ins.services)
    assert result == ActionResult(success=False, text="Action failed: terminal service is down")


def test_each_handler_type_runs_through_its_own_back_end() -> None:
    stand_ins = StandIns()
    for handler in (
        {"type": "shell", "command": "echo {{city}}"},
        {"type": "code", "code": "return params['city']"},
    ):
        run_handler(definition(handler=handler), {"city": "Rome"}, stand_ins.services)
    assert [kind for kind, _ in stand_ins.calls] == ["shell", "code"]


def test_non_string_parameter_values_are_passed_as_strings() -> None:
    stand_ins = StandIns()
    run_handler(definition(), {"city": 42}, stand_ins.services)
    assert stand_ins.calls == [("http", {"city": "42"})]


# ---------------------------------------------------------------------------
# Live registration and test handlers


def test_register_live_makes_the_action_available_now() -> None:
    runtime = SimpleActionRuntime()
    action = register_custom_action_live(definition(), runtime, services=StandIns().services)
    assert action is not None
    assert runtime.registry.get("CHECK_WEATHER") is action


def test_register_live_without_a_runtime_returns_none() -> None:
    bind_runtime(None)
    assert register_custom_action_live(definition(), services=StandIns().services) is None


def test_register_live_uses_the_bound_runtime() -> None:
    runtime = SimpleActionRuntime()
    bind_runtime(runtime)
    try:
        action = register_custom_action_live(definition(), services=StandIns().services)
    finally:
        bind_runtime(None)
    assert action is not None and runtime.registry.get("CHECK_WEATHER") is action


def test_register_live_name_clash_is_an_error() -> None:
    runtime = SimpleActionRuntime(ActionRegistry(), owner="custom-actions")
    register_custom_action_live(definition(), runtime, services=StandIns().services)
    with pytest.raises(ActionConflictError, match="CHECK_WEATHER"):
        register_custom_action_live(definition(id="again"), runtime, services=StandIns().services)


def test_test_handler_returns_ok_and_output_without_registering() -> None:
    runtime = SimpleActionRuntime()
    bind_runtime(runtime)
    try:
        test = build_test_handler(definition(), services=StandIns().services)
        output = asyncio.run(test({"city": "London"}))
    finally:
        bind_runtime(None)
    assert output == HandlerOutput(ok=True, output="London: +12C")
    assert len(runtime.registry) == 0


def test_test_handler_reports_missing_required_parameter() -> None:
    stand_ins = StandIns()
    output = asyncio.run(build_test_handler(definition(), services=stand_ins.services)({}))
    assert output == HandlerOutput(ok=False, output="Missing required parameter: city")
    assert stand_ins.calls == []


# ---------------------------------------------------------------------------
# Real back-ends, end to end on loopback


def test_http_action_calls_a_real_server_with_encoded_url_and_raw_body(
    server: LocalServer,
) -> None:
    entry = definition(
        parameters=[{"name": "query", "description": "q", "required": True}],
        handler={
            "type": "http",
            "method": "POST",
            "url": server.base + "/search/{{query}}",
            "bodyTemplate": '{"search": "{{query}}"}',
        },
    )
    services = CustomActionServices.default(ssrf_policy=server.policy)
    result = run_handler(entry, {"query": "New York/2"}, services)
    assert result.success, result.text
    assert server.requests == [
        {
            "method": "POST",
            "path": "/search/New%20York%2F2",
            "body": '{"search": "New York/2"}',
            "content_type": "application/json",
        }
    ]
    assert json.loads(result.text)["path"] == "/search/New%20York%2F2"


def test_http_action_non_2xx_is_not_ok(server: LocalServer) -> None:
    entry = definition(handler={"type": "http", "method": "GET", "url": server.base + "/fail"})
    services = CustomActionServices.default(ssrf_policy=server.policy)
    output = asyncio.run(build_test_handler(entry, services=services)({"city": "x"}))
    assert output.ok is False


def test_http_action_to_loopback_is_blocked_without_an_allowlist(server: LocalServer) -> None:
    entry = definition(handler={"type": "http", "method": "GET", "url": server.base + "/{{city}}"})
    output = asyncio.run(build_test_handler(entry)({"city": "Paris"}))
    assert output.ok is False
    assert "SSRF" in output.output
    assert server.requests == []


def test_http_custom_action_runs_through_the_whole_flow(server: LocalServer) -> None:
    entry = definition(
        handler={"type": "http", "method": "GET", "url": server.base + "/weather/{{city}}"}
    )
    services = CustomActionServices.default(ssrf_policy=server.policy)
    loaded = load_custom_actions({"customActions": [entry]}, services=services)
    registry = ActionRegistry()
    registry.add_plugin_actions("custom-actions", loaded.actions)
    delivered: list[ActionResult] = []
    flow = asyncio.run(
        run_action_flow(
            SimpleActionRuntime(registry),
            registry,
            'forecast city="São Paulo"',
            deliver=delivered.append,
        )
    )
    assert flow.outcome == "success"
    assert server.requests[0]["path"] == "/weather/S%C3%A3o%20Paulo"
    assert delivered and delivered[0].data == {
        "action_id": "weather-check",
        "params": {"city": "São Paulo"},
    }


def test_shell_action_runs_a_real_command_without_injection(tmp_path: Path) -> None:
    entry = definition(
        parameters=[{"name": "word", "description": "w", "required": True}],
        handler={"type": "shell", "command": "echo {{word}}"},
    )
    services = CustomActionServices.default(shell_cwd=tmp_path)
    result = run_handler(entry, {"word": "hi; touch pwned"}, services)
    assert result.success, result.text
    assert "hi; touch pwned" in result.text
    assert not (tmp_path / "pwned").exists()


def test_shell_action_failing_command_is_not_ok(tmp_path: Path) -> None:
    entry = definition(parameters=[], handler={"type": "shell", "command": "exit 3"})
    services = CustomActionServices.default(shell_cwd=tmp_path)
    output = asyncio.run(build_test_handler(entry, services=services)({}))
    assert output.ok is False


def test_code_action_runs_in_the_sandbox() -> None:
    entry = definition(
        parameters=[{"name": "word", "description": "w", "required": True}],
        handler={"type": "code", "code": "return params['word'].upper()"},
    )
    output = asyncio.run(build_test_handler(entry)({"word": "quiet"}))
    assert output == HandlerOutput(ok=True, output="QUIET")


def _fetching_entry() -> dict[str, Any]:
    return definition(
        parameters=[{"name": "url", "description": "u", "required": True}],
        handler={
            "type": "code",
            "code": "res = await fetch(params['url'])\nreturn await res.text()",
        },
    )


def test_code_action_fetch_reaches_an_allowlisted_host(server: LocalServer) -> None:
    services = CustomActionServices.default(ssrf_policy=server.policy)
    test = build_test_handler(_fetching_entry(), services=services)
    output = asyncio.run(test({"url": server.base + "/from-code"}))
    assert output.ok, output.output
    assert json.loads(output.output)["path"] == "/from-code"


def test_code_action_fetch_to_loopback_is_blocked_by_the_ssrf_guard(server: LocalServer) -> None:
    output = asyncio.run(build_test_handler(_fetching_entry())({"url": server.base + "/x"}))
    assert output.ok is False
    assert "SSRF" in output.output
    assert server.requests == []


@pytest.mark.javascript
def test_seed_javascript_code_definition_runs_unchanged(server: LocalServer) -> None:
    entry = definition(
        parameters=[{"name": "id", "description": "i", "required": True}],
        handler={
            "type": "code",
            "code": f"const res = await fetch('{server.base}/data/' + params.id); "
            "return await res.text();",
        },
    )
    services = CustomActionServices.default(ssrf_policy=server.policy)
    output = asyncio.run(build_test_handler(entry, services=services)({"id": "42"}))
    assert output.ok, output.output
    assert json.loads(output.output)["path"] == "/data/42"
