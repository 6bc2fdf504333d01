"""Approvals across gateways: pending in the store, decided exactly once from any process.

Real subprocesses on one SQLite file (and on PostgreSQL when the ``postgres_url`` fixture
exists): a gateway asks, ``agentplug approvals resolve`` in another process decides.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from agentplug.services.approvals import ApprovalBroker, PendingApproval
from agentplug.services.approvals.models import iso_time
from agentplug.services.approvals.shared import (
    AUDIT_NAMESPACE,
    DECISIONS_NAMESPACE,
    PENDING_NAMESPACE,
    list_pending,
    publish_pending,
    resolve_pending,
    stored_decision,
)
from agentplug.store import SQLiteStore, StateStoreUnavailable, open_store_url
from agentplug_hookspecs.tools import ApprovalRequest

from tests.services.approval_processes import (
    gateway,
    pending_id,
    printed,
    shared_store_url,
    start_together,
)

WAKE_BOUND_S = 2.0
"""Generous bound on the wake-up after a decision (the issue asks 100 ms; a loaded 2-core
CI machine gets 20x margin; the measured value is printed with ``-s``)."""


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return shared_store_url(request, tmp_path)


_CLI = [sys.executable, "-m", "agentplug.cli.approvals"]


def _cli(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*_CLI, *args, "--state-url", url],
        capture_output=True,
        text=True,
        timeout=60,
    )


def _decision_at(url: str, approval_id: str) -> float:
    store = open_store_url(url)
    try:
        row = store.get(DECISIONS_NAMESPACE, approval_id)
        assert isinstance(row, dict)
        return float(row["at"])
    finally:
        store.close()


@pytest.fixture
def asking(store_url: str) -> Iterator[tuple[str, subprocess.Popen[str], str]]:
    proc = gateway("ask", store_url, "60000")
    try:
        yield store_url, proc, pending_id(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_an_approval_asked_on_one_gateway_is_listed_by_the_cli_of_another_process(
    asking: tuple[str, subprocess.Popen[str], str],
) -> None:
    url, _, approval_id = asking
    listed = _cli(url, "pending", "--json")
    assert listed.returncode == 0, listed.stderr
    assert [row["id"] for row in json.loads(listed.stdout)] == [approval_id]


def test_an_allow_from_another_process_wakes_the_waiting_turn_and_the_call_runs(
    asking: tuple[str, subprocess.Popen[str], str],
) -> None:
    url, proc, approval_id = asking
    done = _cli(url, "resolve", approval_id, "allow-once")
    assert done.returncode == 0, done.stderr
    result = printed(proc)
    latency = result["woke_at"] - _decision_at(url, approval_id)
    print(f"\ncross-process approval wake latency: {latency * 1000:.1f} ms")
    assert result["allowed"] is True
    assert result["resolution"] == "allow-once"
    assert latency < WAKE_BOUND_S


def test_a_deny_from_another_process_blocks_the_waiting_call(
    asking: tuple[str, subprocess.Popen[str], str],
) -> None:
    url, proc, approval_id = asking
    assert _cli(url, "resolve", approval_id, "deny").returncode == 0
    result = printed(proc)
    assert (result["allowed"], result["resolution"]) == (False, "deny")


def test_a_decision_from_the_cli_is_recorded_as_cli(
    asking: tuple[str, subprocess.Popen[str], str],
) -> None:
    url, proc, approval_id = asking
    assert _cli(url, "resolve", approval_id, "deny").returncode == 0
    printed(proc)
    store = open_store_url(url)
    try:
        row = stored_decision(store, approval_id)
        audit = [e for e in store.peek(AUDIT_NAMESPACE, "audit") if e["approval_id"] == approval_id]
    finally:
        store.close()
    assert row is not None and row["by"] == "cli"
    assert [e["by"] for e in audit] == ["cli"]


def test_allow_always_from_another_process_saves_the_durable_grant(
    asking: tuple[str, subprocess.Popen[str], str],
) -> None:
    url, proc, approval_id = asking
    assert _cli(url, "resolve", approval_id, "allow-always").returncode == 0
    assert printed(proc)["allowed"] is True
    store = open_store_url(url)
    try:
        grants = store.items("approvals.grants")
    finally:
        store.close()
    assert [value["approval_id"] for _, value in grants] == [approval_id]


def test_of_racing_deciders_exactly_one_decision_is_recorded(
    asking: tuple[str, subprocess.Popen[str], str],
) -> None:
    url, proc, approval_id = asking
    words = ["allow-once", "deny", "allow-once", "deny"]
    racers = [
        subprocess.Popen(
            [*_CLI, "resolve", approval_id, w, "--state-url", url],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for w in words
    ]
    codes = [r.wait(timeout=60) for r in racers]
    result = printed(proc)
    assert codes.count(0) == 1
    winner = words[codes.index(0)]
    assert result["resolution"] == winner
    store = open_store_url(url)
    try:
        audit = [e for e in store.peek(AUDIT_NAMESPACE, "audit") if e["approval_id"] == approval_id]
    finally:
        store.close()
    assert [e["resolution"] for e in audit] == [winner]


def test_of_n_racing_processes_one_wins_and_every_loser_is_told_who_won_and_when(
    asking: tuple[str, subprocess.Popen[str], str],
) -> None:
    url, proc, approval_id = asking
    words = ["allow-once", "deny"] * 4
    racers = [gateway("race", url, approval_id, w, f"racer-{i}") for i, w in enumerate(words)]
    clis = [
        subprocess.Popen(
            [*_CLI, "resolve", approval_id, w, "--state-url", url],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for w in ("allow-once", "deny")
    ]
    start_together(racers)
    told = [printed(r) for r in racers]
    cli_told = [(c.wait(timeout=60), c.communicate()[1]) for c in clis]
    verdict = printed(proc)
    store = open_store_url(url)
    try:
        row = stored_decision(store, approval_id)
    finally:
        store.close()
    assert row is not None and verdict["resolution"] == row["resolution"]
    winners = [t for t in told if t["ok"]] + [c for c in cli_told if c[0] == 0]
    assert len(winners) == 1, (told, cli_told)
    named = f"({row['resolution']} by {row['by']} at {iso_time(row['at'])})"
    losers = [t["message"] for t in told if not t["ok"]] + [e for code, e in cli_told if code]
    assert len(losers) == len(words) + len(clis) - 1
    assert [m for m in losers if named not in m] == [], named


def test_a_loser_whose_pending_row_vanished_is_told_who_won_and_when(tmp_path: Path) -> None:
    """The race window made certain: another process decides between this resolver's
    look at the decisions and its look at the pending row."""
    url = f"sqlite:///{tmp_path / 'state.sqlite3'}"

    class _DecidedMeanwhile(SQLiteStore):
        """The real SQLite store; the CLI of another process decides right after this
        store's first read of the decision rows."""

        raced = False

        def get(self, namespace: str, key: str) -> Any | None:
            value = super().get(namespace, key)
            if namespace == DECISIONS_NAMESPACE and not self.raced:
                self.raced = True
                assert _cli(url, "resolve", key, "deny").returncode == 0
            return value

    store = _DecidedMeanwhile(tmp_path / "state.sqlite3")
    request = ApprovalRequest(title="Run web search", description="d", plugin_id="p")
    publish_pending(store, PendingApproval("ap1-race", "web_search", {}, request), gateway="g")
    reply = resolve_pending(store, "ap1-race", "allow-once", by="api")
    row = stored_decision(store, "ap1-race")
    store.close()
    assert store.raced and row is not None and row["by"] == "cli"
    assert not reply.ok and reply.status == "decided"
    assert reply.message == (
        f"approval 'ap1-race' was already resolved (deny by cli at {iso_time(row['at'])})"
    )


