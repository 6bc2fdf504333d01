"""Faulty handlers never take the host down or slip past their budget (issue 18, items 6-7).

* A handler that blocks the event loop past its budget (a sync ``time.sleep``) cannot be
  interrupted, but its late result is refused: it counts as timed out, the hook's failure
  policy applies (``before_tool_call`` blocks) and the log says it blocked the loop.
* ``SystemExit`` and ``GeneratorExit`` raised by a handler are handler failures (policy,
  log line with the plugin id); only ``KeyboardInterrupt`` propagates.

Sleeps are always many times the budget, so the assertions never depend on how fast the
machine is: only on the budget having certainly passed.
"""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from agentplug import HandlerStatus, hookimpl
from agentplug.core.overruns import seen_overruns

from .conftest import SHORT_MS, dispatch, make_host, on, run, status_of, statuses

TOOL_EVENT = {"tool_name": "exec", "params": {"cmd": "ls"}}
OVERRUN_S = 6 * SHORT_MS / 1000


@pytest.fixture(autouse=True)
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Overruns are remembered in the cache directory: a private one per test."""
    path = tmp_path / "cache"
    monkeypatch.setenv("AGENTPLUG_CACHE_DIR", str(path))
    yield path


def _sleeper(result: Any = None) -> Any:
    def blocking(event: Any) -> Any:
        time.sleep(OVERRUN_S)
        return result

    return blocking


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


# -- a sync handler that overruns its budget (item 6) ------------------------------------


def test_blocking_sync_handler_past_its_budget_blocks_the_tool_call() -> None:
    host = make_host()
    host.register(on("before_tool_call", _sleeper(), timeout_ms=SHORT_MS), "sleepy")

    result = dispatch(host, "before_tool_call", TOOL_EVENT)

    assert status_of(result, "sleepy") is HandlerStatus.TIMEOUT
    assert result.outcome.blocked is True
    assert result.outcome.blocked_by == "sleepy"


def test_late_result_of_a_blocking_handler_is_refused() -> None:
    host = make_host()
    late = _sleeper({"content": "too late"})
    host.register(on("message_sending", late, priority=5, timeout_ms=SHORT_MS), "sleepy")
    host.register(on("message_sending", lambda event: None), "next")

    result = dispatch(host, "message_sending", {"content": "original"})

    assert statuses(result) == [("sleepy", HandlerStatus.TIMEOUT), ("next", HandlerStatus.OK)]
    assert result.outcome.content == "original"


def test_blocking_async_handler_that_never_suspends_is_refused_too() -> None:
    async def blocking(event: Any) -> None:
        time.sleep(OVERRUN_S)

    host = make_host()
    host.register(on("before_tool_call", blocking, timeout_ms=SHORT_MS), "sleepy")

    result = dispatch(host, "before_tool_call", TOOL_EVENT)

    assert status_of(result, "sleepy") is HandlerStatus.TIMEOUT
    assert result.outcome.blocked is True


def test_blocking_observation_handler_is_reported_as_timed_out() -> None:
    host = make_host()
    ran: list[str] = []
    host.register(on("message_received", _sleeper(), priority=5, timeout_ms=SHORT_MS), "sleepy")
    host.register(on("message_received", lambda event: ran.append("next")), "next")

    result = dispatch(host, "message_received", {"content": "hi"})

    assert statuses(result) == [("sleepy", HandlerStatus.TIMEOUT), ("next", HandlerStatus.OK)]
    assert ran == ["next"]


def test_blocking_handler_is_logged_as_blocking_the_event_loop(
    agentplug_logs: pytest.LogCaptureFixture,
) -> None:
    host = make_host()
    host.register(on("before_tool_call", _sleeper(), timeout_ms=SHORT_MS), "sleepy")

    dispatch(host, "before_tool_call", TOOL_EVENT)

    lines = [m for m in _warnings(agentplug_logs) if "sleepy" in m and "event loop" in m]
    assert lines, _warnings(agentplug_logs)
    assert "thread=True" in lines[0]


def test_blocking_handler_overrun_is_noted_on_the_plugin_record() -> None:
    host = make_host()
    record = host.register(on("before_tool_call", _sleeper(), timeout_ms=SHORT_MS), "sleepy")

    dispatch(host, "before_tool_call", TOOL_EVENT)
    dispatch(host, "before_tool_call", TOOL_EVENT)

    notes = [w for w in record.warnings if "before_tool_call" in w and "event loop" in w]
    assert len(notes) == 1


def test_blocking_handler_overrun_is_remembered_for_later_commands(cache_dir: Path) -> None:
    host = make_host()
    host.register(on("before_tool_call", _sleeper(), timeout_ms=SHORT_MS), "sleepy")

    dispatch(host, "before_tool_call", TOOL_EVENT)

    seen = seen_overruns(cache_dir)["sleepy"]["before_tool_call"]
    assert seen["budget_ms"] == SHORT_MS
    assert seen["elapsed_ms"] > SHORT_MS


BLOCKING_PLUGIN = f"""
import time
from agentplug import hookimpl


