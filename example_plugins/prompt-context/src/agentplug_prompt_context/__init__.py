"""prompt-context: operator context for every prompt, and next-turn injections for the next one.

Two ``@hookimpl`` handlers:

- ``before_prompt_build`` prepends the operator's ``context`` text to the prompt and appends a
  line to the system prompt (``system_context``, else today's UTC date).
- ``agent_turn_prepare`` turns the next-turn injections the host drained for this turn
  (``event.injections``: ``{text, placement}`` items) into ``prepend_context`` (or
  ``append_context`` for ``placement: "append_context"``).

And through ``register(api)``, the other half of next-turn injections: when a tool call of
a session fails (``after_tool_call``), it queues a note with
``api.session.workflow.enqueue_next_turn_injection`` so the model hears about it, once, on
its next turn.

Both are prompt hooks: ``plugins.entries.prompt-context.hooks.allow_prompt_injection = false``
switches them (and the queued notes) off without uninstalling the plugin.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from agentplug import hookimpl
from agentplug_hookspecs.agent import (
    ContextResult,
    PromptBuildEvent,
    PromptBuildResult,
    TurnPrepareEvent,
)
from agentplug_hookspecs.tools import AfterToolCallEvent, ToolContext

__all__ = [
    "APPEND_PLACEMENTS",
    "DEFAULT_MAX_CHARS",
    "FAILURE_NOTE_TTL_MS",
    "PLUGIN_ID",
    "agent_turn_prepare",
    "before_prompt_build",
    "register",
    "utc_now",
]

PLUGIN_ID = "prompt-context"
APPEND_PLACEMENTS = frozenset({"append_context", "append", "appendContext"})
"""Placements that go after the prompt; every other (or no) placement goes before it."""
DEFAULT_MAX_CHARS = 8_000
"""Default ``max_chars``: the most context one handler adds to one field."""


FAILURE_NOTE_TTL_MS = 15 * 60 * 1000
"""A failure note older than this is stale and dropped undelivered."""


def utc_now() -> dt.datetime:
    """The clock behind the default system line (tests replace it)."""
    return dt.datetime.now(dt.UTC)


def _text(config: Mapping[str, Any], key: str) -> str | None:
    value = config.get(key)
    return (value.strip() or None) if isinstance(value, str) else None


def _max_chars(config: Mapping[str, Any]) -> int:
    value = config.get("max_chars", DEFAULT_MAX_CHARS)
    valid = isinstance(value, int) and not isinstance(value, bool) and value > 0
    return value if valid else DEFAULT_MAX_CHARS


def _bounded(text: str, limit: int) -> str:
    # Context competes with the conversation for the model's window: cap what we add.
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


@hookimpl
def before_prompt_build(event: PromptBuildEvent) -> PromptBuildResult:
    """Prepend the operator's ``context``; append ``system_context`` (or the date)."""
    config = event.context.plugin_config
    limit = _max_chars(config)
    context = _text(config, "context")
    system = _text(config, "system_context")
    if system is None:
        system = f"Current date (UTC): {utc_now().date().isoformat()}."
    return PromptBuildResult(
        prepend_context=_bounded(context, limit) if context else None,
        append_system_context=_bounded(system, limit),
    )


@hookimpl
def agent_turn_prepare(event: TurnPrepareEvent) -> ContextResult | None:
    """Turn the drained next-turn injections into context for this turn.

    Items that are not ``{text: <non-empty str>, ...}`` are skipped: one malformed
    injection must not cost the others their single delivery.
    """
    before: list[str] = []
    after: list[str] = []
    for item in event.injections:
        if not isinstance(item, Mapping):
            continue
        text = item.get("text")
        if not isinstance(text, str) or not text.strip():
            continue
        target = after if item.get("placement") in APPEND_PLACEMENTS else before
        target.append(text.strip())
    if not before and not after:
        return None
    limit = _max_chars(event.context.plugin_config)
    return ContextResult(
        prepend_context=_bounded("\n\n".join(before), limit) if before else None,
        append_context=_bounded("\n\n".join(after), limit) if after else None,
    )


def register(api: Any) -> None:
    """Queue a next-turn injection when a tool call of a session fails.

    The model hears about the failure exactly once, on its next turn (the host drains the
    queue before the prompt hooks and ``agent_turn_prepare`` above renders it); a retried
    notification for the same tool call collapses to the first (idempotency key).
    """

    def remember_failure(event: AfterToolCallEvent, ctx: ToolContext) -> None:
        if not event.error or not ctx.session_key:
            return
        api.session.workflow.enqueue_next_turn_injection(
            ctx.session_key,
            _bounded(f"Note: the last {event.tool_name} call failed ({event.error}).", 500),
            placement="prepend",
            ttl_ms=FAILURE_NOTE_TTL_MS,
            idempotency_key=f"tool-failure:{event.tool_call_id or event.tool_name}",
        )

    api.on("after_tool_call", remember_failure)
