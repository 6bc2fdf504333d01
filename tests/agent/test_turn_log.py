"""``gateway.turns``: the latest turns of a gateway with their traces (issue 31)."""

from __future__ import annotations

import json
from typing import Any

from agentplug import Gateway
from agentplug.agent import ScriptedProvider, TurnLog

from tests.agent.conftest import make_runner, on, run


def test_a_turn_is_listed_as_running_while_it_runs_and_as_its_summary_after() -> None:
    seen: list[dict[str, Any]] = []
    holder: dict[str, TurnLog] = {}

    def during(event: Any) -> None:
        seen.extend(holder["log"].recent())

    runner, _ = make_runner(["hi"], plugins={"peek": on("before_agent_run", during)})
    holder["log"] = runner.turn_log
    result = run(runner.handle_inbound({"content": "hello"}, run_id="run-fixed"))
    assert [(r["run_id"], r["status"]) for r in seen] == [("run-fixed", "running")]
    (row,) = runner.turn_log.recent()
    assert (row["run_id"], row["status"], row["success"]) == ("run-fixed", "replied", True)
    assert row["trace"] == result.trace and row["duration_ms"] > 0


def test_every_runner_of_a_gateway_records_in_the_gateway_log() -> None:
    gateway = Gateway({})
    other = gateway.runner_for(ScriptedProvider(["b"]), config={"tools": {"actions": False}})
    run(other.run_turn("x", session_key="s2"))
    assert gateway.runner.turn_log is gateway.turns
    assert [r["session_key"] for r in gateway.turns.recent()] == ["s2"]


def test_the_log_keeps_the_latest_finished_turns_only() -> None:
    runner, _ = make_runner(["a", "b", "c", "d"])
    runner.turn_log.keep = 2
    for index in range(4):
        run(runner.run_turn("x", session_key=f"s{index}"))
    assert [r["session_key"] for r in runner.turn_log.recent()] == ["s3", "s2"]


def test_a_row_holds_neither_the_transcript_nor_the_reply() -> None:
    runner, _ = make_runner(["SECRET-REPLY-TEXT"])
    run(runner.handle_inbound({"content": "USER-TEXT"}))
    text = json.dumps(runner.turn_log.recent())
    assert "SECRET-REPLY-TEXT" not in text and "USER-TEXT" not in text


def test_listeners_hear_each_start_and_end_and_a_failing_one_fails_nothing() -> None:
    heard: list[tuple[str, str]] = []

    def broken(kind: str, row: dict[str, Any]) -> None:
        raise RuntimeError("listener bug")

    runner, _ = make_runner(["hi"])
    runner.turn_log.subscribe(broken)
    stop = runner.turn_log.subscribe(lambda kind, row: heard.append((kind, row["status"])))
    result = run(runner.run_turn("x", session_key="s1"))
    assert result.status == "replied"
    assert heard == [("turn_started", "running"), ("turn_ended", "replied")]
    stop()
    run(runner.run_turn("y", session_key="s1"))
    assert len(heard) == 2


def test_a_claimed_message_is_recorded_under_an_id_of_its_own() -> None:
    def claim(event: Any) -> dict[str, Any]:
        return {"handled": True, "reply": "claimed"}

    runner, _ = make_runner(["never"], plugins={"claimer": on("inbound_claim", claim)})
    result = run(runner.handle_inbound({"content": "hello"}))
    assert result.status == "claimed" and result.run_id == ""
    (row,) = runner.turn_log.recent()
    assert row["run_id"].startswith("claimed-") and row["status"] == "claimed"


def test_a_trace_past_the_bound_is_cut_and_marked() -> None:
    from agentplug.agent import turnlog

    runner, _ = make_runner(["hi"])
    limit = turnlog.MAX_TRACE_ENTRIES
    try:
        turnlog.MAX_TRACE_ENTRIES = 3
        run(runner.run_turn("x", session_key="s1"))
        (row,) = runner.turn_log.recent()  # the trace is cut when the row is first read
    finally:
        turnlog.MAX_TRACE_ENTRIES = limit
    assert len(row["trace"]) == 3 and row["trace_truncated"] is True


def test_the_log_keeps_the_latest_finished_turns_and_every_running_one() -> None:
    from agentplug.agent.turnlog import TurnLog

    runner, _ = make_runner(["a", "b", "c", "d"])
    log = TurnLog(keep=2)
    runner.turn_log = log
    log.started("still-running", "s0")
    for index in range(4):
        run(runner.run_turn(f"turn {index}", session_key=f"s{index + 1}"))
    rows = log.recent(10)
    assert [r["session_key"] for r in rows] == ["s4", "s3", "s0"]
    assert rows[-1]["status"] == "running"
    assert all(r["trace"] for r in rows[:2])  # built on this read, for the kept ones
