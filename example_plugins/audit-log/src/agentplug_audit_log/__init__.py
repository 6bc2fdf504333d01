"""audit-log: one JSON line per hook call, without message bodies or secrets.

``register(api)`` generates one handler per hook name from two lists with ``api.on``, all
writing through a single :class:`AuditWriter`:

- every observation hook (:data:`OBSERVATION_HOOKS`);
- a few decision hooks (:data:`DECISION_HOOKS`) at the lowest priority, returning ``None`` so
  they never decide anything; they record what reached the end of the chain.

Each line holds ``ts`` (UTC, ISO 8601), ``hook``, the ``run_id``/``session_key``/``session_id``
found in the event or its context, and a summary of the event (and ctx) fields in which free
text is replaced by its length: only correlation ids and short enumerations are kept
verbatim (:data:`VERBATIM_FIELDS`). A message's content is recorded as ``{"chars": 42}``.

The conversation hooks among them (:data:`CONVERSATION_HOOKS`) only run when the operator
sets ``plugins.entries.audit-log.hooks.allow_conversation_access = true``. By default the
plugin registers them only when that access is granted (``api.hook_allowed``), so a fresh
install is quiet; ``config.conversation_hooks = true`` registers them regardless (the
runtime then reports them as refused), ``false`` never does.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from agentplug import PluginApi
from agentplug_hookspecs import Context, Event, HookModel

__all__ = [
    "CONVERSATION_HOOKS",
    "DECISION_HOOKS",
    "DEFAULT_FILE",
    "LOW_PRIORITY",
    "OBSERVATION_HOOKS",
    "PLUGIN_ID",
    "VERBATIM_FIELDS",
    "AuditWriter",
    "register",
    "summarize",
]

PLUGIN_ID = "audit-log"
DEFAULT_FILE = "audit-log.jsonl"
"""The file in the gateway's state folder when ``config.path`` is not set (with neither,
nothing is written: the plugin never drops a file in whatever folder the host runs in)."""
LOW_PRIORITY = -1_000
"""Decision-hook recorders run last: they see what every other handler let through."""

OBSERVATION_HOOKS: tuple[str, ...] = (
    # Agent turn and conversation observation
    "agent_end",
    "model_call_started",
    "model_call_ended",
    "llm_input",
    "llm_output",
    # Tools
    "after_tool_call",
    # Messages and delivery
    "channel_pairing_requested",
    "message_received",
    "message_sent",
    # Sessions, compaction and subagents
    "session_start",
    "session_end",
    "before_compaction",
    "after_compaction",
    "before_reset",
    "subagent_spawned",
    "subagent_ended",
    # Lifecycle
    "gateway_start",
    "gateway_stop",
    "cron_reconciled",
    "cron_changed",
)
"""Every observation hook of the catalogue (the deprecated ``deactivate`` alias excluded)."""

CONVERSATION_HOOKS = frozenset({"agent_end", "llm_input", "llm_output"})
"""Observation hooks that need ``hooks.allow_conversation_access`` (installed plugins)."""

DECISION_HOOKS: tuple[str, ...] = ("before_tool_call", "message_sending")
"""Decision hooks recorded by a handler that returns ``None``."""

VERBATIM_FIELDS = frozenset(
    {
        # correlation ids
        "account_id",
        "agent_id",
        "call_id",
        "child_session_key",
        "id",
        "job_id",
        "message_id",
        "parent_span_id",
        "run_id",
        "sender_id",
        "session_id",
        "session_key",
        "span_id",
        "target_session_key",
        "thread_id",
        "tool_call_id",
        "trace_id",
        "upstream_request_id_hash",
        # short names and enumerations
        "api",
        "channel",
        "context_window_source",
        "delivery_status",
        "host",
        "kind",
        "last_run_status",
        "model",
        "name",
        "outcome",
        "provider",
        "reason",
        "resolved_model",
        "resolved_provider",
        "target_kind",
        "tool_input_kind",
        "tool_kind",
        "tool_name",
        "transport",
        "trigger",
        "version",
    }
)
"""String fields recorded as they are (cut to :data:`MAX_VERBATIM_CHARS`); others: length."""
MAX_VERBATIM_CHARS = 200
CORRELATION_FIELDS = ("run_id", "session_key", "session_id")
_MAX_DEPTH = 3

AuditHandler = Callable[[Event, Context], None]

log = logging.getLogger(f"agentplug.plugin.{PLUGIN_ID}")


def _summarize_value(name: str, value: Any, depth: int) -> Any:
    if isinstance(value, bool | int | float):
        return value
    if isinstance(value, str):
        if name in VERBATIM_FIELDS:
            return value[:MAX_VERBATIM_CHARS]
        return {"chars": len(value)}
    if isinstance(value, HookModel):
        # Typed models have known field names: describe them with the same rules.
        return (
            summarize(value, depth + 1)
            if depth < _MAX_DEPTH
            else {"fields": len(type(value).model_fields)}
        )
    if isinstance(value, Mapping):
        # Plain mappings (metadata, params) carry untrusted keys: count them only.
        return {"keys": len(value)}
    if isinstance(value, list | tuple):
        return {"items": len(value)}
    return {"type": type(value).__name__}


def summarize(model: HookModel, depth: int = 0) -> dict[str, Any]:
    """A content-free summary of ``model``'s fields (extra host fields included)."""
    summary: dict[str, Any] = {}
    for name, value in model:
        if value is None or callable(value):
            continue
        summary[name] = _summarize_value(name, value, depth)
    return summary


