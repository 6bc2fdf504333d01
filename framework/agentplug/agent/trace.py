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
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentplug.core.host import PluginHost
    from agentplug.core.results import DispatchResult

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


@dataclass
class TurnTrace:
    """Everything one turn did, in order."""

    entries: list[TraceEntry] = field(default_factory=list)
    began: float = field(default_factory=time.perf_counter)
    """``time.perf_counter()`` when the trace began (entries' ``start_ms`` count from it)."""

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
        self.entries.append(entry)
        return entry

    def of(self, hook: str) -> list[TraceEntry]:
        """Entries of ``hook``."""
        return [e for e in self.entries if e.kind == "hook" and e.name == hook]

    def to_json(self) -> list[dict[str, Any]]:
        """Every entry as JSON-compatible dicts."""
        return [e.to_json() for e in self.entries]


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


def decision_of(outcome: Any) -> dict[str, Any]:
    """Safe decision facts of a reduced outcome (no content, no confidential reason)."""
    # Pydantic models keep their fields in ``__dict__``: reading it avoids the (slow)
    # attribute fallback for the fields a given outcome does not have.
    values: dict[str, Any] = getattr(outcome, "__dict__", None) or {}
    out: dict[str, Any] = {}
    for name in _DECISION_FIELDS:
        value = values.get(name)
        if value in (None, False, [], "") or (name == "action" and value == "continue"):
            continue
        out[name] = list(value) if isinstance(value, list) else value
    if values.get("outcome") == "block":
        out["blocked"] = True
        out["blocked_by"] = values.get("blocked_by")
    approval = values.get("approval")
    plugin_id = getattr(approval, "plugin_id", None) if approval is not None else None
    if plugin_id:
        out["approval_requested_by"] = plugin_id
    return out


def _record(name: str, result: DispatchResult[Any], started: float) -> None:
    trace = _CURRENT.get()
    if trace is None:
        return
    handlers = [
        {
            "plugin_id": h.plugin_id,
            "status": status.value,
            "duration_ms": round(seconds * 1000, 3),
            **({"error": error} if error else {}),
        }
        for h, status, seconds, error in result.records
    ]
    trace.entries.append(
        TraceEntry(
            "hook",
            result.hook or name,
            (time.perf_counter() - started) * 1000,
            handlers,
            decision_of(result.outcome),
            max(0.0, (started - trace.began) * 1000),
        )
    )


def install_tap(host: PluginHost) -> None:
    """Wrap ``host.dispatch`` / ``host.call_sync`` once so traced turns see every hook."""
    if getattr(host, _TAPPED, False):
        return
    inner_dispatch = host.dispatch
    inner_call_sync = host.call_sync

    async def dispatch(hook: str, event: Any = None, ctx: Any = None) -> DispatchResult[Any]:
        if _CURRENT.get() is None:
            return await inner_dispatch(hook, event, ctx)
        started = time.perf_counter()
        result = await inner_dispatch(hook, event, ctx)
        _record(hook, result, started)
        return result

    def call_sync(hook: str, event: Any = None, ctx: Any = None) -> DispatchResult[Any]:
        if _CURRENT.get() is None:
            return inner_call_sync(hook, event, ctx)
        started = time.perf_counter()
        result = inner_call_sync(hook, event, ctx)
        _record(hook, result, started)
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
