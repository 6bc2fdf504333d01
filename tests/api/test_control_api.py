"""The local control API, exercised through a real uvicorn server on 127.0.0.1.

The server runs in a background thread on an ephemeral port, with the host that
``agentplug serve`` builds (approvals wired, terminal rooted in a temporary folder); requests
go through httpx and a websockets client, as a UI would send them.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette")
uvicorn = pytest.importorskip("uvicorn")
pytest.importorskip("websockets")

import httpx  # noqa: E402
from agentplug import PluginApi, PluginHost  # noqa: E402
from agentplug.api.app import create_app  # noqa: E402
from agentplug.api.serve import build_gateway  # noqa: E402
from agentplug.config.model import load_config  # noqa: E402
from agentplug.services.toolcalls import ToolCallDecision  # noqa: E402
from websockets.exceptions import InvalidHandshake  # noqa: E402
from websockets.sync.client import connect  # noqa: E402

TOKEN = "test-token-" + "x" * 32
WAIT_S = 60.0
"""Upper bound for waiting on the server or a background check (never a timing assertion)."""


def deploy_guard(api: PluginApi) -> None:
    """A real ``before_tool_call`` plugin: every ``deploy`` call needs a person's approval."""

    def before_tool_call(event: Any) -> dict[str, Any] | None:
        if event.tool_name != "deploy":
            return None
        return {
            "require_approval": {
                "title": "Deploy to production",
                "description": f"deploy {event.params.get('service')}",
                "severity": "critical",
            }
        }

    api.on("before_tool_call", before_tool_call)


def build_wheel(folder: Path, dist: str, version: str = "1.0") -> Path:
    """A minimal pure-Python wheel (no build backend needed)."""
    module = dist.replace("-", "_")
    info = f"{module}-{version}.dist-info"
    path = folder / f"{module}-{version}-py3-none-any.whl"
    files = {
        f"{module}/__init__.py": "def register(api):\n    pass\n",
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
        "Tag: py3-none-any\n",
        f"{info}/entry_points.txt": f"[agentplug]\n{dist} = {module}\n",
    }
    with zipfile.ZipFile(path, "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)
        record = "".join(f"{name},,\n" for name in files) + f"{info}/RECORD,,\n"
        archive.writestr(f"{info}/RECORD", record)
    return path


@dataclass
class Live:
    url: str
    port: int
    host: PluginHost
    config_path: Path
    state_dir: Path
    workdir: Path
    target: Path
    client: httpx.Client

    def ws_url(self, run_id: str) -> str:
        return f"ws://127.0.0.1:{self.port}/api/terminal/runs/{run_id}/stream"


@pytest.fixture
def live(tmp_path: Path) -> Iterator[Live]:
    workdir = tmp_path / "work"
    (workdir / "sub").mkdir(parents=True)
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    build_wheel(wheels, "evil-plugin")
    build_wheel(wheels, "good-plugin")
    state_dir = tmp_path / "state"
    state_dir.mkdir()
    target = tmp_path / "target"
    config_path = tmp_path / "agentplug.json"
    config_path.write_text(
        json.dumps(
            {
                "ui": {"theme": "dark", "panels": ["chat", "terminal"]},
                "customActions": [],
                "actions": {
                    "shell": {"enabled": True, "cwd": str(workdir)},
                    "plugins": {
                        "find_links": [str(wheels)],
                        "no_index": True,
                        "target": str(target),
                    },
                },
                "security": {
                    "install_policy": {
                        "enabled": True,
                        "rules": [{"action": "block", "name": "evil-*"}],
                        "default": "allow",
                    }
                },
            },
            indent=2,
        ),
        encoding="utf-8",
    )
    gateway = build_gateway(load_config(config_path), state_dir)
    host = gateway.host
    host.register(deploy_guard, "deploy-guard")
    app = create_app(gateway, token=TOKEN, state_dir=state_dir, config_path=config_path)

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, lifespan="on", log_level="warning"))
    failure: list[BaseException] = []

    async def main() -> None:
        await gateway.start()
        await server.serve(sockets=[sock])

    def run() -> None:
        try:
            asyncio.run(main())
        except BaseException as exc:  # reported by the fixture, not lost in the thread
            failure.append(exc)

    thread = threading.Thread(target=run, name="api-server", daemon=True)
    thread.start()
    deadline = time.monotonic() + WAIT_S
    while not server.started and thread.is_alive() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert server.started, f"the API server did not start: {failure!r}"
    url = f"http://127.0.0.1:{port}"
    client = httpx.Client(
        base_url=url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=WAIT_S
    )
    try:
        yield Live(url, port, host, config_path, state_dir, workdir, target, client)
    finally:
        client.close()
        server.should_exit = True
        thread.join(WAIT_S)
        sock.close()


