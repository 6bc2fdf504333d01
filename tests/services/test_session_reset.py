"""``reset_session``: one reset for every entrance (the control API, chat ``/reset``)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from agentplug import Gateway, PluginApi
from agentplug.agent import ScriptedProvider
from agentplug.services.sessions import SessionStateError, reset_session


class Notes:
    """A plugin with per-session state that watches resets."""

    plugin_id = "notes"

    def __init__(self) -> None:
        self.seen_at_reset: list[tuple[Any, Any, Any]] = []
        self.cleanups: list[tuple[str, str]] = []
        self.starts: list[str] = []

    def register(self, api: PluginApi) -> None:
        self.ext = api.session.state.register_session_extension("note", default={"n": 0})
        api.session.on_cleanup(lambda reason, key: self.cleanups.append((reason, key)))
        api.on("before_reset", self.before_reset)
        api.on("session_start", lambda event: self.starts.append(event.reason))

    def before_reset(self, event: Any, ctx: Any) -> None:
        state = self.ext.get(event.session_key)
        self.seen_at_reset.append((event.source, ctx.session_id, state))


def _gateway(replies: list[str]) -> tuple[Gateway, Notes, ScriptedProvider]:
    notes = Notes()
    provider = ScriptedProvider(replies)
    gateway = Gateway.from_config(
        {"agent": {"tools": {"actions": False}}}, plugins=[notes], provider=provider
    )
    return gateway, notes, provider


def test_before_reset_fires_while_the_session_is_still_as_it_was() -> None:
    gateway, notes, _ = _gateway(["hi"])
    result = asyncio.run(gateway.runner.run_turn("hello", session_key="s1"))
    notes.ext.patch("s1", {"n": 3})
    report = asyncio.run(
        reset_session(gateway.sessions, "s1", source="api", transcripts=gateway.runner.transcripts)
    )
    session_id = gateway.runner.transcripts.load("s1")
    assert session_id is None  # forgotten
    (seen,) = notes.seen_at_reset
    assert seen[0] == "api" and seen[2] == {"n": 3}
    assert seen[1] == report.session_id and report.transcript_deleted is True
    assert result.status == "replied"


def test_a_reset_clears_plugin_state_and_the_transcript_and_the_next_turn_starts_anew() -> None:
    gateway, notes, provider = _gateway(["one", "two"])
    asyncio.run(gateway.runner.run_turn("first", session_key="s1"))
    notes.ext.patch("s1", {"n": 1})
    asyncio.run(reset_session(gateway.sessions, "s1", transcripts=gateway.runner.transcripts))
    assert notes.ext.get("s1") == {"n": 0}
    assert notes.cleanups == [("reset", "s1")]
    asyncio.run(gateway.runner.run_turn("second", session_key="s1"))
    assert notes.starts == ["new", "new"]
    contents = [m["content"] for m in provider.requests[1].messages if m["role"] == "user"]
    assert contents == ["second"]


def test_a_reset_of_a_session_without_a_transcript_still_fires_and_cleans() -> None:
    gateway, notes, _ = _gateway([])
    report = asyncio.run(
        reset_session(gateway.sessions, "never-used", transcripts=gateway.runner.transcripts)
    )
    assert (report.session_id, report.transcript_deleted) == (None, False)
    assert len(notes.seen_at_reset) == 1 and notes.cleanups == [("reset", "never-used")]


def test_a_malformed_session_key_is_refused_before_anything_fires() -> None:
    gateway, notes, _ = _gateway([])
    with pytest.raises(SessionStateError):
        asyncio.run(reset_session(gateway.sessions, ""))
    assert notes.seen_at_reset == [] and notes.cleanups == []
