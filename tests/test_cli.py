"""The ``agentplug`` command line, run as a real subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from agentplug_hookspecs import builtin_declarations


def _agentplug(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(cwd) if cwd else os.environ.get("PYTHONPATH", "")}
    return subprocess.run(
        [sys.executable, "-m", "agentplug.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
    )


def test_hooks_json_lists_every_declared_hook() -> None:
    out = _agentplug("hooks", "--json", "--builtin-only")
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout)
    assert [r["name"] for r in rows] == list(builtin_declarations())
    tool = next(r for r in rows if r["name"] == "before_tool_call")
    assert tool["kind"] == "decide" and tool["failure"] == "fail_closed"
    assert tool["default_timeout_ms"] == 15000 and tool["firstresult"] is False
    deactivate = next(r for r in rows if r["name"] == "deactivate")
    assert deactivate["alias_of"] == "gateway_stop"


def test_doctor_fails_readably_on_a_bad_config(tmp_path: Path) -> None:
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps({"plugins": {"entries": {"x": {"hooks": {"timeoutMs": 0}}}}}))
    out = _agentplug("doctor", "--config", str(cfg))
    assert out.returncode != 0
    assert "plugins.entries.x.hooks.timeoutMs" in out.stdout + out.stderr


def test_doctor_reports_timeouts_for_unknown_hooks(tmp_path: Path) -> None:
    cfg = tmp_path / "cfg.json"
    cfg.write_text(
        json.dumps({"plugins": {"entries": {"x": {"hooks": {"timeouts": {"nope_hook": 5}}}}}})
    )
    out = _agentplug("doctor", "--config", str(cfg))
    assert out.returncode == 2  # a problem of the config file
    assert "plugins.entries.x.hooks.timeouts.nope_hook: unknown hook" in out.stdout


def test_config_schema_is_json_schema_with_camel_case_keys() -> None:
    out = _agentplug("config", "schema")
    schema = json.loads(out.stdout)
    assert schema["type"] == "object" and "customActions" in schema["properties"]


def test_run_prints_one_json_object_per_step(tmp_path: Path) -> None:
    (tmp_path / "scn_plugin.py").write_text(
        textwrap.dedent(
            """
            from agentplug import hookimpl

            @hookimpl(priority=10)
            def before_tool_call(event):
                if event.tool_name == "web_search":
                    return {"require_approval": {"title": "Search", "description": "ok?"}}

            @hookimpl
            def message_sending(event):
                return {"content": event.content.upper()}
            """
        )
    )
    scenario = {
        "plugins": ["module:scn_plugin"],
        "approvals": {"web_search": "deny"},
        "steps": [
            {"hook": "before_tool_call", "event": {"toolName": "web_search", "params": {}}},
            {"hook": "message_sending", "event": {"content": "hi"}},
        ],
    }
    path = tmp_path / "scenario.json"
    path.write_text(json.dumps(scenario))
    out = _agentplug("run", str(path), "--json", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    first, second = (json.loads(line) for line in out.stdout.splitlines())
    assert first["hook"] == "before_tool_call"
    assert first["outcome"]["approval"]["plugin_id"] == "scn_plugin"
    assert first["approval"] == {
        "allowed": False,
        "resolution": "deny",
        "reason": "'Search' was denied by the approver",
    }
    assert first["handlers"][0]["status"] == "ok"
    assert second["outcome"]["content"] == "HI"


def test_run_names_a_missing_plugin(tmp_path: Path) -> None:
    path = tmp_path / "scenario.json"
    path.write_text(json.dumps({"plugins": ["no-such-plugin"], "steps": []}))
    out = _agentplug("run", str(path))
    assert out.returncode == 2
    assert "no-such-plugin" in out.stderr and "pip install" in out.stderr


BOOM = """
from agentplug import hookimpl

def _explode():
    raise RuntimeError("disk full at /var/spool/x")

@hookimpl
def before_tool_call(event):
    _explode()
