"""``agentplug actions run``: built-ins end to end through the flow, from the CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path


def _run(tmp_path: Path, text: str, config: dict[str, object] | None = None) -> tuple[int, dict]:
    args = [sys.executable, "-m", "agentplug.cli", "actions", "run", text, "--json"]
    if config is not None:
        path = tmp_path / "agentplug.json"
        path.write_text(json.dumps(config), encoding="utf-8")
        args += ["--config", str(path)]
    env = {**os.environ, "AGENTPLUG_CACHE_DIR": str(tmp_path / "cache")}
    done = subprocess.run(args, capture_output=True, text=True, cwd=tmp_path, env=env)
    return done.returncode, json.loads(done.stdout.strip().splitlines()[-1])


def test_core_status_runs_through_the_flow_from_the_cli(tmp_path: Path) -> None:
    code, report = _run(tmp_path, "CORE_STATUS")
    assert code == 0
    assert report["action"] == "CORE_STATUS" and report["result"]["success"] is True
    steps = [step["name"] for step in report["trace"]["steps"]]
    assert steps[0] == "select" and "execute" in steps


def test_shell_command_from_the_cli_is_refused_unless_enabled(tmp_path: Path) -> None:
    code, report = _run(tmp_path, 'SHELL_COMMAND {"command": "touch made"}')
    assert code == 1
    assert not (tmp_path / "made").exists()
    assert "actions.shell.enabled" in report["result"]["text"]


def test_shell_command_from_the_cli_runs_when_the_operator_enables_it(tmp_path: Path) -> None:
    config = {"actions": {"shell": {"enabled": True, "cwd": str(tmp_path)}}}
    code, report = _run(tmp_path, 'SHELL_COMMAND {"command": "printf done > made"}', config)
    assert code == 0, report
    assert (tmp_path / "made").read_text() == "done"


def test_unknown_action_from_the_cli_exits_non_zero(tmp_path: Path) -> None:
    code, report = _run(tmp_path, "FLY_TO_THE_MOON")
    assert code == 1 and report["outcome"] == "no_match"
