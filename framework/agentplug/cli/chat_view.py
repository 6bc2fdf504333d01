"""What ``agentplug chat`` prints: the banner, and each turn's trace for people (compact by
default, every hook and handler with ``--trace``) or for programs (``--json``).

The banner says which model answers and how to choose another, where state is kept, and
which plugins run; with the offline ``scripted`` provider it says plainly that the replies
are scripted (without a script it repeats what you type).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from agentplug.agent.trace import summary_lines

__all__ = [
    "CHOOSE_MODEL",
    "banner_lines",
    "detail_lines",
    "json_lines",
    "model_line",
    "turn_lines",
]

CHOOSE_MODEL = (
    "choose a model with --model PROVIDER/MODEL or agent.model in the config, e.g. "
    "ollama/llama3.2 (a local Ollama) or openai/gpt-4o-mini (OPENAI_API_KEY); "
    "`agentplug chat --demo` shows a tool call, a block and an approval offline"
)
"""The banner's hint on picking a real model."""


def model_line(model: str, *, scripted_from: str | None = None) -> str:
    """``model: <provider/model>`` and what it is; ``scripted_from`` names the script."""
    provider = model.partition("/")[0] if "/" in model else "scripted"
    if provider != "scripted":
        return f"model: {model}"
    if scripted_from:
        return f"model: {model} (offline: replies come from {scripted_from})"
    return f"model: {model} (offline stand-in: no model is configured, so it repeats what you type)"


def banner_lines(
    *,
    model: str,
    plugins: Iterable[str],
    state: str,
    scripted_from: str | None = None,
    warnings: Iterable[str] = (),
    notes: Iterable[tuple[str, str]] = (),
) -> list[str]:
    """The lines ``chat`` prints before the first prompt; ``notes`` are what plugins said
    they do beyond their hooks (``api.note``: a file they write), as ``(plugin, note)``."""
    names = sorted(plugins)
    shown = ", ".join(names) if names else "none"
    lines = [
        f"agentplug chat: {model_line(model, scripted_from=scripted_from)}",
        f"  {CHOOSE_MODEL}",
        f"  plugins ({len(names)}): {shown}",
        f"  {state}",
    ]
    lines += [f"  {plugin}: {note}" for plugin, note in notes]
    lines += [f"  warning: {w}" for w in warnings]
    lines.append("  /quit or end of input ends the session; --trace shows every hook")
    return lines


def turn_lines(result: Any) -> list[str]:
    """The compact trace after a reply: hooks that decided something, model and tool
    calls (a refused or blocked tool with its public reason), then the outcome."""
    lines = [f"  | {line}" for line in summary_lines(result.trace)]
    lines.append(
        f"  | {result.status} in {result.duration_ms:.1f} ms, {result.steps} model call(s)"
    )
    return lines


def _decision(decision: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={_short(v)}" for k, v in decision.items())


def _short(value: Any) -> str:
    if isinstance(value, list):
        return "+".join(str(v) for v in value)
    return str(value)


def detail_lines(result: Any) -> list[str]:
    """``--trace``: every step of the turn in order, each hook with every handler, its
    status and how long it took."""
    lines: list[str] = []
    for entry in result.trace:
        kind, name = entry.get("kind"), entry.get("name")
        ms = f"{entry.get('duration_ms', 0.0):.2f} ms"
        decision = _decision(entry.get("decision") or {})
        label = {"model": "model ", "tool": "tool "}.get(str(kind), "")
        lines.append(f"  | {label}{name}{': ' + decision if decision else ''} ({ms})")
        for handler in entry.get("handlers", []):
            error = f" {handler['error']}" if handler.get("error") else ""
            lines.append(
                f"  |   {handler['plugin_id']}: {handler['status']}{error} "
                f"({handler.get('duration_ms', 0.0):.2f} ms)"
            )
    lines.append(
        f"  | {result.status} in {result.duration_ms:.1f} ms, {result.steps} model call(s)"
    )
    return lines


def json_lines(result: Any) -> list[str]:
    """``--json``: one JSON object per hook, model call or tool call, then one
    ``{"turn": ...}`` summary."""
    lines = [json.dumps(entry, default=str) for entry in result.trace]
    summary = {
        "turn": {
            "run_id": result.run_id,
            "status": result.status,
            "success": result.success,
            "reply": result.reply,
            "error": result.error,
            "duration_ms": round(result.duration_ms, 3),
        }
    }
    lines.append(json.dumps(summary, default=str))
    return lines