def read_config(live: Live) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(live.config_path.read_text(encoding="utf-8"))
    return data


def stream(live: Live, run_id: str, *, header_auth: bool = False) -> list[dict[str, Any]]:
    """Every message of a run's WebSocket stream, up to and including ``exit``."""
    if header_auth:
        ws = connect(
            live.ws_url(run_id),
            additional_headers={"Authorization": f"Bearer {TOKEN}"},
            open_timeout=WAIT_S,
        )
    else:
        ws = connect(f"{live.ws_url(run_id)}?token={TOKEN}", open_timeout=WAIT_S)
    messages: list[dict[str, Any]] = []
    with ws:
        while True:
            message = json.loads(ws.recv(timeout=WAIT_S))
            messages.append(message)
            if message["type"] == "exit":
                return messages


def greet_action(**overrides: Any) -> dict[str, Any]:
    action: dict[str, Any] = {
        "id": "greet",
        "name": "GREET",
        "description": "Say hello to someone",
        "similes": ["HELLO"],
        "parameters": [{"name": "who", "description": "whom to greet", "required": True}],
        "handler": {"type": "shell", "command": "echo hello {{who}}"},
        "enabled": True,
    }
    action.update(overrides)
    return action


# -- health and the guard ------------------------------------------------------------------


def test_health_needs_no_token_and_reports_the_version(live: Live) -> None:
    from agentplug import __version__

    response = httpx.get(f"{live.url}/api/health")
    assert response.status_code == 200
    assert response.json() == {"ok": True, "version": __version__}


@pytest.mark.parametrize(
    "headers",
    [{}, {"Authorization": "Bearer wrong-token-0123456789"}, {"Authorization": f"Basic {TOKEN}"}],
    ids=["missing", "wrong", "not-bearer"],
)
def test_requests_without_the_right_bearer_token_are_401(
    live: Live, headers: dict[str, str]
) -> None:
    for method, path in [
        ("GET", "/api/custom-actions"),
        ("POST", "/api/terminal/run"),
        ("GET", "/api/approvals"),
        ("POST", "/api/plugins/install"),
    ]:
        response = httpx.request(method, f"{live.url}{path}", headers=headers, json={})
        assert response.status_code == 401, (method, path)
        assert "token" in response.json()["error"]
        assert response.headers["www-authenticate"] == "Bearer"


def test_websocket_without_the_token_is_refused(live: Live) -> None:
    run_id = live.client.post("/api/terminal/run", json={"command": "true"}).json()["run_id"]
    for url in (live.ws_url(run_id), f"{live.ws_url(run_id)}?token=wrong-token-0123456789"):
        with pytest.raises(InvalidHandshake) as refused:
            connect(url, open_timeout=WAIT_S)
        assert "401" in str(refused.value)


def test_a_non_loopback_host_header_is_refused_even_with_the_token(live: Live) -> None:
    response = live.client.get("/api/custom-actions", headers={"Host": "attacker.example"})
    assert response.status_code == 403
    assert "loopback" in response.json()["error"]
    assert live.client.get("/api/health", headers={"Host": "rebind.attacker.example"}).is_error
    for host in (f"localhost:{live.port}", f"127.0.0.1:{live.port}", "localhost"):
        assert live.client.get("/api/custom-actions", headers={"Host": host}).status_code == 200


