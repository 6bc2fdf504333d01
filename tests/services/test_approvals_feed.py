"""What an approvals inbox shows, and the channel that says when it changed (issue 31)."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

from agentplug.services.approvals import ApprovalBroker, ProgrammaticResolver
from agentplug.services.approvals.feed import approvals_snapshot, feed_version
from agentplug.services.approvals.shared import FEED_CHANNEL
from agentplug.store import SQLiteStore
from agentplug_hookspecs.tools import ApprovalRequest

REQUEST = ApprovalRequest(
    title="Run web search",
    description="Allow search query: cats",
    severity="warning",
    plugin_id="tool-preflight",
    timeout_ms=30_000,
)


async def _ask_and_answer(
    asking: ApprovalBroker, answering: ApprovalBroker, decision: str
) -> tuple[dict[str, Any], dict[str, Any], Any]:
    """Ask on ``asking``; once the approval shows in ``answering``'s snapshot, take that
    snapshot, decide it there, and return (snapshot while pending, after, verdict)."""
    task = asyncio.ensure_future(
        asking.request("web_search", {"query": "cats"}, REQUEST, run_id="run-1")
    )
    while not (during := approvals_snapshot(answering))["pending"]:
        await asyncio.sleep(0.01)
    resolver = answering.resolver
    assert isinstance(resolver, ProgrammaticResolver)
    reply = resolver.resolve(during["pending"][0]["id"], decision, by="api")
    assert reply.ok, reply.message
    verdict = await task
    return during, approvals_snapshot(answering), verdict


def test_a_pending_approval_shows_what_the_plugin_asked_and_the_call_s_parameters() -> None:
    broker = ApprovalBroker(ProgrammaticResolver())
    during, _, _ = asyncio.run(_ask_and_answer(broker, broker, "allow-once"))
    (row,) = during["pending"]
    assert (row["title"], row["description"], row["severity"]) == (
        "Run web search",
        "Allow search query: cats",
        "warning",
    )
    assert row["params"] == {"query": "cats"} and row["plugin_id"] == "tool-preflight"
    assert row["run_id"] == "run-1" and row["expires_at"] > row["created_at"]
    assert row["allowed_decisions"] == ["allow-once", "allow-always", "deny"]


def test_a_decided_approval_moves_to_the_history_with_who_decided_and_when() -> None:
    broker = ApprovalBroker(ProgrammaticResolver())
    _, after, verdict = asyncio.run(_ask_and_answer(broker, broker, "deny"))
    assert not verdict.allowed and after["pending"] == []
    (row,) = after["history"]
    assert (row["title"], row["resolution"], row["by"]) == ("Run web search", "deny", "api")
    assert row["at"] is not None


def test_an_approval_pending_on_another_gateway_is_in_this_one_s_snapshot(
    tmp_path: Path,
) -> None:
    path = tmp_path / "state.sqlite3"
    asking = ApprovalBroker(None, store=SQLiteStore(path), shared=True)
    answering = ApprovalBroker(ProgrammaticResolver(), store=SQLiteStore(path), shared=True)
    during, after, verdict = asyncio.run(_ask_and_answer(asking, answering, "allow-once"))
    assert verdict.allowed and during["shared"] is True
    assert during["pending"][0]["gateway"] == asking.gateway
    (row,) = after["history"]
    assert (row["title"], row["tool_name"], row["resolution"], row["by"]) == (
        "Run web search",
        "web_search",
        "allow-once",
        "api",
    )
    assert approvals_snapshot(asking)["history"] == after["history"]


def test_a_timed_out_approval_is_in_the_history_as_a_timeout(tmp_path: Path) -> None:
    broker = ApprovalBroker(None, store=SQLiteStore(tmp_path / "s.sqlite3"), shared=True)
    quick = REQUEST.model_copy(update={"timeout_ms": 1})
    verdict = asyncio.run(broker.request("web_search", {}, quick))
    assert verdict.resolution == "timeout"
    (row,) = approvals_snapshot(broker)["history"]
    assert row["resolution"] == "timeout" and row["by"] == broker.gateway


def test_the_history_is_bounded_newest_first() -> None:
    broker = ApprovalBroker(ProgrammaticResolver())

    async def three() -> None:
        for decision in ("deny", "allow-once", "deny"):
            await _ask_and_answer(broker, broker, decision)

    asyncio.run(three())
    rows = approvals_snapshot(broker, history=2)["history"]
    assert [r["resolution"] for r in rows] == ["deny", "allow-once"]


def test_publishing_an_approval_wakes_a_watcher_of_the_feed_channel(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite3"
    watcher_store = SQLiteStore(path)
    broker = ApprovalBroker(ProgrammaticResolver(), store=SQLiteStore(path), shared=True)
    seen = feed_version(broker)
    woke: list[int] = []
    watcher = threading.Thread(
        target=lambda: woke.append(watcher_store.wait_change(FEED_CHANNEL, seen, 60.0))
    )
    watcher.start()

    async def ask() -> None:
        task = asyncio.ensure_future(broker.request("web_search", {}, REQUEST))
        while not approvals_snapshot(broker)["pending"]:
            await asyncio.sleep(0.01)
        task.cancel()

    asyncio.run(ask())
    watcher.join(60.0)
    assert woke and woke[0] > seen


def test_an_unshared_broker_notifies_the_feed_for_its_own_approvals() -> None:
    broker = ApprovalBroker(ProgrammaticResolver())
    seen = feed_version(broker)
    asyncio.run(_ask_and_answer(broker, broker, "allow-once"))
    assert feed_version(broker) >= seen + 2  # asked, then decided
