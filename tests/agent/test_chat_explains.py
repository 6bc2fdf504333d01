"""``agentplug chat`` explains itself: the banner says which model answers and how to pick
another, ``--demo`` shows a tool call, a block and an approval offline, the trace names
refused and blocked tools with their public reason and real handler durations, ``--json``
is for programs, and a plugin's file is announced and kept in the state folder (issue 28
item 5). Real ``agentplug chat`` subprocesses fed on stdin.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from agentplug.cli.chat_demo import DEMO_PLUGINS

from tests.conftest import FakeDist

ROOT = Path(__file__).resolve().parents[2]
CLEAN = ("AGENTPLUG_CONFIG", "AGENTPLUG_STATE_DIR", "AGENTPLUG_STATE_URL")

SLOW_HANDLER = """
import time

def register(api):
    def received(event):
        time.sleep(0.002)  # measurable at any machine speed

    api.on("message_received", received)
"""


def chat(
    cwd: Path, stdin: str, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if k not in CLEAN}
    environ["AGENTPLUG_CACHE_DIR"] = str(cwd / "cache")
    environ.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "agentplug.cli", "chat", *args],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=cwd,
        env=environ,
        timeout=120,
    )


def script(tmp_path: Path, *replies: object) -> str:
    path = tmp_path / "replies.json"
    path.write_text(json.dumps(list(replies)), encoding="utf-8")
    return str(path)


def test_the_banner_says_the_default_model_repeats_what_you_type_and_how_to_pick_one(
    tmp_path: Path,
) -> None:
    done = chat(tmp_path, "/quit\n", "--no-plugins")
    assert done.returncode == 0, done.stderr
    first, hint = done.stdout.splitlines()[:2]
    assert first.startswith("agentplug chat: model: scripted/default")
    assert "repeats what you type" in first
    assert "--model PROVIDER/MODEL" in hint and "agent.model" in hint and "--demo" in hint


def test_the_banner_names_the_model_that_answers(tmp_path: Path) -> None:
    done = chat(tmp_path, "/quit\n", "--no-plugins", "--model", "ollama/llama3.2")
    assert done.stdout.splitlines()[0] == "agentplug chat: model: ollama/llama3.2"


def test_an_unknown_provider_is_said_at_start_with_a_did_you_mean(tmp_path: Path) -> None:
    done = chat(tmp_path, "/quit\n", "--no-plugins", "--model", "olama/llama3")
    assert done.returncode == 0, done.stderr
    [warning] = [line for line in done.stdout.splitlines() if "warning:" in line]
    assert "agent.model: unknown model provider 'olama'; did you mean 'ollama'?" in warning


def test_the_demo_shows_a_tool_call_a_block_and_an_approval_with_the_example_plugins(
    tmp_path: Path,
) -> None:
    done = chat(tmp_path, "once\n/quit\n", "--demo")
    out = done.stdout
    assert done.returncode == 0, out + done.stderr
    assert "plugins (2): audit-log, tool-preflight" in out
    assert "Title:       Run web search" in out and "-> allow-once" in out  # the approval
    assert "tool web_search: allowed=True, approval=allow-once" in out  # the tool call ran
    assert (
        "tool delete_repository: allowed=False, blocked_by=tool-preflight, reason=tool "
        "'delete_repository' is blocked by the operator"
    ) in out  # the block, with its public reason
    assert "agent> Invoices over 10 000 EUR need two approvals" in out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache"]  # nothing left behind


def test_the_demo_needs_only_the_example_plugins_make_demo_installs() -> None:
    # `make demo` installs the example plugins demo/scenario.json names (Makefile).
    scenario = json.loads((ROOT / "demo" / "scenario.json").read_text(encoding="utf-8"))
    assert set(DEMO_PLUGINS) <= set(scenario["plugins"])


def test_the_demo_without_its_plugins_says_how_to_get_them(tmp_path: Path) -> None:
    done = chat(tmp_path, "", "--demo", "--no-plugins")
    assert done.returncode == 1
    [line] = done.stderr.splitlines()
    assert line.startswith("agentplug chat --demo: error: the demo runs the example plugins")


def test_an_unknown_tool_leaves_a_line_in_the_trace(tmp_path: Path) -> None:
    replies = script(tmp_path, {"tool_calls": [{"id": "c1", "name": "nope_tool"}]}, "ok")
    done = chat(tmp_path, "hi\n/quit\n", "--no-plugins", "--script", replies)
    assert done.returncode == 0, done.stderr
    [line] = [x for x in done.stdout.splitlines() if "tool nope_tool:" in x]
    assert "refused=unknown tool 'nope_tool'" in line


def test_trace_shows_every_hook_with_each_handlers_measured_duration(
    tmp_path: Path, site_dir: Path, fake_dist: FakeDist
) -> None:
    fake_dist("fakeplug-slow", "fakeplug_slow", SLOW_HANDLER, {"slow": "fakeplug_slow"})
    env = {"PYTHONPATH": str(site_dir)}
    human = chat(tmp_path, "hi\n/quit\n", "--trace", env=env)
    assert human.returncode == 0, human.stderr
    lines = human.stdout.splitlines()
    at = next(i for i, x in enumerate(lines) if x.startswith("  | message_received ("))
    below = []
    for line in lines[at + 1 :]:
        if not line.startswith("  |   "):
            break
        below.append(line)
    assert any(x.startswith("  |   slow: ok (") and x.endswith(" ms)") for x in below)
    machine = chat(tmp_path, "hi\n/quit\n", "--json", env=env)
    rows = [json.loads(x) for x in machine.stdout.splitlines()]
    [hook] = [r for r in rows if r.get("name") == "message_received"]
    [slow] = [h for h in hook["handlers"] if h["plugin_id"] == "slow"]
    assert slow["duration_ms"] > 0  # measured (hosts time handlers only when asked)


def test_json_prints_only_json_lines(tmp_path: Path) -> None:
    done = chat(tmp_path, "hi\n/quit\n", "--no-plugins", "--json")
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in done.stdout.splitlines()]
    assert rows[-1]["turn"]["reply"] == "You said: hi"


def test_chat_keeps_state_in_the_commands_state_folder_and_says_so(tmp_path: Path) -> None:
    done = chat(tmp_path, "/quit\n", "--no-plugins")
    assert (
        "  state: sqlite:///.agentplug-state/state.sqlite3 (the default: .agentplug-state in "
        "the current folder)"
    ) in done.stdout.splitlines()
    assert (tmp_path / ".agentplug-state" / "state.sqlite3").exists()


@pytest.mark.parametrize("args", [[], ["--trace"]])
def test_the_audit_plugin_writes_into_the_state_folder_and_the_banner_says_so(
    args: list[str], tmp_path: Path
) -> None:
    done = chat(tmp_path, "hi\n/quit\n", *args)
    assert done.returncode == 0, done.stderr
    audit = (tmp_path / ".agentplug-state" / "audit-log.jsonl").absolute()
    assert f"  audit-log: writes one line per hook call to {audit}" in done.stdout.splitlines()
    assert audit.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == [".agentplug-state", "cache"]