"""


def test_run_shows_a_failing_handlers_plugin_hook_and_message(tmp_path: Path) -> None:
    (tmp_path / "boom_plugin.py").write_text(BOOM)
    scenario = tmp_path / "s.json"
    scenario.write_text(
        json.dumps(
            {
                "plugins": [{"id": "boom", "module": "boom_plugin"}],
                "steps": [{"hook": "before_tool_call", "event": {"tool_name": "x"}}],
            }
        )
    )
    out = _agentplug("run", str(scenario), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert (
        "plugin 'boom', hook 'before_tool_call' raised RuntimeError: disk full at /var/spool/x"
        " (-v for the traceback)"
    ) in out.stdout
    assert "Traceback" not in out.stdout + out.stderr
    verbose = _agentplug("-v", "run", str(scenario), cwd=tmp_path)
    assert "Traceback (most recent call last):" in verbose.stdout
    assert "in _explode" in verbose.stdout and "(-v for the traceback)" not in verbose.stdout


def test_plugins_shows_a_load_error_once_with_its_file_and_line_and_exits_1(
    fake_dist: Any, capsys: Any
) -> None:
    from agentplug.cli.main import main

    info = fake_dist(
        "fakeplug-broken",
        "fakeplug_broken",
        "def register(api):\n    raise RuntimeError('no token configured')\n",
        entry_points={"broken": "fakeplug_broken"},
    )
    assert main(["plugins", "--no-cache"]) == 1  # a plugin did not load
    captured = capsys.readouterr()
    everything = (captured.out + captured.err).splitlines()
    assert len([x for x in everything if "no token configured" in x]) == 1  # said once
    line = next(x for x in captured.out.splitlines() if "LOAD ERROR" in x)
    assert "plugin 'broken'" in line and "RuntimeError('no token configured')" in line
    assert f"(at {info.parent / 'fakeplug_broken.py'}:2)" in line  # where, without -v
    assert line.endswith("(-v for the traceback)")
    assert main(["plugins", "--no-cache", "-v"]) == 1
    out = capsys.readouterr().out
    assert "Traceback (most recent call last):" in out and "in register" in out


@pytest.mark.parametrize("command", [["plugins"], ["doctor"], ["hooks"]])
def test_a_plugin_load_error_is_printed_once_by_every_command(
    command: list[str], fake_dist: Any, site_dir: Path, tmp_path: Path
) -> None:
    fake_dist(
        "fakeplug-broken",
        "fakeplug_broken",
        "def register(api):\n    raise RuntimeError('no token configured')\n",
        entry_points={"broken": "fakeplug_broken"},
    )
    env = {**os.environ, "PYTHONPATH": str(site_dir), "AGENTPLUG_CONFIG": ""}
    env["AGENTPLUG_CACHE_DIR"] = str(tmp_path / "cache")
    out = subprocess.run(
        [sys.executable, "-m", "agentplug.cli", *command],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
    )
    lines = (out.stdout + out.stderr).splitlines()
    said = [x for x in lines if "no token configured" in x]
    assert len(said) == 1, out.stdout + out.stderr
    assert "fakeplug_broken.py:2" in said[0]
    assert out.returncode == (0 if command == ["hooks"] else 1)


def test_plugins_is_quiet_on_first_use_without_a_config(tmp_path: Path) -> None:
    # The bundled example plugins, no config: nothing is wrong, so nothing is flagged.
    env_cwd = tmp_path / "fresh"
    env_cwd.mkdir()
    out = subprocess.run(
        [sys.executable, "-m", "agentplug.cli", "plugins"],
        capture_output=True,
        text=True,
        cwd=env_cwd,
        env={**os.environ, "AGENTPLUG_CONFIG": ""},
    )
    assert out.returncode == 0
    assert "audit-log" in out.stdout  # the examples are installed and listed
    noisy = [x for x in out.stdout.splitlines() if "BLOCKED" in x or "warning" in x]
    assert noisy == [] and out.stderr == ""


def test_plugins_and_plugin_list_show_display_name_and_description(
    fake_dist: Any, capsys: Any
) -> None:
    from agentplug.cli.main import main

    fake_dist(
        "fakeplug-named",
        "fakeplug_named",
        'name = "Weather helper"\ndescription = "Looks the weather up."\n'
        "def register(api):\n    pass\n",
        entry_points={"weather": "fakeplug_named"},
    )
    assert main(["plugins", "--no-cache", "--json"]) == 0
    row = next(r for r in json.loads(capsys.readouterr().out) if r["plugin_id"] == "weather")
    assert (row["name"], row["description"]) == ("Weather helper", "Looks the weather up.")
    assert main(["plugin", "list", "--json"]) == 0
    row = next(r for r in json.loads(capsys.readouterr().out) if r["plugin_id"] == "weather")
    assert (row["name"], row["description"]) == ("Weather helper", "Looks the weather up.")
    assert main(["plugin", "list"]) == 0
    text = capsys.readouterr().out
    assert "weather  'Weather helper'  [fakeplug-named 1.0]\n  Looks the weather up." in text
