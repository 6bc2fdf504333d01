"""The turn trace: which hooks ran, who decided what, how long it took.

The runner records every dispatch of a turn (its own and those the services make for
it: the tool-call gate, the reply dispatcher...) through a tap installed once on the
host (:func:`install_tap`); the tap is a no-op outside a traced turn. Entries hold
only non-confidential facts: hook names, plugin ids, statuses, decision flags, who
blocked / rewrote / asked approval, timings (each entry's start, as milliseconds since
the turn began, and its duration), and the public reason of a blocked tool call (the text
the model reads as the call's result). Never content, parameters or the confidential
``before_agent_run`` reason.
"""

from __future__ import annotations

import contextvars
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agentplug.core.results import HandlerStatus

if TYPE_CHECKING:
    from agentplug.core.host import PluginHost
    from agentplug.core.results import DispatchResult, Record

__all__ = ["TraceEntry", "TurnTrace", "current_trace", "install_tap"]

_CURRENT: contextvars.ContextVar[TurnTrace | None] = contextvars.ContextVar(
    "agentplug_turn_trace", default=None
)
_TAPPED = "_agentplug_trace_tap"


@dataclass
class TraceEntry:
    """One step of a turn: a hook dispatch or a runner step (model call, tool)."""

    kind: str
    """``hook``, ``model``, ``tool`` or ``turn``."""
    name: str
    duration_ms: float = 0.0
    handlers: list[dict[str, Any]] = field(default_factory=list)
    decision: dict[str, Any] = field(default_factory=dict)
    start_ms: float = 0.0
    """When the step began, in milliseconds since the turn's trace began (a time axis)."""

    def to_json(self) -> dict[str, Any]:
        """A JSON-compatible dict."""
        out: dict[str, Any] = {
            "kind": self.kind,
            "name": self.name,
            "start_ms": round(self.start_ms, 3),
            "duration_ms": round(self.duration_ms, 3),
        }
        if self.handlers:
            out["handlers"] = self.handlers
        if self.decision:
            out["decision"] = self.decision
        return out


def _same(value: Any) -> Any:
    return value


_Dispatch = tuple[str, float, "list[Record]", "dict[str, Any] | None", float]
"""A hook dispatch as the tap keeps it: hook, milliseconds, the dispatch's own list of
handler records (kept, not copied), the decision facts (``None``: none), the start in
milliseconds since the trace began."""


class TurnTrace:
    """Everything one turn did, in order.

    A hook dispatch is kept as the dispatcher returned it (the hook, the time, the
    dispatch's own list of handler records, the decision facts) and becomes a
    :class:`TraceEntry` or JSON only when read (:attr:`entries`, :meth:`to_json`): a turn
    dispatches about 30 hooks, with 10 plugins about 280 handler lines, and a thousand
    turns in flight holding those as objects keep the garbage collector busy.
    """

    __slots__ = ("_items", "began")

    def __init__(self, entries: list[TraceEntry] | None = None) -> None:
        self._items: list[TraceEntry | _Dispatch] = list(entries or [])
        self.began = time.perf_counter()
        """``time.perf_counter()`` when the trace began (entries' ``start_ms`` count from
        it)."""

    @property
    def entries(self) -> list[TraceEntry]:
        """Every step as a :class:`TraceEntry` (built on first read; the list is live)."""
        items = self._items
        for index, item in enumerate(items):
            if type(item) is tuple:
                items[index] = _entry(item)
        return items  # type: ignore[return-value]  # every item is an entry now

    @property
    def hooks(self) -> list[str]:
        """Hook names in dispatch order (with repeats)."""
        return [e.name for e in self.entries if e.kind == "hook"]

    def add(
        self,
        kind: str,
        name: str,
        duration_ms: float = 0.0,
        *,
        began: float | None = None,
        **decision: Any,
    ) -> TraceEntry:
        """Record a runner step that took ``duration_ms`` and began at ``began`` (a
        ``time.perf_counter()`` reading; default: ``duration_ms`` before now)."""
        if began is None:
            start_ms = (time.perf_counter() - self.began) * 1000 - duration_ms
        else:
            start_ms = (began - self.began) * 1000
        entry = TraceEntry(
            kind,
            name,
            duration_ms,
            [],
            {k: v for k, v in decision.items() if v is not None},
            max(0.0, start_ms),
        )
        self._items.append(entry)
        return entry

    def record(self, hook: str, result: DispatchResult[Any], started: float) -> None:
        """Record one hook dispatch that began at ``started`` (``time.perf_counter``)."""
        self._items.append(
            (
                result.hook or hook,
                (time.perf_counter() - started) * 1000,
                result.records or _NONE,
                decision_of(result.outcome),
                max(0.0, (started - self.began) * 1000),
            )
        )

    def of(self, hook: str) -> list[TraceEntry]:
        """Entries of ``hook``."""
        return [e for e in self.entries if e.kind == "hook" and e.name == hook]

    def to_json(self, clean: Callable[[Any], Any] = _same) -> list[dict[str, Any]]:
        """Every entry as JSON-compatible dicts.

        ``clean`` (e.g. :func:`~agentplug.core.redaction.scrub_data`) is applied to what
        may carry text from outside: handler errors, decision facts and the runner's own
        steps (a tool name, a refusal); hook names, plugin ids and statuses are the
        host's own and are passed as they are.
        """
        return [
            _dispatch_json(item, clean) if type(item) is tuple else clean(item.to_json())  # type: ignore[union-attr]
            for item in self._items
        ]