class AuditWriter:
    """Appends JSON lines to one file; safe to call from several threads."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()

    def write(self, hook: str, event: Event, ctx: Context) -> None:
        """Append the line describing one call of ``hook``."""
        record: dict[str, Any] = {
            "ts": dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds"),
            "hook": hook,
        }
        for name in CORRELATION_FIELDS:
            value = getattr(event, name, None) or getattr(ctx, name, None)
            if isinstance(value, str):
                record[name] = value
        record["event"] = summarize(event)
        context = summarize(ctx)
        if context:
            record["ctx"] = context
        line = json.dumps(record, ensure_ascii=False, default=str) + "\n"
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a", encoding="utf-8") as fh:
                fh.write(line)


def _handler(writer: AuditWriter, hook: str, *, never_fail: bool) -> AuditHandler:
    def audit(event: Event, ctx: Context) -> None:
        if not never_fail:
            writer.write(hook, event, ctx)
            return
        # Decision hooks: before_tool_call fails closed, so an unwritable audit file must
        # not turn into blocked tool calls.
        try:
            writer.write(hook, event, ctx)
        except Exception as exc:
            log.warning("could not record %s (%s)", hook, type(exc).__name__)

    audit.__name__ = audit.__qualname__ = f"audit_{hook}"
    return audit


def _path(config: Mapping[str, Any], state_dir: Path | None) -> Path | None:
    raw = config.get("path")
    if raw is None or raw == "":
        return (state_dir / DEFAULT_FILE).absolute() if state_dir is not None else None
    if not isinstance(raw, str):
        raise ValueError(f"plugins.entries.{PLUGIN_ID}.config.path must be a file path string")
    # Resolved once: a later chdir of the host must not scatter the audit trail.
    return Path(raw).expanduser().absolute()


def register(api: PluginApi) -> None:
    """Entry point: one generated handler per audited hook, all sharing one writer."""
    config = api.plugin_config
    path = _path(config, api.gateway.state_dir)
    if path is None:
        api.note(f"writes nothing: no state folder and no plugins.entries.{PLUGIN_ID}.config.path")
        return
    api.note(f"writes one line per hook call to {path}")
    writer = AuditWriter(path)
    wanted = config.get("conversation_hooks")  # None: only when the operator allows them
    for hook in OBSERVATION_HOOKS:
        if hook in CONVERSATION_HOOKS and not (
            wanted is True or (wanted is None and api.hook_allowed(hook))
        ):
            continue
        api.on(hook, _handler(writer, hook, never_fail=False))
    if config.get("decision_hooks", True) is not False:
        for hook in DECISION_HOOKS:
            api.on(hook, _handler(writer, hook, never_fail=True), priority=LOW_PRIORITY)
