"""Tool result ``details``: runtime metadata, never prompt content.

A tool result message may carry structured ``details`` (UI, diagnostics, media
routing). The runtime

- strips them before provider replay and compaction input (:func:`strip_details`), and
  from the messages hooks receive (:class:`HistoryView`);
- persists them only up to a size bound, replacing oversized ones with a compact summary
  marked ``persisted_details_truncated: true`` (:func:`bound_details`);
- runs ``tool_result_persist`` then ``before_message_write`` *before* that final bound
  (:func:`persist_tool_result`), so whatever plugins return is bounded too.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from agentplug_hookspecs import FrozenList, deep_freeze, thaw
from agentplug_hookspecs.tools import MessagePersistOutcome, MessageWriteOutcome, ToolContext
from pydantic import BaseModel, Field

from agentplug.core.results import HandlerReport

if TYPE_CHECKING:
    from agentplug.core.host import PluginHost

__all__ = [
    "DEFAULT_MAX_DETAILS_BYTES",
    "HistoryView",
    "PersistResult",
    "bound_details",
    "persist_tool_result",
    "strip_details",
]

DEFAULT_MAX_DETAILS_BYTES = 16 * 1024
"""Largest serialised ``details`` kept in a persisted session entry."""
_SUMMARY_KEYS = 20
_SUMMARY_KEY_CHARS = 64
DETAILS_KEYS = ("details",)


def _size(value: Any) -> int | None:
    try:
        return len(
            json.dumps(value, separators=(",", ":"), allow_nan=False, ensure_ascii=False).encode()
        )
    except (TypeError, ValueError):
        return None


def _summary(details: Any, size: int | None, max_bytes: int) -> dict[str, Any]:
    summary: dict[str, Any] = {
        "persisted_details_truncated": True,
        "original_bytes": size,
        "max_bytes": max_bytes,
        "type": type(details).__name__ if size is None else _json_type(details),
    }
    if size is None:
        summary["not_json"] = True
    if isinstance(details, Mapping):
        keys = [str(k)[:_SUMMARY_KEY_CHARS] for k in list(details)[:_SUMMARY_KEYS]]
        summary["keys"] = keys
        summary["key_count"] = len(details)
    elif isinstance(details, list | tuple):
        summary["length"] = len(details)
    return summary


def _json_type(value: Any) -> str:
    if isinstance(value, Mapping):
        return "object"
    if isinstance(value, list | tuple):
        return "array"
    if isinstance(value, str):
        return "string"
    return type(value).__name__


def bound_details(
    message: Mapping[str, Any], max_bytes: int = DEFAULT_MAX_DETAILS_BYTES
) -> dict[str, Any]:
    """A copy of ``message`` whose ``details`` fit in ``max_bytes`` of JSON.

    Oversized (or non-JSON) details become a compact summary
    ``{"persisted_details_truncated": true, "original_bytes", "type", "keys"|"length"}``.
    The input is not modified.
    """
    out = thaw(message)
    for key in DETAILS_KEYS:
        if key not in out or out[key] is None:
            continue
        details = out[key]
        size = _size(details)
        if size is None or size > max_bytes:
            out[key] = _summary(details, size, max_bytes)
    return out  # type: ignore[no-any-return]


def strip_details(messages: Iterable[Any]) -> list[Any]:
    """Copies of ``messages`` without ``details`` (provider replay, compaction input).

    Non-mapping items are passed through unchanged; the inputs are not modified.
    """
    out: list[Any] = []
    for message in messages:
        if isinstance(message, Mapping):
            out.append({k: thaw(v) for k, v in message.items() if k not in DETAILS_KEYS})
        else:
            out.append(message)
    return out


class HistoryView:
    """A transcript's messages as hooks receive them: frozen, without ``details``.

    Each message is copied once: called again (the next hook of the same turn), a message
    already seen, the very same object, is shared instead of copied again, so a turn that
    hands its history to several hooks pays for one copy of it plus the messages added
    since. The messages must not change in place while the view is in use (a turn only
    appends or replaces them); the view keeps every message it saw alive, so it lives as
    long as one turn.
    """

    __slots__ = ("_seen",)

    def __init__(self) -> None:
        self._seen: dict[int, tuple[Any, Any]] = {}

    def __call__(self, messages: Iterable[Any]) -> FrozenList:
        """The frozen, stripped copy of ``messages``."""
        seen = self._seen
        out: list[Any] = []
        for message in messages:
            known = seen.get(id(message))
            if known is not None and known[0] is message:
                out.append(known[1])
                continue
            if isinstance(message, Mapping):
                frozen = deep_freeze({k: v for k, v in message.items() if k not in DETAILS_KEYS})
            else:
                frozen = deep_freeze(message)
            seen[id(message)] = (message, frozen)
            out.append(frozen)
        return FrozenList(out)


class PersistResult(BaseModel):
    """What :func:`persist_tool_result` decided."""

    message: dict[str, Any] | None
    """The bounded message to write; ``None`` when a ``before_message_write`` blocked."""
    blocked: bool = False
    blocked_by: str | None = None
    changed_by: list[str] = Field(default_factory=list)
    handlers: list[HandlerReport] = Field(default_factory=list)


def persist_tool_result(
    host: PluginHost,
    message: Mapping[str, Any],
    ctx: ToolContext | Mapping[str, Any] | None = None,
    *,
    tool_name: str | None = None,
    tool_call_id: str | None = None,
    session_key: str | None = None,
    max_bytes: int = DEFAULT_MAX_DETAILS_BYTES,
) -> PersistResult:
    """``tool_result_persist`` -> ``before_message_write`` -> the final details bound.

    Both hooks are synchronous (``host.call_sync``). A ``before_message_write`` block
    drops the write (``message=None``).
    """
    if session_key is None and isinstance(ctx, Mapping):
        session_key = ctx.get("session_key") or ctx.get("sessionKey")
    elif session_key is None and isinstance(ctx, ToolContext):
        session_key = ctx.session_key
    persisted = host.hooks.tool_result_persist(
        {"message": message, "tool_name": tool_name, "tool_call_id": tool_call_id},
        ctx,
    )
    first: MessagePersistOutcome = persisted.outcome
    written = host.hooks.before_message_write(
        {"message": first.message, "session_key": session_key}, ctx
    )
    second: MessageWriteOutcome = written.outcome
    handlers = persisted.handlers + written.handlers
    changed = list(first.changed_by) + list(second.changed_by)
    if second.blocked:
        return PersistResult(
            message=None,
            blocked=True,
            blocked_by=second.blocked_by,
            changed_by=changed,
            handlers=handlers,
        )
    return PersistResult(
        message=bound_details(second.message, max_bytes),
        changed_by=changed,
        handlers=handlers,
    )
