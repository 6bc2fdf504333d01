"""RESTART_AGENT: CLI mode exits 75 under the supervisor; embedded mode restarts in process."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from agentplug import PluginApi, PluginHost
from agentplug.actions.builtins.lifecycle import RestartController, restart_settings
from agentplug.actions.builtins.memory import MemoryLog
from agentplug.actions.model import Message
from agentplug.core.errors import ConfigError
from agentplug.plugins.supervisor import supervise

ROOT = Path(__file__).resolve().parents[2]

AGENT = """
import asyncio, json, os, sys
from agentplug import PluginHost
from agentplug.actions.model import Message
from agentplug.actions.builtins.lifecycle import RestartController
from agentplug.actions.builtins.memory import MemoryLog

state, log_file = sys.argv[1], sys.argv[2]

def note(**item):
    with open(log_file, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(item) + "\\n")

async def main():
    host = PluginHost({"runtime": {"state_dir": state}, "plugins": {"enabled": False}})
    runtime = host.gateway.actions
    # Mode comes from the environment: the supervisor sets AGENTPLUG_SUPERVISED=1 (CLI).
    controller = RestartController.from_config({"restart": {"delay_s": 0.2}})
    runtime.register_service("restart", controller)
    host.register(
        lambda api: api.on("gateway_stop", lambda: note(event="gateway_stop")), "stopper"
    )
    await runtime.load()
    run = int(os.environ["AGENTPLUG_RESTART_COUNT"])
    memories = [m.text for m in MemoryLog(host.gateway.store).recent(kind="restart")]
    note(run=run, mode=controller.mode, memories=memories)
    if run == 0:
        flow = await runtime.run(
            Message(content={"action": "RESTART_AGENT", "parameters": {"reason": "test"}})
        )
        note(reply=flow.result.text)
        await asyncio.sleep(60)  # the controller ends the process with 75 before this
        note(error="not restarted")
        return 1
    return 0