def test_a_browser_request_from_a_foreign_origin_is_refused(live: Live) -> None:
    for origin in ("https://evil.example", "null", "http://localhost.evil.example"):
        response = live.client.get("/api/approvals", headers={"Origin": origin})
        assert response.status_code == 403, origin
        assert "origin" in response.json()["error"]
    local = live.client.get("/api/approvals", headers={"Origin": "http://localhost:3000"})
    assert local.status_code == 200


def test_unknown_routes_and_bad_bodies_answer_json_errors(live: Live) -> None:
    missing = live.client.get("/api/nothing-here")
    assert missing.status_code == 404
    assert "error" in missing.json()
    bad = live.client.post(
        "/api/terminal/run", content=b"{not json", headers={"Content-Type": "application/json"}
    )
    assert bad.status_code == 400
    assert "not valid JSON" in bad.json()["error"]


# -- terminal ------------------------------------------------------------------------------


def test_terminal_run_streams_output_chunks_then_the_exit_message(live: Live) -> None:
    response = live.client.post(
        "/api/terminal/run", json={"command": "echo first; echo second 1>&2; exit 3"}
    )
    assert response.status_code == 202
    run_id = response.json()["run_id"]

    messages = stream(live, run_id)

    chunks = [m for m in messages if m["type"] == "output"]
    assert chunks and all(m["run_id"] == run_id for m in chunks)
    assert "".join(m["data"] for m in chunks) == "first\nsecond\n"
    assert messages[-1] == {
        "type": "exit",
        "run_id": run_id,
        "exit_code": 3,
        "truncated": False,
        "timed_out": False,
        "duration_ms": messages[-1]["duration_ms"],
        "error": None,
    }
    result = live.client.get(f"/api/terminal/runs/{run_id}").json()
    assert result["status"] == "exited"
    assert result["exit_code"] == 3
    assert result["output"] == "first\nsecond\n"


def test_terminal_stream_accepts_the_token_as_a_header_and_runs_in_the_workdir(
    live: Live,
) -> None:
    (live.workdir / "sub" / "marker.txt").write_text("here\n", encoding="utf-8")
    run_id = live.client.post(
        "/api/terminal/run", json={"command": "cat marker.txt", "cwd": "sub"}
    ).json()["run_id"]
    messages = stream(live, run_id, header_auth=True)
    assert "".join(m["data"] for m in messages if m["type"] == "output") == "here\n"
    assert messages[-1]["exit_code"] == 0


def test_terminal_run_that_exceeds_its_time_limit_reports_timed_out(live: Live) -> None:
    run_id = live.client.post(
        "/api/terminal/run", json={"command": "echo started; sleep 30", "timeout_s": 0.5}
    ).json()["run_id"]
    messages = stream(live, run_id)
    assert messages[0]["data"] == "started\n"
    assert messages[-1]["timed_out"] is True
    assert messages[-1]["exit_code"] is None
    assert live.client.get(f"/api/terminal/runs/{run_id}").json()["status"] == "timed_out"


def test_terminal_is_refused_when_the_operator_has_not_enabled_the_shell(live: Live) -> None:
    live.host.config = live.host.config.model_copy(update={"actions": {}})
    response = live.client.post("/api/terminal/run", json={"command": "true"})
    assert response.status_code == 403
    assert "actions.shell.enabled" in response.json()["error"]


def test_stream_of_an_unknown_run_is_refused_with_404(live: Live) -> None:
    with pytest.raises(InvalidHandshake) as refused:
        connect(f"{live.ws_url('no-such-run')}?token={TOKEN}", open_timeout=WAIT_S)
    assert "404" in str(refused.value)


def test_terminal_run_refuses_a_cwd_outside_the_working_directory(live: Live) -> None:
    response = live.client.post("/api/terminal/run", json={"command": "ls", "cwd": "../.."})
    assert response.status_code == 400
    assert "outside" in response.json()["error"]
    assert live.client.post("/api/terminal/run", json={}).status_code == 400
    assert live.client.get("/api/terminal/runs/nope").status_code == 404


# -- custom actions ------------------------------------------------------------------------


