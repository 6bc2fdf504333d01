"""``agentplug actions list`` and ``agentplug actions test``."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import agentplug
import pytest
from agentplug.cli.actions import add_actions_commands, run_actions_cli


def entry(**changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "id": "weather-check",
        "name": "CHECK_WEATHER",
        "description": "Check the current weather for a given city",
        "similes": ["WEATHER"],
        "parameters": [{"name": "city", "description": "The city", "required": True}],
        "handler": {"type": "http", "method": "GET", "url": "https://wttr.in/{{city}}"},
        "enabled": True,
        "createdAt": "2025-01-01T00:00:00Z",
        "updatedAt": "2025-01-01T00:00:00Z",
    }
    base.update(changes)
    return base


def write_config(path: Path, *entries: Any) -> Path:
    path.write_text(json.dumps({"customActions": list(entries)}))
    return path


class _Answer(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        status = 500 if self.path.startswith("/fail") else 200
        data = f"weather at {self.path}".encode()
        self.send_response(status)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        """Keep test output quiet."""


@pytest.fixture
def server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Answer)
    thread = threading.Thread(
        target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    thread.start()
    yield f"127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def test_list_prints_every_definition_marking_disabled_ones(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_config(
        tmp_path / "c.json", entry(), entry(id="off", name="TURNED_OFF", enabled=False)
    )
    assert run_actions_cli(["list", "--config", str(config)]) == 0
    out = capsys.readouterr().out
    assert "CHECK_WEATHER (id weather-check, http)" in out
    assert "TURNED_OFF (id off, http) [disabled]" in out
    assert "city (required): The city" in out


def test_list_json_is_machine_readable(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = write_config(tmp_path / "c.json", entry())
    assert run_actions_cli(["list", "--config", str(config), "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    custom = [a for a in payload["actions"] if a["source"] == "custom"]
    assert [a["name"] for a in custom] == ["CHECK_WEATHER"]
    assert custom[0]["handler"] == "http" and custom[0]["id"] == "weather-check"
    assert custom[0]["enabled"] is True and custom[0]["reason"] is None
    assert payload["errors"] == []
    assert payload["config"] == str(config)


def test_list_reports_malformed_entries_on_stderr(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_config(tmp_path / "c.json", entry(id="bad", handler={"type": "http"}), entry())
    assert run_actions_cli(["list", "--config", str(config)]) == 0
    captured = capsys.readouterr()
    assert "customActions[0] (id 'bad'): field 'handler.url'" in captured.err
    assert "CHECK_WEATHER" in captured.out


def test_list_without_a_config_lists_every_builtin_and_plugin_action(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("AGENTPLUG_CONFIG", raising=False)
    assert run_actions_cli(["list", "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["config"] is None
    builtins = {a["name"]: a for a in payload["actions"] if a["source"] == "builtin"}
    assert {"RESTART_AGENT", "EJECT_PLUGIN", "SHELL_COMMAND", "CORE_STATUS"} <= set(builtins)
    assert builtins["CORE_STATUS"]["enabled"] is True
    assert builtins["SHELL_COMMAND"] == {
        **builtins["SHELL_COMMAND"],
        "enabled": False,
        "reason": "shell disabled: set actions.shell.enabled = true",
    }


def test_list_shows_builtins_left_out_by_actions_disabled_with_the_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "c.json"
    config.write_text(json.dumps({"actions": {"disabled": ["CORE_STATUS"]}}))
    assert run_actions_cli(["list", "--config", str(config)]) == 0
    out = capsys.readouterr().out
    assert "CORE_STATUS (builtin) [disabled] (disabled by actions.disabled" in out


def test_list_shows_plugin_actions_with_their_plugin(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], fake_dist: Any
) -> None:
    fake_dist(
        "fakeplug-greeter",
        "fakeplug_greeter",
        """
        from agentplug import Action, ActionResult

        async def greet(runtime, message, state, options):
            return ActionResult(success=True, text="hi")

        name = "Greeter"
        description = "Says hello."
        actions = [Action(name="SAY_HELLO", description="Say hello to the user", handler=greet)]
        """,
        entry_points={"greeter": "fakeplug_greeter"},
    )
    config = tmp_path / "c.json"
    config.write_text("{}")
    assert run_actions_cli(["list", "--config", str(config), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["actions"]
    [row] = [r for r in rows if r["name"] == "SAY_HELLO"]
    assert (row["source"], row["owner"], row["enabled"]) == ("plugin", "greeter", True)


def test_list_reads_the_default_config_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    write_config(tmp_path / "agentplug.json", entry())
    monkeypatch.chdir(tmp_path)
    assert run_actions_cli(["list"]) == 0
    assert "CHECK_WEATHER" in capsys.readouterr().out


def test_unknown_action_is_an_error_listing_the_known_ones(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_config(tmp_path / "c.json", entry())
    assert run_actions_cli(["test", "NOPE", "--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert "unknown action 'NOPE'" in err
    assert "CHECK_WEATHER (id weather-check)" in err


def test_test_prints_ok_and_output_as_json_and_exits_zero(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], server: str
) -> None:
    handler = {"type": "http", "method": "GET", "url": f"http://{server}/w/{{{{city}}}}"}
    config = write_config(tmp_path / "c.json", entry(handler=handler))
    argv = ["test", "CHECK_WEATHER", "--config", str(config), "--param", "city=Rome"]
    code = run_actions_cli([*argv, "--allow-host", server, "--json"])
    assert json.loads(capsys.readouterr().out) == {"ok": True, "output": "weather at /w/Rome"}
    assert code == 0


def test_test_finds_the_action_by_id(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], server: str
) -> None:
    handler = {"type": "http", "method": "GET", "url": f"http://{server}/{{{{city}}}}"}
    config = write_config(tmp_path / "c.json", entry(handler=handler))
    argv = ["test", "weather-check", "--config", str(config), "--param", "city=Oslo"]
    assert run_actions_cli([*argv, "--allow-host", server]) == 0
    assert capsys.readouterr().out == "ok: CHECK_WEATHER\nweather at /Oslo\n"


def test_test_exits_non_zero_when_not_ok(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], server: str
) -> None:
    handler = {"type": "http", "method": "GET", "url": f"http://{server}/fail"}
    config = write_config(tmp_path / "c.json", entry(handler=handler))
    argv = ["test", "CHECK_WEATHER", "--config", str(config), "--param", "city=x"]
    assert run_actions_cli([*argv, "--allow-host", server]) == 1
    assert capsys.readouterr().out.startswith("FAILED: CHECK_WEATHER")


def test_test_missing_required_parameter_is_not_ok(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_config(tmp_path / "c.json", entry())
    assert run_actions_cli(["test", "CHECK_WEATHER", "--config", str(config), "--json"]) == 1
    assert json.loads(capsys.readouterr().out) == {
        "ok": False,
        "output": "Missing required parameter: city",
    }


def test_malformed_param_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_config(tmp_path / "c.json", entry())
    assert run_actions_cli(["test", "CHECK_WEATHER", "--config", str(config), "--param", "x"]) == 2
    assert "must look like KEY=VALUE" in capsys.readouterr().err


def test_http_action_to_loopback_is_blocked_without_allow_host(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], server: str
) -> None:
    handler = {"type": "http", "method": "GET", "url": f"http://{server}/{{{{city}}}}"}
    config = write_config(tmp_path / "c.json", entry(handler=handler))
    argv = ["test", "CHECK_WEATHER", "--config", str(config), "--param", "city=x", "--json"]
    assert run_actions_cli(argv) == 1
    assert "SSRF" in json.loads(capsys.readouterr().out)["output"]


def test_commands_plug_into_a_host_parser_with_func() -> None:
    parser = argparse.ArgumentParser(prog="agentplug")
    add_actions_commands(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["actions", "list", "--config", "x.json", "--json"])
    assert callable(args.func)
    assert (args.config, args.json) == ("x.json", True)


def test_module_runs_as_a_script(tmp_path: Path) -> None:
    config = write_config(tmp_path / "c.json", entry())
    framework = str(Path(agentplug.__file__).resolve().parent.parent)
    env = {**os.environ, "PYTHONPATH": framework + os.pathsep + os.environ.get("PYTHONPATH", "")}
    done = subprocess.run(
        [sys.executable, "-m", "agentplug.cli.actions", "list", "--config", str(config), "--json"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    actions = json.loads(done.stdout)["actions"]
    assert [a["id"] for a in actions if a["source"] == "custom"] == ["weather-check"]
