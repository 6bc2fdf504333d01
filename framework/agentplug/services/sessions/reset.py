"""Resetting one session: :func:`reset_session`.

One function for every entrance that resets a session (the control API's
``POST /api/sessions/{key}/reset``, and a chat ``/reset`` or a ``sessions reset`` command
can call it too): ``before_reset`` fires first (plugins observe the session as it was),
then every plugin's cleanup callbacks get ``reset`` and the plugins' session state and
pending next-turn injections are deleted (:meth:`SessionServices.cleanup`), and last the
session's transcript is forgotten, so the next message starts a new session
(``session_start`` with reason ``new``).

The transcript store belongs to the agent layer above this one, so it is passed in:
anything with ``delete(session_key)`` (the runner's
:class:`~agentplug.agent.transcript.StateStoreTranscripts`) and, optionally,
``load(session_key)`` (to put the session id in ``before_reset``'s context).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agentplug.services.sessions.state import check_session_key

if TYPE_CHECKING:
    from agentplug.services.sessions.services import SessionServices

__all__ = ["ResetReport", "reset_session"]


@dataclass(frozen=True)
class ResetReport:
    """What :func:`reset_session` did."""

    session_key: str
    source: str
    session_id: str | None
    """The id of the session instance that ended (``None``: it had no transcript)."""
    transcript_deleted: bool


async def reset_session(
    sessions: SessionServices,
    session_key: str,
    *,
    source: str = "api",
    transcripts: Any = None,
    agent_id: str | None = None,
) -> ResetReport:
    """Reset ``session_key`` (see the module docstring); ``source`` says what asked for it
    (``api``, ``command``...). Raises
    :class:`~agentplug.services.sessions.SessionStateError` for a malformed key."""
    check_session_key(session_key)
    load = getattr(transcripts, "load", None)
    record = load(session_key) if callable(load) else None
    session_id = getattr(record, "session_id", None)
    await sessions.host.hooks.before_reset(
        {"session_key": session_key, "source": source},
        {"session_key": session_key, "session_id": session_id, "agent_id": agent_id},
    )
    sessions.cleanup(session_key, "reset")
    delete = getattr(transcripts, "delete", None)
    deleted = bool(delete(session_key)) if callable(delete) else False
    return ResetReport(session_key, source, session_id, deleted)
