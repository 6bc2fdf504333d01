"""MESSAGE, SHELL_COMMAND and LOG_LEVEL, driven end to end through the host's action flow."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from agentplug import PluginHost
from agentplug.actions.builtins.comms import (
    LOG_LEVELS_SERVICE,
    OUTPUT_HUB_SERVICE,
    TRACE,
    OutputChunk,
    OutputHub,
    RoomLogLevels,
    room_logger,
)
from agentplug.actions.flow import FlowResult
from agentplug.actions.model import Message
from agentplug.actions.terminal import TerminalResult
from agentplug.core.errors import ConfigError


def make_host(actions: dict[str, Any] | None = None) -> PluginHost:
    return PluginHost({"actions": actions or {}})


async def run(host: PluginHost, message: Message | str) -> FlowResult:
    await host.gateway.actions.load()
    flow: FlowResult = await host.gateway.actions.run(message)
    return flow


def result_of(flow: FlowResult) -> Any:
    assert flow.result is not None, flow.outcome
    return flow.result


# ---------------------------------------------------------------------------
# MESSAGE


class FakeTelegram:
    def __init__(self) -> None:
        self.sent: list[tuple[str, str, str]] = []

    async def send_to_user(self, user_id: str, text: str) -> None:
        self.sent.append(("user", user_id, text))

    async def send_to_room(self, room_id: str, text: str) -> None:
        self.sent.append(("room", room_id, text))


class UserOnly:
    async def send_to_user(self, user_id: str, text: str) -> None:
        return None


class Broken:
    async def send_to_user(self, user_id: str, text: str) -> None:
        raise ConnectionError("telegram API is down")

    async def send_to_room(self, room_id: str, text: str) -> None:
        raise ConnectionError("telegram API is down")


def message_flow(service: object | None, payload: str, name: str = "telegram") -> FlowResult:
    host = make_host()
    if service is not None:
        host.gateway.actions.register_service(name, service)
    return asyncio.run(run(host, f"MESSAGE {payload}"))


def test_message_to_a_room_and_a_user_goes_through_the_named_service() -> None:
    telegram = FakeTelegram()
    host = make_host()
    host.gateway.actions.register_service("telegram", telegram)

    async def go() -> tuple[FlowResult, FlowResult]:
        await host.gateway.actions.load()
        room = await host.gateway.actions.run(
            'MESSAGE {"text": "deploy done", "targetType": "room", "source": "telegram", '
            '"target": "-100123"}'
        )
        user = await host.gateway.actions.run(
            "MESSAGE text='hi there' targetType=user source=telegram target=42"
        )
        return room, user

    room, user = asyncio.run(go())
    assert room.ok and user.ok
    assert telegram.sent == [("room", "-100123", "deploy done"), ("user", "42", "hi there")]
    assert result_of(room).data == {"source": "telegram", "targetType": "room", "target": "-100123"}
    assert "room -100123 on telegram" in result_of(room).text


def test_message_to_an_unknown_service_fails_clearly() -> None:
    flow = message_flow(
        None, '{"text": "x", "targetType": "user", "source": "signal", "target": "1"}'
    )
    result = result_of(flow)
    assert not result.success
    assert "No messaging service named 'signal'" in result.text
    assert result.data["reason"] == "unknown_service"


def test_message_with_an_unknown_target_type_fails_before_sending() -> None:
    telegram = FakeTelegram()
    flow = message_flow(
        telegram, '{"text": "x", "targetType": "channel", "source": "telegram", "target": "1"}'
    )
    result = result_of(flow)
    assert not result.success
    assert "targetType" in result.text and "'user', 'room'" in result.text
    assert telegram.sent == []


def test_message_to_a_target_type_the_service_cannot_reach_fails() -> None:
    flow = message_flow(
        UserOnly(), '{"text": "x", "targetType": "room", "source": "telegram", "target": "1"}'
    )
    result = result_of(flow)
    assert not result.success
    assert result.data["reason"] == "unsupported_target_type"
    assert "send_to_room" in result.text


def test_message_send_failure_is_a_failed_result() -> None:
    flow = message_flow(
        Broken(), '{"text": "x", "targetType": "user", "source": "telegram", "target": "7"}'
    )
    result = result_of(flow)
    assert not result.success
    assert result.data["reason"] == "send_failed"
    assert "telegram API is down" in result.text


def test_message_without_text_names_the_missing_parameter() -> None:
    flow = message_flow(
        FakeTelegram(), '{"targetType": "user", "source": "telegram", "target": "7"}'
    )
    result = result_of(flow)
    assert not result.success
    assert "Missing required parameter: text" in result.text


# ---------------------------------------------------------------------------
# SHELL_COMMAND


def test_shell_command_runs_in_the_configured_directory_and_streams_output(tmp_path: Path) -> None:
    host = make_host({"shell": {"enabled": True, "cwd": str(tmp_path)}})
    run_id = "run-" + uuid.uuid4().hex[:8]

    async def go() -> tuple[FlowResult, list[OutputChunk]]:
        await host.gateway.actions.load()
        hub = host.gateway.actions.get_service(OUTPUT_HUB_SERVICE)
        assert isinstance(hub, OutputHub)
        stream = hub.subscribe(run_id)  # subscribed before the run starts
        collected: list[OutputChunk] = []

        async def consume() -> None:
            async for chunk in stream:
                collected.append(chunk)

        consumer = asyncio.create_task(consume())
        flow = await host.gateway.actions.run(
            f'SHELL_COMMAND {{"command": "pwd; echo to-stderr >&2; exit 3", "runId": "{run_id}"}}'
        )
        await consumer  # ends because the run finished
        return flow, collected

    flow, chunks = asyncio.run(go())
    result = result_of(flow)
    assert not result.success  # non-zero exit
    assert result.data["exit_code"] == 3
    assert result.data["run_id"] == run_id
    assert str(tmp_path.resolve()) in result.data["output"]
    assert "to-stderr" in result.data["output"]
    assert result.text.startswith("Exit code 3.")
    assert "".join(c.text for c in chunks) == result.data["output"]
    assert [c.seq for c in chunks] == list(range(len(chunks)))
    status = host.gateway.actions.get_service(OUTPUT_HUB_SERVICE).status(run_id)
    assert status.finished and status.exit_code == 3


def test_shell_command_success_and_late_subscriber_gets_the_backlog(tmp_path: Path) -> None:
    host = make_host({"shell": {"enabled": True, "cwd": str(tmp_path)}})

    async def go() -> tuple[FlowResult, str]:
        flow = await run(host, 'SHELL_COMMAND {"command": "echo hello"}')
        hub = host.gateway.actions.get_service(OUTPUT_HUB_SERVICE)
        text = "".join([c.text async for c in hub.subscribe(result_of(flow).data["run_id"])])
        return flow, text

    flow, replayed = asyncio.run(go())
    assert flow.ok
    assert result_of(flow).data["exit_code"] == 0
    assert replayed == "hello\n"


def test_shell_command_output_is_bounded(tmp_path: Path) -> None:
    host = make_host({"shell": {"enabled": True, "cwd": str(tmp_path), "maxOutputBytes": 16}})
    flow = asyncio.run(run(host, 'SHELL_COMMAND {"command": "printf \'%0200d\' 0"}'))
    result = result_of(flow)
    assert result.data["truncated"] is True
    assert len(result.data["output"]) <= 16
    assert "truncated" in result.text


def test_shell_command_is_disabled_unless_the_operator_enables_it(tmp_path: Path) -> None:
    host = make_host({"shell": {"cwd": str(tmp_path)}})
    result = result_of(asyncio.run(run(host, 'SHELL_COMMAND {"command": "touch created"}')))
    assert not result.success
    assert not (tmp_path / "created").exists()
    assert "actions.shell.enabled = true" in result.text


def test_shell_command_refused_when_disabled(tmp_path: Path) -> None:
    host = make_host({"shell": {"enabled": False, "cwd": str(tmp_path)}})
    flow = asyncio.run(run(host, 'SHELL_COMMAND {"command": "touch ran"}'))
    result = result_of(flow)
    assert not result.success
    assert result.data["reason"] == "disabled"
    assert "actions.shell.enabled" in result.text
    assert not (tmp_path / "ran").exists()


def test_shell_command_uses_the_hosts_terminal_service() -> None:
    calls: list[dict[str, Any]] = []

    class FakeTerminal:
        async def run(
            self,
            command: str,
            *,
            cwd: str | None,
            timeout_s: float,
            max_output_bytes: int,
            on_output: Callable[[str], None] | None = None,
        ) -> TerminalResult:
            calls.append({"command": command, "timeout_s": timeout_s, "max": max_output_bytes})
            assert on_output is not None
            on_output("part one, ")
            on_output("part two")
            return TerminalResult(exit_code=0, output="part one, part two")

    host = make_host({"shell": {"enabled": True, "timeoutSeconds": 7, "maxOutputBytes": 1000}})
    host.gateway.actions.register_service("terminal", FakeTerminal())

    async def go() -> tuple[FlowResult, list[str]]:
        flow = await run(host, 'SHELL_COMMAND {"command": "deploy --now"}')
        hub = host.gateway.actions.get_service(OUTPUT_HUB_SERVICE)
        texts = [c.text async for c in hub.subscribe(result_of(flow).data["run_id"])]
        return flow, texts

    flow, texts = asyncio.run(go())
    assert flow.ok
    assert calls == [{"command": "deploy --now", "timeout_s": 7.0, "max": 1000}]
    assert texts == ["part one, ", "part two"]


def test_shell_terminal_failure_is_reported_and_the_stream_closed() -> None:
    class Exploding:
        async def run(self, command: str, **kwargs: Any) -> TerminalResult:
            raise RuntimeError("sandbox unavailable")

    host = make_host({"shell": {"enabled": True}})
    host.gateway.actions.register_service("terminal", Exploding())
    flow = asyncio.run(run(host, 'SHELL_COMMAND {"command": "ls"}'))
    result = result_of(flow)
    assert not result.success and "sandbox unavailable" in result.text
    status = host.gateway.actions.get_service(OUTPUT_HUB_SERVICE).status(result.data["run_id"])
    assert status.finished and status.error == "sandbox unavailable"


def test_invalid_shell_settings_name_the_key() -> None:
    host = make_host({"shell": {"enabled": True, "timeoutSeconds": -1, "bogus": 1}})
    with pytest.raises(ConfigError) as info:
        asyncio.run(host.gateway.actions.load())
    keys = [key for key, _ in info.value.issues]
    assert "actions.shell.timeoutSeconds" in keys
    assert "actions.shell.bogus" in keys


def test_output_hub_bounds_backlog_and_forgets_old_runs() -> None:
    hub = OutputHub(max_backlog_bytes=10, max_runs=2)

    async def go() -> list[str]:
        hub.start("a")
        for piece in ("aaaa", "bbbb", "cccc"):
            hub.publish("a", piece)
        hub.finish("a", 0)
        return [c.text async for c in hub.subscribe("a")]

    assert asyncio.run(go()) == ["bbbb", "cccc"]  # oldest chunk dropped at 10 bytes
    hub.start("b")
    hub.start("c")
    assert hub.status("a") is None  # finished runs are forgotten first
    assert {s.run_id for s in hub.runs()} == {"b", "c"}
    with pytest.raises(ValueError):
        hub.start("b")
    with pytest.raises(ValueError):
        hub.subscribe("bad id with spaces")


# ---------------------------------------------------------------------------
# LOG_LEVEL


class Capture(logging.Handler):
    def __init__(self) -> None:
        super().__init__(level=logging.NOTSET)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def messages(self) -> list[str]:
        return [r.getMessage() for r in self.records]


def isolated_logger() -> tuple[logging.Logger, Capture]:
    logger = logging.getLogger(f"agentplug_test_rooms.{uuid.uuid4().hex[:8]}")
    logger.setLevel(logging.INFO)
    logger.propagate = False
    capture = Capture()
    logger.addHandler(capture)
    return logger, capture


def in_room(room: str, text: str) -> Message:
    return Message(text=text, room_id=room)


def test_log_level_changes_only_the_current_room() -> None:
    logger, capture = isolated_logger()
    levels = RoomLogLevels(logger.name)
    host = make_host()
    host.gateway.actions.register_service(LOG_LEVELS_SERVICE, levels)

    async def go() -> list[FlowResult]:
        await host.gateway.actions.load()
        first = await host.gateway.actions.run(in_room("room-a", 'LOG_LEVEL {"level": "debug"}'))
        return [first]

    (flow,) = asyncio.run(go())
    assert flow.ok
    assert result_of(flow).data == {"room_id": "room-a", "level": "debug", "levelno": 10}
    assert levels.get("room-a") == logging.DEBUG
    assert levels.get("room-b") is None  # the other room is untouched

    a, b = room_logger(logger, "room-a"), room_logger(logger, "room-b")
    a.debug("a-debug")
    b.debug("b-debug")
    b.info("b-info")
    logger.debug("no-room-debug")
    logger.info("no-room-info")
    assert capture.messages() == ["a-debug", "b-info", "no-room-info"]

    capture.records.clear()
    flow = asyncio.run(host.gateway.actions.run(in_room("room-b", "LOG_LEVEL level=error")))
    assert flow.ok
    a.debug("a-debug-2")
    b.warning("b-warning")
    b.error("b-error")
    assert capture.messages() == ["a-debug-2", "b-error"]
    assert levels.get("room-a") == logging.DEBUG

    # reset: room A follows the logger again, and the logger is restored.
    capture.records.clear()
    flow = asyncio.run(host.gateway.actions.run(in_room("room-a", "LOG_LEVEL level=reset")))
    assert flow.ok and levels.get("room-a") is None
    assert logger.level == logging.INFO
    a.debug("a-debug-3")
    a.info("a-info-3")
    assert capture.messages() == ["a-info-3"]
    levels.detach()


def test_trace_level_is_registered_and_applies_per_room() -> None:
    assert logging.getLevelName(TRACE) == "TRACE" and TRACE == 5
    logger, capture = isolated_logger()
    levels = RoomLogLevels(logger.name)
    host = make_host()
    host.gateway.actions.register_service(LOG_LEVELS_SERVICE, levels)
    flow = asyncio.run(run(host, in_room("r1", "LOG_LEVEL level=TRACE")))
    assert flow.ok and levels.get("r1") == TRACE
    room_logger(logger, "r1").log(TRACE, "r1-trace")
    room_logger(logger, "r2").log(TRACE, "r2-trace")
    room_logger(logger, "r2").debug("r2-debug")
    assert capture.messages() == ["r1-trace"]
    levels.detach()
    assert capture.filters == [] and logger.level == logging.INFO


def test_log_level_failures() -> None:
    host = make_host()

    async def go() -> list[FlowResult]:
        await host.gateway.actions.load()
        return [
            await host.gateway.actions.run("LOG_LEVEL level=debug"),  # no room
            await host.gateway.actions.run(in_room("r", "LOG_LEVEL level=verbose")),
            await host.gateway.actions.run(in_room("r", "LOG_LEVEL")),
        ]

    no_room, unknown, missing = (result_of(f) for f in asyncio.run(go()))
    assert not no_room.success and no_room.data["reason"] == "no_room"
    assert not unknown.success and "trace, debug, info, warn, error" in unknown.text
    assert not missing.success and "Missing required parameter: level" in missing.text
    levels = host.gateway.actions.get_service(LOG_LEVELS_SERVICE)
    assert isinstance(levels, RoomLogLevels) and levels.rooms() == {}


def test_shell_command_with_a_missing_working_directory_fails_clearly(tmp_path: Path) -> None:
    host = make_host({"shell": {"enabled": True, "cwd": str(tmp_path / "nope")}})
    result = result_of(asyncio.run(run(host, 'SHELL_COMMAND {"command": "true"}')))
    assert not result.success
    assert result.data["reason"] == "no_working_directory"
    assert "actions.shell.cwd" in result.text
