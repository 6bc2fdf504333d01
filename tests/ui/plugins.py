"""Real plugins and tools the control room's tests run a gateway with."""

from __future__ import annotations

from typing import Any

from agentplug import PluginApi

CANARY = "CANARY-31c-confidential-run-reason"
"""A ``before_agent_run`` block reason that must never reach the page."""
SCRIPT = "<script>window.__pwned = 1</script>"
IMG = '<img src="x" onerror="window.__pwned = 2">'


def echo(text: str) -> str:
    """Echo the text back."""
    return f"echoed {text}"


def call(tool: str = "echo", call_id: str = "c1", **arguments: Any) -> dict[str, Any]:
    """A scripted model response that calls one tool."""
    return {"text": "", "tool_calls": [{"id": call_id, "name": tool, "arguments": arguments}]}


class Gate:
    """Asks approval for every ``echo`` call (title, description, severity of its own)."""

    plugin_id = "gate"
    name = "Echo gate"
    description = "Asks a person before the model may echo anything."

    def __init__(self, title: str = "Echo something", description: str | None = None) -> None:
        self.title = title
        self.approval_description = description

    def register(self, api: PluginApi) -> None:
        api.on("before_tool_call", self.before_tool_call, priority=20)

    def before_tool_call(self, event: Any, ctx: Any) -> dict[str, Any] | None:
        if event.tool_name != "echo":
            return None
        text = event.params.get("text", "")
        return {
            "require_approval": {
                "title": self.title,
                "description": self.approval_description or f"Allow echoing {text!r}",
                "severity": "warning",
                "timeout_ms": 120_000,
            }
        }


class Hostile:
    """A plugin whose display name and description are markup (they must show as text)."""

    plugin_id = "hostile"
    name = f"Hostile {SCRIPT}{IMG}"
    description = f"Description {IMG}"

    def register(self, api: PluginApi) -> None:
        api.on("message_received", lambda event: None)


class RunGuard:
    """Blocks every run with a confidential reason (and a public message)."""

    plugin_id = "run-guard"

    def register(self, api: PluginApi) -> None:
        api.on("before_agent_run", self.guard)

    def guard(self, event: Any) -> dict[str, Any]:
        return {"outcome": "block", "reason": CANARY, "message": "[withheld by policy]"}


class ResetWatcher:
    """Keeps per-session state and records every ``before_reset``."""

    plugin_id = "reset-watcher"

    def __init__(self) -> None:
        self.resets: list[tuple[str, str | None]] = []

    def register(self, api: PluginApi) -> None:
        self.notes = api.session.state.register_session_extension(
            "notes", default={"count": 0}, description="how many turns ran"
        )
        api.on("before_reset", lambda event: self.resets.append((event.session_key, event.source)))
        api.on("agent_end", self.count)

    def count(self, event: Any, ctx: Any) -> None:
        key = ctx.session_key
        self.notes.patch(key, {"count": self.notes.get(key)["count"] + 1})