sys.exit(asyncio.run(main()))
"""

SUPERVISOR_CLI = """
import argparse, sys
from agentplug.plugins.supervisor import add_supervisor_command
parser = argparse.ArgumentParser(prog="agentplug")
add_supervisor_command(parser.add_subparsers(dest="command", required=True))
args = parser.parse_args(sys.argv[1:])
sys.exit(args.func(args))
"""


def read_log(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_cli_mode_exits_75_and_the_supervised_second_run_sees_the_restarting_memory(
    tmp_path: Path,
) -> None:
    agent = tmp_path / "agent.py"
    agent.write_text(AGENT)
    log_file = tmp_path / "log.jsonl"
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            SUPERVISOR_CLI,
            "supervise",
            "--max-restarts",
            "3",
            "--backoff",
            "0.1",
            "--",
            sys.executable,
            str(agent),
            str(tmp_path / "state"),
            str(log_file),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    entries = read_log(log_file)
    assert {"error": "not restarted"} not in entries  # the restart ended the 60 s sleep
    assert entries[0] == {"run": 0, "mode": "cli", "memories": []}
    assert {"reply": "Restarting..."} in entries
    assert {"event": "gateway_stop"} in entries  # stopped before exiting
    assert entries[-1] == {"run": 1, "mode": "cli", "memories": ["Restarting..."]}
    assert "restart 1/3" in done.stderr


def test_supervise_returns_other_exit_codes_and_gives_up_after_max_restarts(
    tmp_path: Path,
) -> None:
    counter = tmp_path / "runs"
    script = (
        "import pathlib, sys; p = pathlib.Path(sys.argv[1]); "
        "p.write_text(p.read_text() + 'x' if p.exists() else 'x'); sys.exit(int(sys.argv[2]))"
    )
    assert supervise([sys.executable, "-c", script, str(counter), "3"], backoff_s=0) == 3
    assert counter.read_text() == "x"
    counter.unlink()
    code = supervise(
        [sys.executable, "-c", script, str(counter), "75"], max_restarts=2, backoff_s=0
    )
    assert code == 75 and counter.read_text() == "xxx"  # first run + 2 restarts


# ---------------------------------------------------------------------------
# Embedded mode


def write_plugin(site: Path, version: str, *, plugin_id: str = "restarty") -> Path:
    """An installed plugin (module + dist-info) reporting gateway events with its version."""
    module = f"fakeplug_{plugin_id}"
    (site / f"{module}.py").write_text(
        textwrap.dedent(
            f"""
            from fakeplug_shared import EVENTS
            VERSION = "{version}"

            def register(api):
                api.on("gateway_stop", lambda: EVENTS.append(("stop", "{plugin_id}", VERSION)))
                api.on("gateway_start", lambda: EVENTS.append(("start", "{plugin_id}", VERSION)))
            """
        )
    )
    for old in site.glob(f"{plugin_id}-*.dist-info"):
        for file in old.iterdir():
            file.unlink()
        old.rmdir()
    info = site / f"{plugin_id}-{version}.dist-info"
    info.mkdir()
    metadata = f"Metadata-Version: 2.1\nName: {plugin_id}\nVersion: {version}\n"
    (info / "METADATA").write_text(metadata)
    (info / "entry_points.txt").write_text(f"[agentplug]\n{plugin_id} = {module}\n")
    return info


@pytest.fixture
def events(site_dir: Path) -> list[Any]:
    (site_dir / "fakeplug_shared.py").write_text("EVENTS = []\n")
    import importlib

    importlib.invalidate_caches()
    shared = importlib.import_module("fakeplug_shared")
    events: list[Any] = shared.EVENTS
    return events


def restart_message(reason: str = "test") -> Message:
    return Message(content={"action": "RESTART_AGENT", "parameters": {"reason": reason}})


def test_embedded_restart_fires_gateway_stop_then_start_and_reloads_a_changed_plugin(
    site_dir: Path, events: list[Any]
) -> None:
    write_plugin(site_dir, "1.0")

    async def go() -> None:
        host = PluginHost({"plugins": {"allow": ["restarty", "newcomer"]}})
        host.load_installed(use_cache=False)
        controller = RestartController("embedded", delay_s=0.05, stop_budget_s=2)
        runtime = host.gateway.actions
        runtime.register_service("restart", controller)
        await runtime.load()
        write_plugin(site_dir, "2.0")  # upgraded on disk while the agent runs
        flow = await runtime.run(restart_message("upgrade"))
        assert flow.ok and flow.result.text == "Restarting..."
        assert flow.result.data["mode"] == "embedded"
        assert events == []  # the reply comes first; the restart follows the delay
        [memory] = MemoryLog(host.gateway.store).recent(kind="restart")
        assert memory.text == "Restarting..." and memory.data["reason"] == "upgrade"
        report = await controller.wait(timeout_s=30)
        assert events == [("stop", "restarty", "1.0"), ("start", "restarty", "2.0")]
        assert report.reload.reloaded == ["restarty"] and report.reload.errors == []
        [record] = [r for r in host.plugins if not r.bundled]
        assert record.plugin_id == "restarty" and record.version == "2.0"

        # A removed plugin is unregistered, a new one loads.
        events.clear()
        for file in (site_dir / "restarty-2.0.dist-info").iterdir():
            file.unlink()
        (site_dir / "restarty-2.0.dist-info").rmdir()
        write_plugin(site_dir, "1.0", plugin_id="newcomer")
        report = await controller.restart(host, "second", runtime)
        assert report.reload.removed == ["restarty"] and report.reload.added == ["newcomer"]
        assert [r.plugin_id for r in host.plugins if not r.bundled] == ["newcomer"]
        assert events == [("stop", "restarty", "2.0"), ("start", "newcomer", "1.0")]

    asyncio.run(go())


def test_embedded_restart_reloads_a_plugin_whose_ejected_source_changed(
    site_dir: Path, events: list[Any], tmp_path: Path
) -> None:
    from agentplug.plugins.manager import RECORD_FILE, UpstreamRecord

    write_plugin(site_dir, "1.0")
    state = tmp_path / "state"

    async def go() -> None:
        config = {"plugins": {"allow": ["restarty"]}, "runtime": {"state_dir": str(state)}}
        host = PluginHost(config)
        host.load_installed(use_cache=False)
        controller = RestartController("embedded", delay_s=0)
        controller.attach(host)
        # Eject by hand: same version, local edits in <state>/plugins/restarty.
        copy = state / "plugins" / "restarty"
        copy.mkdir(parents=True)
        source = (site_dir / "fakeplug_restarty.py").read_text()
        (copy / "fakeplug_restarty.py").write_text(source.replace('"1.0"', '"ejected"'))
        record = UpstreamRecord(
            plugin_id="restarty", distribution="restarty", version="1.0", source_kind="sdist"
        )
        (copy / RECORD_FILE).write_text(record.model_dump_json())
        report = await controller.restart(host, "ejected")
        assert report.reload.reloaded == ["restarty"]
        assert events[-1] == ("start", "restarty", "ejected")

    asyncio.run(go())


@pytest.mark.parametrize("style", ["async", "thread"])
def test_restart_completes_while_a_gateway_stop_handler_hangs(style: str) -> None:
    release = threading.Event()
    started: list[str] = []
    finished: list[str] = []

    def register(api: PluginApi) -> None:
        if style == "async":

            async def hang() -> None:
                await asyncio.sleep(3600)
                finished.append("stop")

            api.on("gateway_stop", hang)
        else:

            def hang_in_thread() -> None:
                release.wait(3600)
                finished.append("stop")

            api.on("gateway_stop", hang_in_thread, thread=True)
        api.on("gateway_start", lambda: started.append("start"))

    host = PluginHost({"plugins": {"entries": {"hanger": {"hooks": {"timeout_ms": 600_000}}}}})
    host.register(register, "hanger")
    controller = RestartController("embedded", delay_s=0, stop_budget_s=0.3)

    async def go() -> Any:
        report = await controller.restart(host, "hang test")
        # Still hanging when the restart returned: the restart did not wait for it.
        hanging = not finished
        release.set()  # let the abandoned thread end (asyncio.run joins its executor)
        return report, hanging

    try:
        report, hanging = asyncio.run(go())
    finally:
        release.set()
    assert report.stop_timed_out and "restart:gateway_stop" in report.stop_pending
    assert started == ["start"] and hanging


def test_cli_mode_stops_the_gateway_then_exits_with_75() -> None:
    codes: list[int] = []
    stopped: list[str] = []
    host = PluginHost()
    host.register(lambda api: api.on("gateway_stop", lambda: stopped.append("stop")), "p")
    controller = RestartController("cli", delay_s=0, exit_fn=codes.append)
    report = asyncio.run(controller.restart(host, "cli"))
    assert codes == [75] and stopped == ["stop"] and report.mode == "cli"


def test_a_second_restart_request_while_one_is_pending_is_not_scheduled_twice() -> None:
    async def go() -> list[Any]:
        host = PluginHost({"plugins": {"enabled": False}})
        runtime = host.gateway.actions
        controller = RestartController("embedded", delay_s=0.2)
        runtime.register_service("restart", controller)
        await runtime.load()
        first = await runtime.run(restart_message())
        second = await runtime.run(restart_message())
        await controller.wait(timeout_s=30)
        return [first.result, second.result, len(controller.reports)]

    first, second, count = asyncio.run(go())
    assert first.success and second.success and "already scheduled" in second.text
    assert count == 1


def test_restart_settings_errors_name_the_actions_restart_key() -> None:
    with pytest.raises(ConfigError) as info:
        restart_settings({"restart": {"delay_s": -1, "speed": 2}})
    assert "actions.restart.delay_s" in str(info.value)
    assert "actions.restart.speed" in str(info.value)


def test_supervised_environment_selects_cli_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTPLUG_SUPERVISED", "1")
    assert RestartController.from_config({}).mode == "cli"
    monkeypatch.delenv("AGENTPLUG_SUPERVISED")
    assert RestartController.from_config({}).mode == "embedded"
    assert RestartController.from_config({"restart": {"mode": "cli"}}).mode == "cli"


def test_restart_with_a_shutdown_finalizer_ends_active_sessions_before_gateway_stop() -> None:
    from agentplug.services.lifecycle import ShutdownFinalizer

    order: list[str] = []
    host = PluginHost()

    def register(api: PluginApi) -> None:
        api.on("session_end", lambda event: order.append(f"end:{event.session_key}"))
        api.on("gateway_stop", lambda: order.append("stop"))
        api.on("gateway_start", lambda: order.append("start"))

    host.register(register, "p")
    finalizer = ShutdownFinalizer(host, lambda: ["s1"], timeout_s=2, hard_exit=False)
    controller = RestartController("embedded", delay_s=0, finalizer=finalizer)
    report = asyncio.run(controller.restart(host, "finalize"))
    assert order == ["end:s1", "stop", "start"] and not report.stop_timed_out


def test_supervisor_forwards_sigterm_and_does_not_restart_after_it(tmp_path: Path) -> None:
    import signal

    runs = tmp_path / "runs"
    child = (
        "import pathlib, signal, sys, time\n"
        "p = pathlib.Path(sys.argv[1])\n"
        "p.write_text(p.read_text() + 'x' if p.exists() else 'x')\n"
        "signal.signal(signal.SIGTERM, lambda *a: sys.exit(75))\n"
        "time.sleep(60)\n"
    )
    proc = subprocess.Popen(
        [
            *(sys.executable, "-c", SUPERVISOR_CLI, "supervise", "--backoff", "0", "--"),
            *(sys.executable, "-c", child, str(runs)),
        ],
    )
    deadline = time.monotonic() + 60  # a hang guard: the child's start is what is awaited
    while not runs.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert runs.exists(), "the supervised child never started"
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 75
    assert runs.read_text() == "x"  # stopped on request: no restart
