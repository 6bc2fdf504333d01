"""Session transcripts: where the runner keeps each session's messages.

:class:`TranscriptStore` is the small interface the runner needs (load, save). The
default, :class:`StateStoreTranscripts`, keeps them in the host's state store
(``host.store``: in memory, or SQLite under ``runtime.state_dir``), namespace
``agent.transcripts``. Every write the runner makes goes through
``before_message_write`` first (:func:`write_message`); tool results go through
``tool_result_persist`` too (:func:`agentplug.services.toolresults.persist_tool_result`).
"""

from __future__ import annotations

import time
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
    context_tokens: int | None = None
    """The provider's token count of the first :attr:`context_messages` messages, as of
    the last model call (``None``: unknown; compaction then estimates)."""
    context_messages: int | None = None
    """How many messages :attr:`context_tokens` counts."""
    updated_at_ms: int | None = None
    """When it was last saved (epoch milliseconds; set by the store's save)."""
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
        return _record(session_key, self.store.get(self.namespace, session_key))

    def keys(self) -> list[str]:
        """The keys of every stored session."""
        return [key for key, _ in self.store.items(self.namespace)]

    def records(self) -> list[SessionRecord]:
        """Every stored session."""
        found = (_record(key, raw) for key, raw in self.store.items(self.namespace))
        return [record for record in found if record is not None]

    def delete(self, session_key: str) -> bool:
        """Forget the session's transcript; ``True`` when there was one."""
        return self.store.delete(self.namespace, session_key)

    def counts(self) -> dict[str, int]:
        """How many messages each stored session holds, by session key."""
        return {
            key: len(value.get("messages") or []) if isinstance(value, Mapping) else 0
            for key, value in self.store.items(self.namespace)
        }

    def save(self, record: SessionRecord) -> None:
        """Store the session (messages as plain JSON), stamped with the time."""
        record.updated_at_ms = int(time.time() * 1000)
        self.store.put(
            self.namespace,
            record.session_key,
            {
                "session_id": record.session_id,
                "messages": thaw(record.messages),
                "summary": record.summary,
                "context_tokens": record.context_tokens,
                "context_messages": record.context_messages,
                "updated_at_ms": record.updated_at_ms,
                "usage_tokens": record.usage_tokens,
            },
        )


def _record(session_key: str, raw: Any) -> SessionRecord | None:
    if not isinstance(raw, Mapping):
        return None
    return SessionRecord(
        session_key=session_key,
        session_id=str(raw.get("session_id") or uuid.uuid4().hex[:16]),
        messages=[dict(m) for m in raw.get("messages") or [] if isinstance(m, Mapping)],
        summary=raw.get("summary"),
        context_tokens=_count(raw.get("context_tokens")),
        context_messages=_count(raw.get("context_messages")),
        updated_at_ms=_count(raw.get("updated_at_ms")),
        usage_tokens=_tokens(raw.get("usage_tokens")),
    )


def _count(value: Any) -> int | None:
    """A stored count, or ``None`` when it is missing or not a count."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


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
    result = host.hooks.before_message_write(
        {"message": message, "session_key": record.session_key}, ctx
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
