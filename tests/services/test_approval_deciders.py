"""Approval records are true: each decision names the entrance it came through.

``chat`` for ``/approve`` and ``/deny``, ``host`` for a host program's own ``resolve``,
``plugin:<id>`` when a plugin's code resolves (stamped by the runtime, whatever the plugin
says), ``scripted`` for the test double and ``terminal`` for the terminal prompt. Shared
brokers record it in the store's decision row and audit entry, every broker in its
history and the gate's decision. (``api``, ``cli`` and ``mcp`` are checked where those
entrances live: tests/api, tests/services/test_approvals_shared.py, tests/integrations.)
"""

from __future__ import annotations

import asyncio
import io
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from agentplug import PluginApi, PluginHost
from agentplug.services.approvals import (
    ApprovalBroker,
    PendingApproval,
    ProgrammaticResolver,
    ScriptedResolver,
    TerminalResolver,
)
from agentplug.services.approvals.models import iso_time
from agentplug.services.approvals.shared import AUDIT_NAMESPACE, stored_decision
from agentplug.services.toolcalls import ToolCallDecision, ToolCallGate
from agentplug.store import SQLiteStore
from agentplug_hookspecs.tools import ApprovalRequest

from tests.services.test_approvals import approval_plugin


@pytest.fixture(params=["local", "shared"])
def shared(request: pytest.FixtureRequest) -> bool:
    return bool(request.param == "shared")


def _gate(
    tmp_path: Path, resolver: Any, shared: bool, *plugins: tuple[str, Any]
) -> tuple[ToolCallGate, PluginHost]:
    host = PluginHost(store=SQLiteStore(tmp_path / "state.sqlite3"))
    host.register(approval_plugin(), "asker")
    for plugin_id, plugin in plugins:
        host.register(plugin, plugin_id)
    return ToolCallGate(
        host,
        host.gateway.policies,
        ApprovalBroker(resolver, store=host.gateway.store, shared=shared),
    ), host


def _check(gate: ToolCallGate) -> ToolCallDecision:
    async def main() -> ToolCallDecision:
        return await gate.check({"tool_name": "web_search", "params": {"query": "x"}})

    return asyncio.run(main())


def _recorded_by(gate: ToolCallGate, decision: ToolCallDecision, shared: bool) -> set[str]:
    """Every place the decider is recorded: the history, the gate's decision and (shared)
    the store's decision row and audit entry."""
    broker = gate.broker
    found = {broker.history[-1]["by"], decision.approval_by}
    if shared:
        assert decision.approval_id is not None
        row = stored_decision(broker.store, decision.approval_id)
        assert row is not None
        found.add(row["by"])
        audit = [
            e
            for e in broker.store.peek(AUDIT_NAMESPACE, "audit")
            if e["approval_id"] == decision.approval_id
        ]
        found |= {e["by"] for e in audit}
    return found


def _answered_by(answer: Callable[[ProgrammaticResolver, PendingApproval], Any]) -> Any:
    resolver = ProgrammaticResolver()
    resolver.on_pending = lambda p: answer(resolver, p)
    return resolver


def test_a_chat_approve_is_recorded_as_chat(tmp_path: Path, shared: bool) -> None:
    resolver = _answered_by(lambda r, p: r.handle_command(f"/approve {p.id} allow-once"))
    gate, _ = _gate(tmp_path, resolver, shared)
    decision = _check(gate)
    assert decision.allowed
    assert _recorded_by(gate, decision, shared) == {"chat"}


def test_a_chat_deny_is_recorded_as_chat(tmp_path: Path, shared: bool) -> None:
    resolver = _answered_by(lambda r, p: r.handle_command(f"/deny {p.id}"))
    gate, _ = _gate(tmp_path, resolver, shared)
    decision = _check(gate)
    assert decision.approval_resolution == "deny"
    assert _recorded_by(gate, decision, shared) == {"chat"}


def test_a_host_programs_own_resolve_is_recorded_as_host(tmp_path: Path, shared: bool) -> None:
    resolver = _answered_by(lambda r, p: r.resolve(p.id, "allow-once"))
    gate, _ = _gate(tmp_path, resolver, shared)
    decision = _check(gate)
    assert _recorded_by(gate, decision, shared) == {"host"}


def test_a_resolve_naming_its_entrance_is_recorded_as_that_entrance(
    tmp_path: Path, shared: bool
) -> None:
    resolver = _answered_by(lambda r, p: r.resolve(p.id, "allow-once", by="slack"))
    gate, _ = _gate(tmp_path, resolver, shared)
    decision = _check(gate)
    assert _recorded_by(gate, decision, shared) == {"slack"}


