"""``agentplug run``: expectations, scenario validation and local module plugins.

Most tests run the real command (``python -m agentplug.cli run``) in a subprocess, from a
working directory that is *not* the scenario's folder and without ``PYTHONPATH``: the
local plugin modules next to the scenario file must import on their own.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from agentplug.cli.main import main
from agentplug.core.loader import ENTRY_POINT_GROUP, discover
from agentplug.services.approvals import ApprovalBroker
from agentplug.testing.scenario import ScenarioError, build_host, load_scenario
from agentplug.testing.scenario_check import (
    ScenarioRunError,
    check,
    load_checked_scenario,
    preflight,
    render_failures,
    run_checked,
)

GUARD = """
from agentplug import hookimpl

PLUGIN_ID = "guard"


@hookimpl(priority=50)
def before_tool_call(event):
    if event.tool_name == "web_search":
        return {"require_approval": {"title": "Run web search", "description": "searches"}}
    if event.tool_name == "exec":
        return {"block": True, "block_reason": "exec is not allowed"}
    if event.tool_name == "boom":
        raise ValueError("kaboom")
    return None
"""

MY_GUARD = """
from agentplug import hookimpl


@hookimpl
def before_tool_call(event):
    return None
"""

DOCS = Path(__file__).resolve().parents[1] / "docs" / "testing.md"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A folder with two local plugin modules (``guard``, ``my_guard``) and nothing else."""
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "guard.py").write_text(textwrap.dedent(GUARD), encoding="utf-8")
    (folder / "my_guard.py").write_text(textwrap.dedent(MY_GUARD), encoding="utf-8")
    return folder


@pytest.fixture
def fresh_modules() -> Any:
    """Forget the plugin modules an in-process test imported (``guard`` and friends)."""
    before = set(sys.modules)
    yield
    for name in set(sys.modules) - before:
        del sys.modules[name]


def _write(folder: Path, name: str, data: Any) -> Path:
    path = folder / name
    path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
    return path