def test_custom_action_crud_round_trip_is_persisted_and_keeps_other_keys(live: Live) -> None:
    before = read_config(live)

    created = live.client.post("/api/custom-actions", json=greet_action())
    assert created.status_code == 201, created.text
    body = created.json()
    assert body["id"] == "greet"
    assert body["createdAt"] == body["updatedAt"]
    saved = read_config(live)
    assert [a["id"] for a in saved["customActions"]] == ["greet"]
    assert saved["customActions"][0]["createdAt"] == body["createdAt"]
    assert {k: v for k, v in saved.items() if k != "customActions"} == {
        k: v for k, v in before.items() if k != "customActions"
    }
    assert live.host.gateway.actions.registry.get("GREET") is not None  # registered live

    listed = live.client.get("/api/custom-actions").json()
    assert [a["id"] for a in listed["actions"]] == ["greet"]
    assert live.client.get("/api/custom-actions/greet").json()["name"] == "GREET"

    updated = live.client.put(
        "/api/custom-actions/greet",
        json=greet_action(name="SAY_HELLO", description="Greets warmly"),
    )
    assert updated.status_code == 200, updated.text
    assert updated.json()["createdAt"] == body["createdAt"]
    assert updated.json()["updatedAt"] >= body["updatedAt"]
    saved = read_config(live)
    assert saved["customActions"][0]["description"] == "Greets warmly"
    assert saved["ui"] == before["ui"]
    assert live.host.gateway.actions.registry.get("GREET") is None
    assert live.host.gateway.actions.registry.get("SAY_HELLO") is not None

    assert live.client.delete("/api/custom-actions/greet").json() == {"deleted": "greet"}
    assert live.client.get("/api/custom-actions/greet").status_code == 404
    assert live.host.gateway.actions.registry.get("SAY_HELLO") is None
    saved = read_config(live)
    assert saved["customActions"] == []
    assert {k: v for k, v in saved.items() if k != "customActions"} == {
        k: v for k, v in before.items() if k != "customActions"
    }
    assert live.host.config.custom_actions == []  # the host's view follows the file


def test_a_disabled_custom_action_is_saved_but_not_registered(live: Live) -> None:
    response = live.client.post("/api/custom-actions", json=greet_action(enabled=False))
    assert response.status_code == 201
    assert read_config(live)["customActions"][0]["enabled"] is False
    assert live.host.gateway.actions.registry.get("GREET") is None


def test_invalid_or_clashing_custom_actions_are_rejected_and_not_saved(live: Live) -> None:
    invalid = live.client.post("/api/custom-actions", json=greet_action(description="  "))
    assert invalid.status_code == 422
    assert "description" in invalid.json()["error"]
    bad_handler = live.client.post(
        "/api/custom-actions", json=greet_action(handler={"type": "ftp", "url": "x"})
    )
    assert bad_handler.status_code == 422
    assert read_config(live)["customActions"] == []

    assert live.client.post("/api/custom-actions", json=greet_action()).status_code == 201
    same_id = live.client.post("/api/custom-actions", json=greet_action(name="OTHER"))
    assert same_id.status_code == 409
    same_name = live.client.post("/api/custom-actions", json=greet_action(id="greet-2"))
    assert same_name.status_code == 409
    builtin = live.client.post(
        "/api/custom-actions", json=greet_action(id="sh", name="SHELL_COMMAND")
    )
    assert builtin.status_code == 409
    assert "SHELL_COMMAND" in builtin.json()["error"]
    assert [a["id"] for a in read_config(live)["customActions"]] == ["greet"]


def test_custom_action_test_endpoint_returns_ok_output_and_duration(live: Live) -> None:
    assert live.client.post("/api/custom-actions", json=greet_action()).status_code == 201

    result = live.client.post("/api/custom-actions/greet/test", json={"params": {"who": "world"}})
    assert result.status_code == 200
    body = result.json()
    assert set(body) == {"ok", "output", "duration_ms"}
    assert body["ok"] is True
    assert "hello world" in body["output"]
    assert isinstance(body["duration_ms"], float | int) and body["duration_ms"] >= 0

    missing = live.client.post("/api/custom-actions/greet/test", json={"params": {}}).json()
    assert missing["ok"] is False
    assert missing["output"] == "Missing required parameter: who"
    assert live.client.post("/api/custom-actions/nope/test", json={}).status_code == 404


