"""Session transcripts: where the runner keeps each session's messages.

:class:`TranscriptStore` is the small interface the runner needs (load, save). The
default, :class:`StateStoreTranscripts`, keeps them in the host's state store
(``host.store``: in memory, or SQLite under ``runtime.state_dir``), namespace
``agent.transcripts``. Every write the runner makes goes through
``before_message_write`` first (:func:`write_message`); tool results go through
``tool_result_persist`` too (:func:`agentplug.services.toolresults.persist_tool_result`).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from agentplug_hookspecs import thaw

if TYPE_CHECKING:
    from agentplug.core.host import PluginHost
    from agentplug.store import StateStore

__all__ = [
    "SessionRecord",
    "StateStoreTranscripts",
    "TranscriptStore",
    "answer_open_calls",
    "write_message",
]

NAMESPACE = "agent.transcripts"


@dataclass
class SessionRecord:
    """One session: its id and messages (plain JSON-compatible dicts)."""

    session_key: str
    session_id: str = field(default_factory=lambda: uuid.uuid4().hex[:16])
    messages: list[dict[str, Any]] = field(default_factory=list)
    summary: str | None = None
    """The latest compaction summary (also the first message after a compaction)."""
    usage_tokens: int = 0
    """Tokens the session's turns used so far (``agent.limits.tokens_per_session``)."""


@runtime_checkable
class TranscriptStore(Protocol):
    """Loads and saves session transcripts."""

    def load(self, session_key: str) -> SessionRecord | None:
        """The session, or ``None`` when it does not exist yet (a new session)."""
        ...

    def save(self, record: SessionRecord) -> None:
        """Persist the session."""
        ...


class StateStoreTranscripts:
    """Transcripts in a :class:`~agentplug.store.StateStore` (see the module docstring)."""

    def __init__(self, store: StateStore, namespace: str = NAMESPACE) -> None:
        self.store = store
        self.namespace = namespace

    def load(self, session_key: str) -> SessionRecord | None:
        """The stored session, or ``None``."""
        raw = self.store.get(self.namespace, session_key)
        if not isinstance(raw, Mapping):
            return None
        return SessionRecord(
            session_key=session_key,
            session_id=str(raw.get("session_id") or uuid.uuid4().hex[:16]),
            messages=[dict(m) for m in raw.get("messages") or [] if isinstance(m, Mapping)],
            summary=raw.get("summary"),
            usage_tokens=_tokens(raw.get("usage_tokens")),
        )

    def save(self, record: SessionRecord) -> None:
        """Store the session (messages as plain JSON)."""
        self.store.put(
            self.namespace,
            record.session_key,
            {
                "session_id": record.session_id,
                "messages": thaw(record.messages),
                "summary": record.summary,
                "usage_tokens": record.usage_tokens,
            },
        )


def _tokens(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def write_message(
    host: PluginHost,
    record: SessionRecord,
    message: Mapping[str, Any],
    ctx: Any = None,
) -> dict[str, Any] | None:
    """Append ``message`` through ``before_message_write``; ``None`` when a plugin blocked it.

    The message written is the reduced replacement (plugins may rewrite it).
    """
    result = host.call_sync(
        "before_message_write", {"message": message, "session_key": record.session_key}, ctx
    )
    outcome = result.outcome
    if outcome.blocked:
        return None
    written: dict[str, Any] = thaw(outcome.message)
    record.messages.append(written)
    return written


def answer_open_calls(messages: list[dict[str, Any]], content: str) -> int:
    """Answer every tool call no tool message answers, in place; return how many.

    The chat-completions protocol wants each call of an assistant message answered by
    one ``tool`` message right after it, or it refuses the whole request. A turn that
    stops between a call and its result (cancelled, failed) leaves such a call; each gets
    an error result saying ``content``, placed after the results that exist.
    """
    added = 0
    index = 0
    while index < len(messages):
        message = messages[index]
        index += 1
        calls = message.get("tool_calls") if message.get("role") == "assistant" else None
        if not calls:
            continue
        answered: set[str] = set()
        while index < len(messages) and messages[index].get("role") == "tool":
            answered.add(str(messages[index].get("tool_call_id")))
            index += 1
        for call in calls:
            call_id = call.get("id") if isinstance(call, Mapping) else None
            if call_id is None or str(call_id) in answered:
                continue
            answered.add(str(call_id))
            function = call.get("function")
            name = function.get("name") if isinstance(function, Mapping) else None
            answer = {"role": "tool", "tool_call_id": call_id, "content": content}
            if name is not None:
                answer["name"] = name
            answer["is_error"] = True
            messages.insert(index, answer)
            index += 1
            added += 1
    return added
