"""Sessions as a user sees them: list them, read one, reset one.

A session is the transcript the runner keeps under its key in the gateway's store
(:class:`~agentplug.agent.transcript.StateStoreTranscripts`). :func:`list_sessions` and
:func:`show_session` read them; :func:`reset_session` starts a session over, in this
order: ``before_reset`` (the session as it was), ``session_end`` with reason ``reset``,
the plugins' session cleanup (their callbacks get ``reset``; their per-session state and
pending next-turn injections are deleted), a fresh empty transcript under a new session
id, then ``session_start`` with reason ``reset``. The reset waits for a turn of that
session in progress to end (it takes the session's turn lock).

``agentplug chat`` (``/reset``, ``/new``, ``/sessions``), ``agentplug sessions
list|show|reset`` and hosts (``runner.reset_session(key)``) all go through here.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, Protocol

from agentplug.agent.transcript import SessionRecord, StateStoreTranscripts, TranscriptStore
from agentplug.core.redaction import scrub

__all__ = [
    "SessionRunner",
    "SessionSummary",
    "UnknownSession",
    "list_sessions",
    "reset_session",
    "show_session",
]

_PREVIEW_CHARS = 60


class SessionRunner(Protocol):
    """What these functions use of a runner (:class:`~agentplug.agent.AgentRunner`)."""

    host: Any
    agent_id: str
    sessions: Any
    transcripts: TranscriptStore

    def session_lock(self, session_key: str) -> asyncio.Lock:
        """The lock a turn of ``session_key`` holds."""
        ...


class UnknownSession(LookupError):
    """No session has that key (one line naming it and how to list the keys)."""


@dataclass(frozen=True)
class SessionSummary:
    """One session in a listing."""

    session_key: str
    session_id: str
    messages: int
    """How many messages the transcript holds."""
    updated_at_ms: int | None
    """When its last turn saved it (``None``: an older record without the time)."""
    last_user: str
    """The start of its last user message (configured secrets scrubbed)."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-compatible fields (``agentplug sessions list --json``)."""
        return {
            "session_key": self.session_key,
            "session_id": self.session_id,
            "messages": self.messages,
            "updated_at_ms": self.updated_at_ms,
            "last_user": self.last_user,
        }


def _listing(runner: SessionRunner) -> StateStoreTranscripts:
    transcripts = runner.transcripts
    if not isinstance(transcripts, StateStoreTranscripts):
        raise TypeError(
            f"the runner's transcripts ({type(transcripts).__name__}) cannot be listed: only "
            "the state store's transcripts can (the default)"
        )
    return transcripts


def _preview(record: SessionRecord) -> str:
    for message in reversed(record.messages):
        if message.get("role") == "user":
            text = " ".join(str(message.get("content") or "").split())
            text = scrub(text)
            return text if len(text) <= _PREVIEW_CHARS else text[: _PREVIEW_CHARS - 1] + "\u2026"
    return ""


def list_sessions(runner: SessionRunner) -> list[SessionSummary]:
    """Every session of the runner's transcripts, the most recently saved first."""
    found = [
        SessionSummary(
            session_key=record.session_key,
            session_id=record.session_id,
            messages=len(record.messages),
            updated_at_ms=record.updated_at_ms,
            last_user=_preview(record),
        )
        for record in _listing(runner).records()
    ]
    found.sort(key=lambda s: (-(s.updated_at_ms or 0), s.session_key))
    return found


def show_session(runner: SessionRunner, session_key: str) -> SessionRecord:
    """The session called ``session_key`` (:class:`UnknownSession` when there is none)."""
    record = runner.transcripts.load(session_key)
    if record is None:
        raise _unknown(runner, session_key)
    return record


def _unknown(runner: SessionRunner, session_key: str) -> UnknownSession:
    from agentplug.config.suggest import closest

    keys: list[str] = []
    if isinstance(runner.transcripts, StateStoreTranscripts):
        keys = runner.transcripts.keys()
    close = closest(session_key, keys)
    hint = f"did you mean {close[0]!r}? " if close else ""
    return UnknownSession(
        f"no session {session_key!r}; {hint}`agentplug sessions list` lists the sessions"
    )


async def reset_session(
    runner: SessionRunner, session_key: str, *, source: str = "api"
) -> SessionRecord:
    """Start ``session_key`` over (see the module docstring); return the fresh session.

    ``source`` says what asked (``command`` for chat's ``/reset``, ``cli``, ``api``).
    Raises :class:`UnknownSession` when there is no such session.
    """
    host = runner.host
    async with runner.session_lock(session_key):
        old = runner.transcripts.load(session_key)
        if old is None:
            raise _unknown(runner, session_key)
        ctx = {
            "agent_id": runner.agent_id,
            "session_key": session_key,
            "session_id": old.session_id,
        }
        await host.hooks.before_reset({"session_key": session_key, "source": source}, ctx)
        await host.hooks.session_end(
            {"session_key": session_key, "session_id": old.session_id, "reason": "reset"}, ctx
        )
        runner.sessions.cleanup(session_key, "reset")
        fresh = SessionRecord(session_key)
        runner.transcripts.save(fresh)
        await host.hooks.session_start(
            {"session_key": session_key, "session_id": fresh.session_id, "reason": "reset"},
            {**ctx, "session_id": fresh.session_id},
        )
    return fresh
