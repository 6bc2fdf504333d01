"""The conversation part of a scenario file: scripted turns through the real runner.

```json
{"agent": {"system_prompt": "..."},
 "tools": [{"name": "web_search", "description": "...", "result": "3 results"}],
 "conversation": [
   {"name": "first question",
    "inbound": {"content": "hi", "sender_id": "u1"},
    "injections": [{"plugin_id": "prompt-context", "text": "...", "placement": "append"}],
    "model": [{"tool_calls": [{"name": "web_search", "arguments": {"query": "x"}}]}, "Done."],
    "approvals": {"web_search": "allow-once"},
    "expect": {"status": "replied", "reply_contains": "Done"},
    "expect_hooks": ["before_agent_run", "before_tool_call", "message_sending"],
    "expect_decisions": {"before_tool_call": [{"approval_requested_by": "tool-preflight"}]},
    "expect_tools": {"web_search": {"allowed": true, "approval": "allow-once"}},
    "expect_model_saw": {"prompt_contains": ["..."], "system_contains": ["..."]},
    "expect_transcript": [{"role": "user"}, {"role": "tool", "name": "web_search"}],
    "expect_delivery": {"status": "delivered"}}]}
```
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

__all__ = ["ConversationTurn", "ScenarioTool"]


class _Model(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")


class ScenarioTool(_Model):
    """A scripted tool: answers every call with ``result``."""

    name: str
    description: str
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object"})
    result: str | dict[str, Any] = "ok"
    """The text, or ``{"content", "details"?, "is_error"?}``."""
    kind: str | None = None
    """``exec`` makes calls resolve an exec environment."""


class ConversationTurn(_Model):
    """One turn of a scripted conversation (see the module docstring)."""

    name: str | None = None
    inbound: dict[str, Any] | None = None
    """An inbound message (``handle_inbound``: claims, ``message_received``, the turn)."""
    prompt: str | None = None
    """A message the host already routed (``run_turn``); needs ``session_key``."""
    session_key: str | None = None
    heartbeat: bool = False
    injections: list[dict[str, Any]] = Field(default_factory=list)
    """Next-turn injections queued before the turn: ``plugin_id``, ``text``, ..."""
    model: list[Any] = Field(default_factory=list)
    """The scripted model's responses for this turn (scripted provider entries)."""
    approvals: dict[str, Any] | list[str] | None = None
    """Approval decisions for this turn (else the scenario's ``approvals``)."""
    expect: dict[str, Any] | None = None
    """Subset match on the turn result (``status``, ``success``, ``reply``, ``error``,
    ``blocked_by``, ``steps``...), plus ``reply_contains`` / ``reply_excludes``."""
    expect_hooks: list[str] | None = None
    """Hooks that must be dispatched in this order (other hooks may come between)."""
    expect_no_hooks: list[str] | None = None
    """Hooks that must not be dispatched at all."""
    expect_decisions: dict[str, Any] | None = None
    """Per hook: a decision pattern one dispatch must match, or a list matched in order."""
    expect_tools: dict[str, Any] | None = None
    """Per tool: a pattern (``allowed``, ``blocked_by``, ``approval``...) its gate entry
    must match."""
    expect_model_saw: dict[str, Any] | None = None
    """``prompt_contains`` / ``system_contains`` / ``prompt_excludes``: the first model
    request of the turn."""
    expect_transcript: list[dict[str, Any]] | None = None
    """Message patterns the session transcript must contain, in this order."""
    expect_delivery: dict[str, Any] | None = None
    """Subset match on the delivery result (``status``, ``content``, ``reason``...)."""