def _handlers(records: list[Record], clean: Callable[[Any], Any] = _same) -> list[dict[str, Any]]:
    out = []
    for h, status, seconds, error in records:
        line = {
            "plugin_id": h.plugin_id,
            "status": _STATUS[status],
            "duration_ms": round(seconds * 1000, 3),
        }
        if error:
            line["error"] = clean(error)
        out.append(line)
    return out


def _entry(item: _Dispatch) -> TraceEntry:
    name, duration_ms, records, decision, start_ms = item
    return TraceEntry("hook", name, duration_ms, _handlers(records), decision or {}, start_ms)


def _dispatch_json(item: _Dispatch, clean: Callable[[Any], Any]) -> dict[str, Any]:
    name, duration_ms, records, decision, start_ms = item
    out: dict[str, Any] = {
        "kind": "hook",
        "name": name,
        "start_ms": round(start_ms, 3),
        "duration_ms": round(duration_ms, 3),
    }
    if records:
        out["handlers"] = _handlers(records, clean)
    if decision:
        out["decision"] = clean(decision)
    return out


def current_trace() -> TurnTrace | None:
    """The trace of the turn running in this task, if any."""
    return _CURRENT.get()


def bind_trace(trace: TurnTrace) -> contextvars.Token[TurnTrace | None]:
    """Make ``trace`` the current trace (the runner does this for each turn)."""
    return _CURRENT.set(trace)


def unbind_trace(token: contextvars.Token[TurnTrace | None]) -> None:
    """Undo :func:`bind_trace`."""
    _CURRENT.reset(token)


_DECISION_FIELDS = (
    "blocked",
    "blocked_by",
    "cancelled",
    "cancelled_by",
    "handled",
    "plugin_id",
    "changed_by",
    "decided_by",
    "action",
)
_STATUS = {status: status.value for status in HandlerStatus}
_NONE: list[Record] = []
"""Shared by every dispatch without handlers (never changed)."""
_fields_of: dict[type, tuple[tuple[str, ...], bool, bool]] = {}


def _decision_fields(kind: type) -> tuple[tuple[str, ...], bool, bool]:
    """The decision fields an outcome class has, and whether it has ``outcome`` and
    ``approval`` (looked up once per class: most outcomes have none of them)."""
    found = _fields_of.get(kind)
    if found is None:
        names = getattr(kind, "model_fields", None)
        if names is None:  # not a pydantic model: look for every name
            found = (_DECISION_FIELDS, True, True)
        else:
            found = (
                tuple(n for n in _DECISION_FIELDS if n in names),
                "outcome" in names,
                "approval" in names,
            )
        _fields_of[kind] = found
    return found