def test_the_cli_resolving_a_cancelled_runs_approval_is_told_it_was_cancelled_and_when(
    store_url: str,
) -> None:
    asker = gateway("ask-cancel", store_url)
    approval_id = pending_id(asker)
    assert asker.stdin is not None
    asker.stdin.write("cancel\n")
    asker.stdin.flush()
    assert printed(asker)["resolution"] == "cancelled"
    listed = _cli(store_url, "pending", "--json")
    late = _cli(store_url, "resolve", approval_id, "allow-once")
    store = open_store_url(store_url)
    try:
        row = stored_decision(store, approval_id)
    finally:
        store.close()
    assert json.loads(listed.stdout) == []
    assert row is not None and row["resolution"] == "cancelled"
    assert late.returncode != 0
    assert late.stderr.strip() == (
        f"agentplug approvals resolve: approval {approval_id!r} was cancelled at "
        f"{iso_time(row['at'])} (its run was cancelled); the tool call was not run"
    )


def test_a_timeout_fires_exactly_once_with_three_gateways_up(store_url: str) -> None:
    sweepers = [gateway("sweep", store_url, "4") for _ in range(2)]
    asker = gateway("ask", store_url, "1000")
    approval_id = pending_id(asker)
    result = printed(asker)
    fired = [printed(s)["fired"] for s in sweepers]
    store = open_store_url(store_url)
    try:
        audit = [e for e in store.peek(AUDIT_NAMESPACE, "audit") if e["approval_id"] == approval_id]
    finally:
        store.close()
    assert (result["allowed"], result["resolution"]) == (False, "timeout")
    assert [e["resolution"] for e in audit] == ["timeout"]
    assert sum(fired) in (0, 1)  # the asker itself or exactly one sweeper recorded it


