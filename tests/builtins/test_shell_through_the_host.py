"""Every shell command goes through the host's terminal runs (issue 13 item 2).

Custom actions with a ``shell`` handler used their own terminal and ran even with
``actions.shell.enabled`` off. Now they, ``SHELL_COMMAND`` and the control API share one
:class:`TerminalRuns`: the same switch, allow-list, terminal service (a clean
environment) and output hub; a command still running after ``replyAfterSeconds`` is
reported with its run id at once and goes on.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentplug import PluginHost
from agentplug.actions.builtins.comms import OUTPUT_HUB_SERVICE, OutputHub
from agentplug.actions.flow import FlowResult
from agentplug.actions.terminal import TerminalResult

WAIT_S = 60.0
"""Upper bound for a command to finish once released (never a timing assertion)."""


def custom(command: str, name: str = "MAKE_FILE") -> dict[str, Any]:
    return {
        "id": name.lower().replace("_", "-"),
        "name": name,
        "description": "run a command",
        "parameters": [],
        "handler": {"type": "shell", "command": command},
        "enabled": True,
        "createdAt": "2025-01-01T00:00:00Z",
        "updatedAt": "2025-01-01T00:00:00Z",
    }


def host_with(shell: dict[str, Any], *actions: dict[str, Any]) -> PluginHost:
    return PluginHost({"actions": {"shell": shell}, "customActions": list(actions)})


async def run(host: PluginHost, text: str) -> FlowResult:
    await host.gateway.actions.load()
    flow: FlowResult = await host.gateway.actions.run(text)
    return flow


def test_a_custom_shell_action_is_refused_while_the_shell_is_disabled(tmp_path: Path) -> None:
    host = host_with({"cwd": str(tmp_path)}, custom("touch made"))
    flow = asyncio.run(run(host, "MAKE_FILE"))
    assert flow.result is not None and not flow.result.success
    assert "actions.shell.enabled" in flow.result.text
    assert not (tmp_path / "made").exists()


def test_a_custom_shell_action_obeys_the_allow_list(tmp_path: Path) -> None:
    host = host_with(
        {"enabled": True, "cwd": str(tmp_path), "allowedCommands": ["echo"]},
        custom("echo hi; touch made"),
        custom("echo hi", name="SAY_HI"),
    )
    refused = asyncio.run(run(host, "MAKE_FILE"))
    assert refused.result is not None and not refused.result.success
    assert "'touch' is not in actions.shell.allowedCommands" in refused.result.text
    assert not (tmp_path / "made").exists()
    allowed = asyncio.run(run(host, "SAY_HI"))
    assert allowed.result is not None and allowed.result.success
    assert allowed.result.text == "hi\n"


def test_shell_command_obeys_the_allow_list(tmp_path: Path) -> None:
    host = host_with({"enabled": True, "cwd": str(tmp_path), "allowedCommands": ["echo"]})
    flow = asyncio.run(run(host, 'SHELL_COMMAND {"command": "echo x > f; rm f"}'))
    assert flow.result is not None and not flow.result.success
    assert flow.result.data["reason"] == "not_allowed"


def test_a_custom_shell_action_goes_through_the_hosts_terminal_and_output_hub() -> None:
    calls: list[str] = []

    class HostTerminal:
        async def run(
            self,
            command: str,
            *,
            cwd: str | None,
            timeout_s: float,
            max_output_bytes: int,
            on_output: Callable[[str], None] | None = None,
        ) -> TerminalResult:
            calls.append(command)
            assert on_output is not None
            on_output("from the host terminal")
            return TerminalResult(exit_code=0, output="from the host terminal")

    host = host_with({"enabled": True}, custom("echo {{who}}"))
    host.gateway.actions.register_service("terminal", HostTerminal())

    async def go() -> tuple[FlowResult, list[str]]:
        flow = await run(host, "MAKE_FILE")
        hub = host.gateway.actions.get_service(OUTPUT_HUB_SERVICE)
        assert isinstance(hub, OutputHub)
        (status,) = hub.runs()
        texts = [chunk.text async for chunk in hub.subscribe(status.run_id)]
        return flow, texts

    flow, texts = asyncio.run(go())
    assert flow.result is not None and flow.result.success
    assert calls == ["echo {{who}}"]  # undeclared placeholder: literal text
    assert texts == ["from the host terminal"]


def test_a_custom_shell_action_sees_none_of_the_hosts_environment(tmp_path: Path) -> None:
    os.environ["AGENTPLUG_TEST_SECRET"] = "s3cr3t"
    try:
        host = host_with({"enabled": True, "cwd": str(tmp_path)}, custom("env"))
        flow = asyncio.run(run(host, "MAKE_FILE"))
    finally:
        del os.environ["AGENTPLUG_TEST_SECRET"]
    assert flow.result is not None and flow.result.success
    assert "s3cr3t" not in flow.result.text and "PATH=" in flow.result.text


def test_a_long_shell_command_returns_its_run_id_at_once_and_keeps_running(
    tmp_path: Path,
) -> None:
    host = host_with({"enabled": True, "cwd": str(tmp_path), "replyAfterSeconds": 0.2})
    command = "echo started; while [ ! -f go ]; do sleep 0.05; done; echo finished"

    async def go() -> tuple[FlowResult, dict[str, Any], str]:
        flow = await run(host, f'SHELL_COMMAND {{"command": "{command}"}}')
        assert flow.result is not None
        run_id = flow.result.data["run_id"]
        runs = host.gateway.terminal
        record = runs.get(run_id)
        assert record is not None and not record.finished  # it cannot end before "go"
        (tmp_path / "go").touch()
        assert await runs.wait(record, WAIT_S)
        hub = host.gateway.actions.get_service(OUTPUT_HUB_SERVICE)
        assert isinstance(hub, OutputHub)
        streamed = "".join([c.text async for c in hub.subscribe(run_id)])
        return flow, record.to_json(), streamed

    flow, status, streamed = asyncio.run(go())
    assert flow.result is not None and flow.result.success
    assert flow.result.data["status"] == "running"
    assert f"/api/terminal/runs/{flow.result.data['run_id']}/stream" in flow.result.text
    assert status["status"] == "exited" and status["source"] == "SHELL_COMMAND"
    assert streamed == status["output"] == "started\nfinished\n"


def test_commands_from_every_source_share_the_cap_on_active_runs(tmp_path: Path) -> None:
    host = host_with(
        {"enabled": True, "cwd": str(tmp_path), "replyAfterSeconds": 0.1, "maxActiveRuns": 1},
        custom("while [ ! -f go ]; do sleep 0.05; done"),
    )

    async def go() -> tuple[FlowResult, FlowResult]:
        first = await run(host, "MAKE_FILE")
        second = await host.gateway.actions.run('SHELL_COMMAND {"command": "echo too many"}')
        (tmp_path / "go").touch()
        await host.gateway.terminal.aclose()
        return first, second

    first, second = asyncio.run(go())
    assert first.result is not None and "still running" in first.result.text
    assert second.result is not None and not second.result.success
    assert second.result.data["reason"] == "busy"