def decision_of(outcome: Any) -> dict[str, Any] | None:
    """Safe decision facts of a reduced outcome (no content, no confidential reason);
    ``None`` when there are none."""
    fields, has_outcome, has_approval = _decision_fields(type(outcome))
    if not (fields or has_outcome or has_approval):
        return None
    # Pydantic models keep their fields in ``__dict__``: reading it avoids the (slow)
    # attribute fallback for the fields a given outcome does not have.
    values: dict[str, Any] = getattr(outcome, "__dict__", None) or {}
    out: dict[str, Any] = {}
    for name in fields:
        value = values.get(name)
        if value in (None, False, [], "") or (name == "action" and value == "continue"):
            continue
        out[name] = list(value) if isinstance(value, list) else value
    if has_outcome and values.get("outcome") == "block":
        out["blocked"] = True
        out["blocked_by"] = values.get("blocked_by")
    approval = values.get("approval") if has_approval else None
    plugin_id = getattr(approval, "plugin_id", None) if approval is not None else None
    if plugin_id:
        out["approval_requested_by"] = plugin_id
    return out or None


def install_tap(host: PluginHost) -> None:
    """Wrap ``host.dispatch`` / ``host.call_sync`` once so traced turns see every hook."""
    if getattr(host, _TAPPED, False):
        return
    inner_dispatch = host.dispatch
    inner_call_sync = host.call_sync

    async def dispatch(hook: str, event: Any = None, ctx: Any = None) -> DispatchResult[Any]:
        trace = _CURRENT.get()
        if trace is None:
            return await inner_dispatch(hook, event, ctx)
        started = time.perf_counter()
        result = await inner_dispatch(hook, event, ctx)
        trace.record(hook, result, started)
        return result

    def call_sync(hook: str, event: Any = None, ctx: Any = None) -> DispatchResult[Any]:
        trace = _CURRENT.get()
        if trace is None:
            return inner_call_sync(hook, event, ctx)
        started = time.perf_counter()
        result = inner_call_sync(hook, event, ctx)
        trace.record(hook, result, started)
        return result

    host.dispatch = dispatch  # type: ignore[method-assign]
    host.call_sync = call_sync  # type: ignore[method-assign]
    setattr(host, _TAPPED, True)


def summary_lines(entries: list[dict[str, Any]]) -> list[str]:
    """A compact, human-readable trace: one line per hook that did something, per model
    call and per tool call (hooks whose handlers all passed silently are folded into a
    ``hooks:`` line)."""
    lines: list[str] = []
    quiet: list[str] = []

    def flush() -> None:
        if quiet:
            lines.append("hooks: " + " > ".join(quiet))
            quiet.clear()

    for entry in entries:
        kind, name = entry.get("kind"), entry.get("name")
        ms = f"{entry.get('duration_ms', 0.0):.1f} ms"
        decision = dict(entry.get("decision") or {})
        if kind == "hook":
            failed = [
                f"{h['plugin_id']} {h['status']}"
                for h in entry.get("handlers", [])
                if h.get("status") not in ("ok", "skipped")
            ]
            if not decision and not failed:
                if entry.get("handlers"):
                    quiet.append(str(name))
                continue
            flush()
            parts = [f"{k}={_short(v)}" for k, v in decision.items()]
            parts += [f"failed: {f}" for f in failed]
            lines.append(f"{name}: {', '.join(parts)} ({ms})")
        else:
            flush()
            parts = [f"{k}={_short(v)}" for k, v in decision.items()]
            label = kind if kind in ("model", "subagent") else "tool"
            lines.append(f"{label} {name}: {', '.join(parts) or 'ok'} ({ms})")
    flush()
    return lines


def _short(value: Any) -> str:
    if isinstance(value, list):
        return "+".join(str(v) for v in value)
    return str(value)