def test_a_decision_after_the_timeout_is_refused_with_a_clear_message(store_url: str) -> None:
    asker = gateway("ask", store_url, "300")
    approval_id = pending_id(asker)
    assert printed(asker)["resolution"] == "timeout"
    late = _cli(store_url, "resolve", approval_id, "allow-once")
    assert late.returncode != 0
    assert f"approval {approval_id!r} already timed out at " in late.stderr
    assert late.stderr.strip().endswith("the tool call was blocked")


def test_an_expired_pending_row_is_refused_even_before_its_gateway_records_the_timeout(
    tmp_path: Path,
) -> None:
    store = SQLiteStore(tmp_path / "state.sqlite3")
    store.put(
        "approvals.pending",
        "ap1-dead",
        {"id": "ap1-dead", "title": "t", "allowed_decisions": ["allow-once"], "expires_at": 1.0},
    )
    reply = resolve_pending(store, "ap1-dead", "allow-once")
    assert not reply.ok
    assert "already timed out" in reply.message
    assert list_pending(store) == []


class _FailingStore(SQLiteStore):
    """The real SQLite store, made unreachable on demand (only for the fail-closed rule)."""

    down = False

    def get(self, namespace: str, key: str) -> Any | None:
        if self.down:
            raise StateStoreUnavailable("state store sqlite: unreachable (test)")
        return super().get(namespace, key)

    def wait_change(self, channel: str, seen: int, timeout_s: float) -> int:
        if self.down:
            raise StateStoreUnavailable("state store sqlite: unreachable (test)")
        return super().wait_change(channel, seen, timeout_s)


def test_a_store_outage_while_an_approval_is_pending_blocks_the_call(tmp_path: Path) -> None:
    store = _FailingStore(tmp_path / "state.sqlite3")
    broker = ApprovalBroker(None, store=store, shared=True)
    request = ApprovalRequest(title="Run web search", description="d", timeout_ms=30_000)

    async def main() -> Any:
        asked = asyncio.ensure_future(broker.request("web_search", {}, request))
        while not list_pending(store):
            await asyncio.sleep(0.01)
        store.down = True
        return await asked

    verdict = asyncio.run(main())
    assert verdict.allowed is False
    assert "state store is unavailable" in verdict.reason


def test_a_shared_broker_without_a_local_resolver_waits_for_a_store_decision(
    tmp_path: Path,
) -> None:
    store = SQLiteStore(tmp_path / "state.sqlite3")
    broker = ApprovalBroker(None, store=store, shared=True)
    request = ApprovalRequest(title="Run web search", description="d", timeout_ms=30_000)
    seen: list[PendingApproval] = []

    async def main() -> Any:
        asked = asyncio.ensure_future(broker.request("web_search", {}, request))
        while not list_pending(store):
            await asyncio.sleep(0.01)
        seen.extend(broker.pending)
        assert resolve_pending(store, seen[0].id, "allow-once").ok
        return await asked

    verdict = asyncio.run(main())
    assert (verdict.allowed, verdict.resolution) == (True, "allow-once")


def test_a_dead_gateways_expired_approval_times_out_when_another_gateway_asks(
    tmp_path: Path,
) -> None:
    from agentplug.services.approvals import ScriptedResolver

    store = SQLiteStore(tmp_path / "state.sqlite3")
    # Published by a gateway that was SIGKILLed: nobody is left to time it out.
    store.put(
        PENDING_NAMESPACE,
        "dead-1",
        {"id": "dead-1", "title": "t", "created_at": 1.0, "expires_at": 2.0, "gateway": "gone"},
    )
    broker = ApprovalBroker(ScriptedResolver(["allow-once"]), store=store, shared=True)
    request = ApprovalRequest(title="run it", description="d", plugin_id="p")
    verdict = asyncio.run(broker.request("exec", {}, request))
    assert verdict.allowed
    assert [r["id"] for r in list_pending(store)] == []
    decision = stored_decision(store, "dead-1")
    assert decision is not None and decision["resolution"] == "timeout"
    store.close()