def test_a_plugin_resolving_is_recorded_as_that_plugin_whatever_it_claims(
    tmp_path: Path, shared: bool
) -> None:
    """A real plugin relays ``/approve`` commands from its channel: the runtime stamps its
    id on the decision, even when it passes another entrance."""
    resolver = ProgrammaticResolver()
    approvals: list[str] = []

    def relay(api: PluginApi) -> None:
        def message_received(event: Any) -> None:
            pending_id, decision = event.content.split()[1:]
            resolver.resolve(pending_id, decision, by="api")

        api.on("message_received", message_received)

    async def main(gate: ToolCallGate, host: PluginHost) -> ToolCallDecision:
        checking = asyncio.ensure_future(
            gate.check({"tool_name": "web_search", "params": {"query": "x"}})
        )
        while not resolver.pending:
            await asyncio.sleep(0.01)
        approvals.append(resolver.pending[0].id)
        await host.dispatch("message_received", {"content": f"/approve {approvals[0]} allow-once"})
        return await checking

    gate, host = _gate(tmp_path, resolver, shared, ("chat-relay", relay))
    decision = asyncio.run(main(gate, host))
    assert decision.allowed
    assert _recorded_by(gate, decision, shared) == {"plugin:chat-relay"}


def test_a_scripted_decision_is_recorded_as_scripted(tmp_path: Path, shared: bool) -> None:
    gate, _ = _gate(tmp_path, ScriptedResolver(["allow-once"]), shared)
    decision = _check(gate)
    assert _recorded_by(gate, decision, shared) == {"scripted"}


def test_a_terminal_answer_is_recorded_as_terminal(tmp_path: Path, shared: bool) -> None:
    resolver = TerminalResolver(io.StringIO("once\n"), io.StringIO())
    gate, _ = _gate(tmp_path, resolver, shared)
    decision = _check(gate)
    assert _recorded_by(gate, decision, shared) == {"terminal"}


def test_a_terminal_resolver_can_name_its_entrance(tmp_path: Path, shared: bool) -> None:
    resolver = TerminalResolver(io.StringIO("once\n"), io.StringIO(), by="chat")
    gate, _ = _gate(tmp_path, resolver, shared)
    decision = _check(gate)
    assert _recorded_by(gate, decision, shared) == {"chat"}


def test_of_threads_racing_in_memory_every_loser_is_told_who_won_and_when() -> None:
    resolver = ProgrammaticResolver()
    replies: list[Any] = []

    def race(pending: PendingApproval) -> None:
        barrier = threading.Barrier(8)

        def decide(i: int) -> None:
            barrier.wait()
            replies.append(resolver.resolve(pending.id, ("allow-once", "deny")[i % 2], by=f"t{i}"))

        threads = [threading.Thread(target=decide, args=(i,)) for i in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    resolver.on_pending = race
    broker = ApprovalBroker(resolver)
    request = ApprovalRequest(title="Run web search", description="d")
    verdict = asyncio.run(broker.request("web_search", {}, request))
    (winner,) = [r for r in replies if r.ok]
    assert verdict.decided_by == winner.by and winner.at is not None
    named = f"by {winner.by} at {iso_time(winner.at)})"
    losers = [r for r in replies if not r.ok]
    assert len(losers) == 7 and all(r.status == "decided" and named in r.message for r in losers)


def test_a_timeout_noticed_by_another_process_is_recorded_as_the_askers_not_the_noticers(
    tmp_path: Path,
) -> None:
    from agentplug.services.approvals.shared import (
        expire_pending,
        publish_pending,
        resolve_pending,
    )

    store = SQLiteStore(tmp_path / "state.sqlite3")
    request = ApprovalRequest(title="Run web search", description="x", timeout_ms=1_000)
    for approval_id, notice in (
        ("late-cli", lambda: resolve_pending(store, "late-cli", "allow-once", by="cli")),
        ("late-sweep", lambda: expire_pending(store, by="cli", now=time.time() + 60)),
    ):
        # Asked ten seconds ago with a one-second timeout: expired when another process looks.
        pending = PendingApproval(
            approval_id, "web_search", {"query": "x"}, request, created_at=time.time() - 10
        )
        publish_pending(store, pending, gateway="gw-asker")
        notice()
        decision = stored_decision(store, approval_id)
        assert decision is not None and decision["resolution"] == "timeout"
        assert decision["by"] == "gw-asker", decision
        assert decision.get("gateway") == "cli"


def test_an_answer_accepted_as_the_wait_times_out_is_the_decision_that_stands() -> None:
    class CrossingResolver(ProgrammaticResolver):
        """A person's answer lands at the very moment the broker's wait times out."""

        def withdraw(self, approval_id: str) -> Any:
            self.replies.append(self.resolve(approval_id, "allow-once", by="api"))
            return super().withdraw(approval_id)

    resolver = CrossingResolver()
    resolver.replies = []  # type: ignore[attr-defined]
    broker = ApprovalBroker(resolver)
    request = ApprovalRequest(title="Run web search", description="x", timeout_ms=50)

    async def main() -> Any:
        return await broker.request("web_search", {"query": "x"}, request)

    verdict = asyncio.run(main())
    (reply,) = resolver.replies  # type: ignore[attr-defined]
    assert reply.ok  # the person was told it was resolved...
    assert verdict.allowed and verdict.resolution == "allow-once"  # ...and it was
    assert broker.history[-1]["resolution"] == "allow-once"
    assert broker.history[-1]["by"] == "api"