def _run(path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``python -m agentplug.cli run PATH`` from another directory, without PYTHONPATH."""
    elsewhere = path.parent.parent / "elsewhere"
    elsewhere.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run(
        [sys.executable, "-m", "agentplug.cli", "run", str(path), *args],
        capture_output=True,
        text=True,
        cwd=elsewhere,
        env=env,
        timeout=120,
    )


def _steps(*steps: dict[str, Any], **top: Any) -> dict[str, Any]:
    return {"plugins": [{"id": "guard", "module": "guard"}], **top, "steps": list(steps)}


SEARCH = {"hook": "before_tool_call", "event": {"tool_name": "web_search", "params": {}}}
EXEC = {"hook": "before_tool_call", "event": {"tool_name": "exec", "params": {}}}


# -- R1: expectations are checked -------------------------------------------------------


def test_wrong_expectation_fails_with_a_readable_report(project: Path) -> None:
    path = _write(
        project,
        "scenario_wrong.json",
        _steps(
            {**SEARCH, "expect": {"blocked": False}},
            {**EXEC, "name": "exec must run", "expect": {"blocked": False}},
        ),
    )
    out = _run(path)
    assert out.returncode == 1, out.stderr
    report = out.stdout[out.stdout.index("scenario_wrong.json: ") :]
    assert report.splitlines()[:6] == [
        "scenario_wrong.json: 1 of 2 steps did not meet expectations",
        "",
        'step 2 "exec must run" (steps[1]) before_tool_call:',
        "  outcome.blocked",
        "    expected: false",
        "    actual:   true",
    ]
    assert "  handlers: guard=ok" in report
    assert "step 1 " not in report
    assert out.stdout.startswith("step 1: before_tool_call")  # the replay is still shown
    assert out.stderr == ""


def test_wrong_expectation_in_json_mode(project: Path) -> None:
    path = _write(
        project,
        "scenario_wrong.json",
        _steps(
            {**SEARCH, "expect_approval": {"allowed": True}},
            {**EXEC, "expect_handlers": {"guard": "error", "other": "ok"}},
            approvals={"web_search": "deny"},
        ),
    )
    out = _run(path, "--json")
    assert out.returncode == 1, out.stderr
    *steps, last = (json.loads(line) for line in out.stdout.splitlines())
    assert [s["hook"] for s in steps] == ["before_tool_call", "before_tool_call"]
    summary = last["expectations"]
    assert summary["passed"] is False
    first, second = summary["failures"]
    assert (first["step"], first["index"], first["hook"]) == (1, 0, "before_tool_call")
    assert first["mismatches"] == [
        {
            "path": "approval.allowed",
            "expected": True,
            "actual": False,
            "note": "reason: 'Run web search' was denied by the approver",
        }
    ]
    assert second["step"] == 2
    assert second["mismatches"][0] == {
        "path": 'handlers["guard"].status',
        "expected": "error",
        "actual": "ok",
    }
    assert second["mismatches"][1]["path"] == 'handlers["other"]'
    assert second["mismatches"][1]["missing"] is True
    assert "actual" not in second["mismatches"][1]


def test_met_expectations_exit_0(project: Path) -> None:
    path = _write(
        project,
        "scenario_ok.json",
        _steps(
            {**SEARCH, "expect": {"blocked": False}, "expect_approval": {"allowed": True}},
            {**EXEC, "expect": {"blockedBy": "guard"}, "expectApproval": None},
            {"hook": "agent_end"},
            approvals=["allow-once"],
        ),
    )
    out = _run(path)
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.rstrip().endswith("expectations: all met (2 steps checked)")
    out = _run(path, "--json")
    assert out.returncode == 0, out.stderr
    lines = [json.loads(line) for line in out.stdout.splitlines()]
    assert len(lines) == 4
    assert lines[-1] == {"expectations": {"passed": True, "failures": []}}


def test_scenario_without_expectations_behaves_as_before(project: Path) -> None:
    path = _write(project, "scenario_plain.json", _steps(EXEC, {"hook": "agent_end"}))
    out = _run(path)
    assert out.returncode == 0, out.stderr
    assert "expectations" not in out.stdout
    assert "did not meet" not in out.stdout
    out = _run(path, "--json")
    assert out.returncode == 0, out.stderr
    lines = [json.loads(line) for line in out.stdout.splitlines()]
    assert [line["hook"] for line in lines] == ["before_tool_call", "agent_end"]


# -- R2: the expect_handlers forms of the pytest item; "invalid scenario" --------------


def test_every_expect_handlers_form_is_accepted_and_checked(project: Path) -> None:
    path = _write(
        project,
        "scenario_forms.json",
        {
            "plugins": [
                {"id": "guard", "module": "guard"},
                {"id": "my-guard", "module": "my_guard"},
            ],
            "steps": [
                {**SEARCH, "expect_handlers": {"guard": "ok", "my-guard": ["ok"], "x": None}},
                {**EXEC, "expectHandlers": {"guard": {"status": "ok"}, "my-guard": "skipped"}},
                {
                    "hook": "before_tool_call",
                    "event": {"tool_name": "boom"},
                    "expect_handlers": {
                        "guard": [{"status": "error", "error": "raised ValueError"}],
                        "my-guard": None,  # wrong: it was reported (skipped)
                    },
                },
            ],
            "approvals": {"default": "allow-once"},
        },
    )
    out = _run(path)
    assert out.returncode == 1, out.stdout + out.stderr
    report = out.stdout[out.stdout.index("scenario_forms.json: ") :]
    assert report.splitlines()[:7] == [
        "scenario_forms.json: 1 of 3 steps did not meet expectations",
        "",
        "step 3 (steps[2]) before_tool_call:",
        '  handlers["my-guard"]',
        "    expected: null",
        '    actual:   ["skipped"]',
        "    (the plugin was expected not to run)",
    ]


def test_invalid_scenario_names_the_key_and_the_step(project: Path) -> None:
    path = _write(
        project,
        "scenario_bad.json",
        _steps(
            {"hook": "agent_end"},
            {**EXEC, "name": "exec", "expect_handlers": {"guard": 5}, "bogus": 1},
        ),
    )
    out = _run(path)
    assert out.returncode == 2
    assert out.stdout == ""
    err = out.stderr
    assert err.startswith(f"agentplug run: error: invalid scenario in {path}: ")
    assert err.count("\n") == 1  # one line naming every problem
    assert "configuration" not in err
    assert (
        'steps.1.expect_handlers.guard: expected a status ("ok"), a list of statuses or '
        'report patterns, a report pattern ({"status": "error", "error": "..."}) or null, '
        'got 5 (step 2 "exec", hook before_tool_call); '
    ) in err
    assert (
        'steps.1.bogus: Extra inputs are not permitted (step 2 "exec", hook before_tool_call)\n'
        in err
    )


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ('{"steps": [', "not valid JSON at line 1 column 12: Expecting value"),
        ("[]", "<root>: a scenario must be a JSON object"),
    ],
)
def test_unreadable_scenario(project: Path, text: str, problem: str) -> None:
    out = _run(_write(project, "scenario_x.json", text))
    assert out.returncode == 2
    assert out.stderr.splitlines() == [
        f"agentplug run: error: invalid scenario in {project / 'scenario_x.json'}: {problem}",
    ]


def test_missing_scenario_file(tmp_path: Path) -> None:
    out = _run(tmp_path / "project" / "nope.json")
    assert out.returncode == 2
    assert "invalid scenario" in out.stderr and "does not exist" in out.stderr


def _docs_example() -> str | None:
    text = DOCS.read_text(encoding="utf-8") if DOCS.exists() else ""
    found = re.search(r"```json\n(\{\n  \"description\": \"tool-preflight.*?)```", text, re.S)
    return found.group(1) if found else None


def test_the_testing_docs_example_runs(project: Path) -> None:
    example = _docs_example()
    if example is None:
        pytest.skip("the scenario example of docs/testing.md was not found")
    if "tool-preflight" not in {p.name for p in discover(ENTRY_POINT_GROUP, use_cache=False)}:
        pytest.skip("the example plugin tool-preflight is not installed")
    out = _run(_write(project, "scenario_tools.json", example))
    assert out.returncode == 0, out.stdout + out.stderr
    assert "expectations: all met (2 steps checked)" in out.stdout


# -- R3: module plugins next to the scenario file --------------------------------------


def test_module_plugins_import_from_the_scenario_folder(project: Path) -> None:
    path = _write(
        project,
        "scenario_local.json",
        {
            "plugins": [{"id": "my-guard", "module": "my_guard"}, "module:guard"],
            "steps": [{**EXEC, "expect_handlers": {"guard": "ok", "my-guard": "skipped"}}],
        },
    )
    assert not (path.parent.parent / "elsewhere" / "guard.py").exists()
    out = _run(path)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "guard " in out.stdout and "my-guard " in out.stdout


def test_build_host_puts_the_folder_on_sys_path_only_while_importing(
    project: Path, fresh_modules: None
) -> None:
    (project / "scn_local_plugin_r3.py").write_text(textwrap.dedent(MY_GUARD), encoding="utf-8")
    path = _write(project, "s.json", {"plugins": ["module:scn_local_plugin_r3"], "steps": []})
    before = list(sys.path)
    host = build_host(load_scenario(path))
    assert sys.path == before
    assert [r.plugin_id for r in host.plugins] == ["scn_local_plugin_r3"]
    assert str(project) not in sys.path


def test_a_module_that_is_not_there_is_named(project: Path) -> None:
    path = _write(project, "s.json", {"plugins": ["module:no_such_mod"], "steps": []})
    out = _run(path)
    assert out.returncode == 2
    assert "plugin 'no_such_mod': cannot import 'no_such_mod': ModuleNotFoundError" in out.stderr


# -- R4 / R5: steps that cannot run are named -------------------------------------------


def test_invalid_event_names_the_step_without_a_traceback(project: Path) -> None:
    path = _write(
        project,
        "scenario_event.json",
        _steps(
            {
                "name": "remove",
                "hook": "before_tool_call",
                "event": {"tool_name": "rm", "params": "rm"},
            }
        ),
    )
    out = _run(path)
    assert out.returncode == 2
    assert "Traceback" not in out.stderr
    assert out.stderr.splitlines() == [
        f"agentplug run: error: {path} cannot run: "
        'step 1 "remove" (steps[0]) (before_tool_call): invalid event: params: '
        "Input should be a valid dictionary",
    ]


def test_unknown_hook_names_the_step(project: Path) -> None:
    path = _write(
        project,
        "scenario_hook.json",
        _steps({"hook": "agent_end"}, {"hook": "befor_tool_call", "event": {}}),
    )
    out = _run(path, "--json")
    assert out.returncode == 2
    assert out.stdout == ""
    assert len(out.stderr.splitlines()) == 1
    assert (
        "step 2 (steps[1]): unknown hook 'befor_tool_call'; did you mean 'before_tool_call'?"
        in out.stderr
    )


def test_a_crashing_step_is_named(
    project: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    fresh_modules: None,
) -> None:
    async def broken(self: object, tool_name: str, outcome: object, **kwargs: object) -> object:
        raise RuntimeError("resolver exploded")

    monkeypatch.setattr(ApprovalBroker, "decide", broken)
    path = _write(
        project,
        "scenario_crash.json",
        _steps({"hook": "agent_end"}, {**SEARCH, "name": "search"}, approvals=["allow-once"]),
    )
    checked = load_checked_scenario(path)
    host = build_host(checked.scenario)
    preflight(host, checked)
    with pytest.raises(ScenarioRunError) as info:
        asyncio.run(run_checked(checked, host))
    assert info.value.index == 1
    assert info.value.detail == (
        'running the scenario failed at step 2 "search" (steps[1]) before_tool_call: '
        "RuntimeError: resolver exploded"
    )
    assert isinstance(info.value.__cause__, RuntimeError)

    assert main(["run", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"agentplug run: error: {path}: running the scenario failed at step 2 ")
    assert err.count("\n") == 1 and "(run with -v for the traceback)" in err
    assert main(["-v", "run", str(path)]) == 2
    err = capsys.readouterr().err
    assert "Traceback (most recent call last):" in err  # the plugin author's bug, with -v


# -- the module API ---------------------------------------------------------------------


def test_check_and_render_in_process(project: Path, fresh_modules: None) -> None:
    path = _write(project, "scenario_api.json", _steps({**EXEC, "expect": {"blocked": False}}))
    checked = load_checked_scenario(path)
    assert checked.has_expectations and checked.path == path.resolve()
    reports = asyncio.run(run_checked(checked, build_host(checked.scenario)))
    failures = check(checked, reports)
    assert [f.expectation.index for f in failures] == [0]
    assert render_failures("x.json", len(reports), failures).startswith(
        "x.json: 1 of 1 step did not meet expectations\n\nstep 1 (steps[0]) before_tool_call:"
    )


def test_scenario_error_is_an_agentplug_error_not_a_config_error() -> None:
    from agentplug.core.errors import AgentplugError, ConfigError

    assert issubclass(ScenarioError, AgentplugError)
    assert not issubclass(ScenarioError, ConfigError)


def test_scenario_check_does_not_import_pytest() -> None:
    code = "import sys, agentplug.testing.scenario_check; print('pytest' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.stdout.strip() == "False", out.stderr


def test_help_is_plain_text() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "agentplug.cli", "--help"], capture_output=True, text=True
    )
    assert "The agentplug command line." in out.stdout
    assert "``" not in out.stdout
    run_help = subprocess.run(
        [sys.executable, "-m", "agentplug.cli", "run", "--help"], capture_output=True, text=True
    ).stdout
    assert "exit status" in run_help and "sys.path" in run_help
