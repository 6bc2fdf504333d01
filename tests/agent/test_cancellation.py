"""Cancelling a turn while an approval is pending keeps the session usable.

A real OpenAI-compatible server on 127.0.0.1 answers with two tool calls; a real plugin
asks approval for them; the turn's abort signal fires while the first approval waits. The
server is strict: like OpenAI, it answers HTTP 400 to a request whose assistant tool calls
are not each answered by one tool message. The approval is withdrawn from every listing,
and answering it later says it was cancelled, and when.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from agentplug import PluginApi, PluginHost
from agentplug.agent import AgentRunner, TurnResult
from agentplug.services.approvals import ApprovalBroker, ProgrammaticResolver
from agentplug.services.approvals.models import iso_time
from agentplug.services.approvals.shared import list_pending, stored_decision
from agentplug.services.signals import AbortController
from agentplug.store import SQLiteStore

from tests.agent.chat_server import ChatServer, chat_server, protocol_errors


@pytest.fixture
def server() -> Iterator[ChatServer]:
    with chat_server() as srv:
        srv.strict = True
        yield srv


@pytest.fixture(params=["local", "shared"])
def shared(request: pytest.FixtureRequest) -> bool:
    return bool(request.param == "shared")


def asker(*, abort: AbortController | None = None) -> Any:
    """A real plugin asking approval for every ``echo`` call (aborting the turn first
    when given a controller: the abort then races the approval request)."""

    def register(api: PluginApi) -> None:
        def before_tool_call(event: Any) -> dict[str, Any]:
            if abort is not None:
                abort.abort("stopped while asking")
            return {"require_approval": {"title": "Echo", "description": "echo it"}}

        api.on("before_tool_call", before_tool_call)

    return register


class Gateway:
    """A host, its approval broker (shared through SQLite or not) and a runner."""

    def __init__(self, server: ChatServer, tmp_path: Path, shared: bool, plugin: Any) -> None:
        self.host = PluginHost(store=SQLiteStore(tmp_path / "state.sqlite3"))
        self.host.register(plugin, "asker")
        self.resolver = ProgrammaticResolver()
        self.broker = ApprovalBroker(self.resolver, store=self.host.gateway.store, shared=shared)
        config = {
            "model": "openai/test-model",
            "tools": {"actions": False},
            "providers": {"openai": {"base_url": server.base_url}},
        }
        self.runner = AgentRunner(self.host, config=config, broker=self.broker)
        self.ran: list[str] = []

        def echo(text: str) -> str:
            """Echo a text."""
            self.ran.append(text)
            return text

        self.runner.tools.add_python(echo)

    async def cancelled_turn(self) -> tuple[TurnResult, str]:
        """A turn aborted while its first approval is pending; returns the approval id."""
        controller = AbortController()
        turn = asyncio.ensure_future(
            self.runner.run_turn("echo a and b", session_key="s1", signal=controller.signal)
        )
        while not self.resolver.pending:
            await asyncio.sleep(0.01)
        approval_id = self.resolver.pending[0].id
        controller.abort("the user pressed stop")
        return await turn, approval_id


def _two_calls(server: ChatServer) -> None:
    server.tool_calls(("echo", {"text": "a"}), ("echo", {"text": "b"}))


def test_a_cancelled_turn_answers_every_tool_call_so_the_next_request_is_valid(
    server: ChatServer, tmp_path: Path, shared: bool
) -> None:
    _two_calls(server)
    server.reply("Starting over.")
    gateway = Gateway(server, tmp_path, shared, asker())

    async def main() -> tuple[TurnResult, TurnResult]:
        cancelled, _ = await gateway.cancelled_turn()
        return cancelled, await gateway.runner.run_turn("try again", session_key="s1")

    cancelled, after = asyncio.run(main())
    assert cancelled.status == "cancelled" and gateway.ran == []
    answers = [m for m in cancelled.transcript if m["role"] == "tool"]
    assert [(m["tool_call_id"], m["is_error"]) for m in answers] == [
        ("call_a0", True),
        ("call_a1", True),
    ]
    assert all("cancelled" in m["content"] for m in answers)
    assert protocol_errors(server.requests[-1]["body"]["messages"]) == []
    assert (after.status, after.reply) == ("replied", "Starting over.")


def test_a_session_a_cancelled_turn_left_broken_is_repaired_at_the_next_turn(
    server: ChatServer, tmp_path: Path
) -> None:
    server.reply("Fine again.")
    gateway = Gateway(server, tmp_path, False, asker())
    broken = {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"id": "old1", "type": "function", "function": {"name": "echo", "arguments": "{}"}}
        ],
    }
    record = gateway.runner.transcripts.load("s1")
    assert record is None
    from agentplug.agent.transcript import SessionRecord

    stored = SessionRecord("s1", messages=[{"role": "user", "content": "hi"}, broken])
    gateway.runner.transcripts.save(stored)
    result = asyncio.run(gateway.runner.run_turn("hello?", session_key="s1"))
    assert (result.status, result.reply) == ("replied", "Fine again.")
    assert protocol_errors(server.requests[-1]["body"]["messages"]) == []


def test_a_cancelled_runs_approval_is_withdrawn_from_every_listing(
    server: ChatServer, tmp_path: Path, shared: bool
) -> None:
    _two_calls(server)
    gateway = Gateway(server, tmp_path, shared, asker())
    _, approval_id = asyncio.run(gateway.cancelled_turn())
    assert gateway.resolver.pending == [] and gateway.broker.pending == []
    assert "no approval is pending" in gateway.resolver.describe_pending()
    assert gateway.broker.history[-1]["resolution"] == "cancelled"
    if shared:
        assert list_pending(gateway.host.gateway.store) == []
        decision = stored_decision(gateway.host.gateway.store, approval_id)
        assert decision is not None and decision["resolution"] == "cancelled"


def test_approving_a_cancelled_runs_approval_in_chat_says_it_was_cancelled_and_when(
    server: ChatServer, tmp_path: Path, shared: bool
) -> None:
    _two_calls(server)
    gateway = Gateway(server, tmp_path, shared, asker())
    _, approval_id = asyncio.run(gateway.cancelled_turn())
    reply = gateway.resolver.handle_command(f"/approve {approval_id} allow-once")
    assert not reply.ok and reply.status == "cancelled" and reply.at is not None
    assert reply.message == (
        f"approval {approval_id!r} was cancelled at {iso_time(reply.at)} (its run was "
        "cancelled); the tool call was not run"
    )
    assert gateway.ran == []


def test_an_approval_asked_after_its_run_was_cancelled_is_never_left_waiting(
    server: ChatServer, tmp_path: Path, shared: bool
) -> None:
    """The abort lands while the gate is still asking the plugins: the approval that
    follows is cancelled at once, not listed until its timeout."""
    _two_calls(server)
    controller = AbortController()
    gateway = Gateway(server, tmp_path, shared, asker(abort=controller))
    listed: list[Any] = []
    gateway.resolver.on_pending = lambda p: listed.append(p.id)
    result = asyncio.run(
        gateway.runner.run_turn("echo a and b", session_key="s1", signal=controller.signal)
    )
    assert result.status == "cancelled" and gateway.ran == []
    assert gateway.broker.history[-1]["resolution"] == "cancelled"
    assert gateway.resolver.pending == []
    if shared:
        assert list_pending(gateway.host.gateway.store) == []
    tool = next(e for e in result.trace if e["kind"] == "tool")
    assert tool["decision"]["approval"] == "cancelled"
    assert json.dumps(result.transcript).count('"is_error": true') == 2