# -- approvals -----------------------------------------------------------------------------


def test_approval_is_listed_and_resolved_through_the_api(live: Live) -> None:
    gate = live.host.gateway.tool_calls.gate
    decisions: list[ToolCallDecision] = []

    def tool_call() -> None:
        decisions.append(
            asyncio.run(
                gate.check(
                    {"tool_name": "deploy", "params": {"service": "billing"}},
                    {"session_key": "s1", "run_id": "r1"},
                )
            )
        )

    check = threading.Thread(target=tool_call, name="tool-call", daemon=True)
    check.start()
    deadline = time.monotonic() + WAIT_S
    pending: list[dict[str, Any]] = []
    while not pending and time.monotonic() < deadline:
        pending = live.client.get("/api/approvals").json()["pending"]
        time.sleep(0.02)
    assert len(pending) == 1
    item = pending[0]
    assert item["tool_name"] == "deploy"
    assert item["plugin_id"] == "deploy-guard"
    assert item["title"] == "Deploy to production"
    assert item["params"] == {"service": "billing"}
    assert not decisions  # the tool call is still waiting for a person

    bad = live.client.post(f"/api/approvals/{item['id']}", json={"decision": "maybe"})
    assert bad.status_code == 400
    assert live.client.post("/api/approvals/ap0-zzz", json={"decision": "deny"}).status_code == 404
    answer = live.client.post(f"/api/approvals/{item['id']}", json={"decision": "allow-always"})
    assert answer.status_code == 200, answer.text
    assert answer.json()["decision"] == "allow-always"

    check.join(WAIT_S)
    assert decisions and decisions[0].allowed is True
    assert decisions[0].approval_resolution == "allow-always"
    assert live.client.get("/api/approvals").json()["pending"] == []

    grants = live.client.get("/api/approvals/grants").json()["grants"]
    assert [(g["plugin_id"], g["tool_name"]) for g in grants] == [("deploy-guard", "deploy")]
    grant_id = grants[0]["grant_id"]
    assert live.client.delete(f"/api/approvals/grants/{grant_id}").json() == {"revoked": grant_id}
    assert live.client.get("/api/approvals/grants").json()["grants"] == []
    assert live.client.delete(f"/api/approvals/grants/{grant_id}").status_code == 404


# -- plugins -------------------------------------------------------------------------------


def test_install_blocked_by_the_install_policy_is_403_with_the_reason(live: Live) -> None:
    response = live.client.post("/api/plugins/install", json={"spec": "evil-plugin"})
    assert response.status_code == 403, response.text
    body = response.json()
    assert "security.install_policy" in body["error"]
    assert "block evil-*" in body["error"]
    assert body["result"]["installed"] is False
    assert not (live.target / "evil_plugin").exists()


def test_install_allowed_by_the_policy_installs_the_package(live: Live) -> None:
    response = live.client.post("/api/plugins/install", json={"spec": "good-plugin"})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["installed"] is True
    assert body["name"] == "good-plugin"
    assert (live.target / "good_plugin" / "__init__.py").exists()


class _NamedPlugin:
    name = "Weather helper"
    description = "Looks the weather up."

    def register(self, api: Any) -> None:
        api.on("message_received", lambda event: None)


def test_plugins_endpoint_lists_id_display_name_and_description(live: Live) -> None:
    live.host.register(_NamedPlugin(), "weather")
    response = live.client.get("/api/plugins")
    assert response.status_code == 200
    rows = {row["plugin_id"]: row for row in response.json()["plugins"]}
    assert rows["weather"]["name"] == "Weather helper"
    assert rows["weather"]["description"] == "Looks the weather up."
    assert rows["weather"]["hooks"] == ["message_received"]
    assert rows["deploy-guard"]["name"] is None  # no display name: show the id
    assert httpx.get(f"{live.url}/api/plugins").status_code == 401


def test_install_of_an_invalid_spec_is_400(live: Live) -> None:
    response = live.client.post("/api/plugins/install", json={"spec": "https://x.example/a.whl"})
    assert response.status_code == 400
    assert live.client.post("/api/plugins/install", json={}).status_code == 400