@hookimpl(timeout_ms={SHORT_MS})
def before_tool_call(event):
    time.sleep({OVERRUN_S})
"""


def _cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agentplug.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


@pytest.mark.parametrize("command", ["plugins", "doctor"])
def test_plugins_and_doctor_warn_about_a_handler_seen_to_overrun(
    command: str, fake_dist: Any, site_dir: Path, cache_dir: Path
) -> None:
    fake_dist(
        "fakeplug-sleepy", "fakeplug_sleepy", BLOCKING_PLUGIN, {"sleepy-plugin": "fakeplug_sleepy"}
    )
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(site_dir), os.environ.get("PYTHONPATH", "")]),
        "AGENTPLUG_CACHE_DIR": str(cache_dir),
    }
    before = _cli(command, env=env)
    assert "event loop" not in before.stdout, before.stdout

    host_run = subprocess.run(
        [
            sys.executable,
            "-c",
            "import asyncio; from agentplug import PluginHost; h = PluginHost(); "
            "h.load_installed(use_cache=False); "
            "r = asyncio.run(h.dispatch('before_tool_call', {'tool_name': 'exec'})); "
            "print(r.outcome.blocked)",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert host_run.stdout.strip() == "True", host_run.stdout + host_run.stderr

    after = _cli(command, env=env)
    lines = [line for line in after.stdout.splitlines() if "event loop" in line]
    assert lines, after.stdout + after.stderr
    assert "before_tool_call" in lines[0] and "thread=True" in lines[0]
    if command == "doctor":
        assert "sleepy-plugin" in lines[0]


def test_blocking_sync_handler_with_thread_true_keeps_the_loop_free() -> None:
    host = make_host()
    ticks: list[int] = []

    def blocking(event: Any) -> None:
        time.sleep(OVERRUN_S)

    host.register(on("after_tool_call", blocking, thread=True, timeout_ms=60_000), "threaded")

    async def ticker() -> None:
        while True:
            ticks.append(1)
            await asyncio.sleep(0)

    async def main() -> Any:
        task = asyncio.create_task(ticker())
        result = await host.dispatch("after_tool_call", {"tool_name": "exec"})
        task.cancel()
        return result

    result = run(main())

    assert status_of(result, "threaded") is HandlerStatus.OK
    assert len(ticks) > 1  # the loop kept running while the handler slept in its thread


# -- SystemExit / GeneratorExit are handler failures (item 7) ----------------------------


def _raiser(exc: BaseException, *, is_async: bool = False, suspend: bool = False) -> Any:
    if is_async:

        async def raising_async(event: Any) -> None:
            if suspend:
                await asyncio.sleep(0)
            raise exc

        return raising_async

    def raising(event: Any) -> None:
        raise exc

    return raising


EXITS = [
    pytest.param(lambda: SystemExit(3), id="SystemExit"),
    pytest.param(lambda: GeneratorExit(), id="GeneratorExit"),
]
STYLES = [
    pytest.param({}, id="sync"),
    pytest.param({"is_async": True}, id="async"),
    pytest.param({"is_async": True, "suspend": True}, id="async-after-suspending"),
]


@pytest.mark.parametrize("make_exc", EXITS)
@pytest.mark.parametrize("style", STYLES)
def test_handler_exit_is_a_failure_that_blocks_the_tool_call(make_exc: Any, style: Any) -> None:
    host = make_host()
    ran: list[str] = []
    host.register(on("before_tool_call", _raiser(make_exc(), **style), priority=5), "quitter")
    host.register(on("before_tool_call", lambda event: ran.append("lower")), "lower")

    result = dispatch(host, "before_tool_call", TOOL_EVENT)

    assert statuses(result) == [
        ("quitter", HandlerStatus.ERROR),
        ("lower", HandlerStatus.SKIPPED),
    ]
    assert result.outcome.blocked is True
    assert result.outcome.blocked_by == "quitter"
    assert ran == []


@pytest.mark.parametrize("make_exc", EXITS)
@pytest.mark.parametrize("style", STYLES)
def test_handler_exit_on_an_observation_hook_is_logged_and_the_others_run(
    make_exc: Any, style: Any, agentplug_logs: pytest.LogCaptureFixture
) -> None:
    host = make_host()
    ran: list[str] = []
    host.register(on("after_tool_call", _raiser(make_exc(), **style), priority=5), "quitter")
    host.register(on("after_tool_call", lambda event: ran.append("next")), "next")

    result = dispatch(host, "after_tool_call", {"tool_name": "exec"})

    assert statuses(result) == [("quitter", HandlerStatus.ERROR), ("next", HandlerStatus.OK)]
    assert ran == ["next"]
    assert any("quitter" in m and "after_tool_call" in m for m in _warnings(agentplug_logs))


@pytest.mark.parametrize("make_exc", EXITS)
def test_handler_exit_on_a_sync_hook_is_a_failed_handler(make_exc: Any) -> None:
    host = make_host()
    host.register(on("tool_result_persist", _raiser(make_exc())), "quitter")

    result = host.call_sync("tool_result_persist", {"tool_name": "exec", "message": {"a": 1}})

    assert status_of(result, "quitter") is HandlerStatus.ERROR


@pytest.mark.parametrize("make_exc", EXITS)
def test_handler_exit_in_a_thread_is_a_failed_handler(make_exc: Any) -> None:
    host = make_host()
    host.register(on("before_tool_call", _raiser(make_exc()), thread=True), "quitter")

    result = dispatch(host, "before_tool_call", TOOL_EVENT)

    assert status_of(result, "quitter") is HandlerStatus.ERROR
    assert result.outcome.blocked is True


@pytest.mark.parametrize("make_exc", EXITS)
def test_handler_exit_through_the_sync_facade_leaves_the_host_usable(make_exc: Any) -> None:
    host = make_host()
    host.register(on("before_tool_call", _raiser(make_exc(), is_async=True, suspend=True)), "q")

    first = host.sync.hooks.before_tool_call(TOOL_EVENT)
    second = host.sync.hooks.before_tool_call(TOOL_EVENT)
    host.sync.close()

    assert first.outcome.blocked is True
    assert second.outcome.blocked is True


def test_handler_exit_is_logged_with_the_plugin_id(
    agentplug_logs: pytest.LogCaptureFixture,
) -> None:
    class Quitter:
        @hookimpl
        def before_tool_call(self, event: Any) -> None:
            raise SystemExit(7)

    host = make_host()
    host.register(Quitter(), "quitter-plugin")

    dispatch(host, "before_tool_call", TOOL_EVENT)

    assert any("quitter-plugin" in m and "SystemExit" in m for m in _warnings(agentplug_logs)), (
        _warnings(agentplug_logs)
    )


@pytest.mark.parametrize("style", STYLES)
def test_keyboard_interrupt_from_a_handler_propagates(style: Any) -> None:
    host = make_host()
    host.register(on("before_tool_call", _raiser(KeyboardInterrupt(), **style)), "ctrl-c")

    with pytest.raises(KeyboardInterrupt):
        dispatch(host, "before_tool_call", TOOL_EVENT)


def test_keyboard_interrupt_from_an_observation_handler_propagates() -> None:
    host = make_host()
    host.register(on("after_tool_call", _raiser(KeyboardInterrupt())), "ctrl-c")

    with pytest.raises(KeyboardInterrupt):
        dispatch(host, "after_tool_call", {"tool_name": "exec"})
