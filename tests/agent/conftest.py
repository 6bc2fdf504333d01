"""Helpers for the agent-runner tests: a recording plugin and runner builders."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Mapping
from typing import Any, TypeVar

from agentplug import Gateway, PluginApi
from agentplug.agent import AgentRunner, ScriptedProvider

T = TypeVar("T")

TURN_HOOKS = (
    "inbound_claim",
    "message_received",
    "session_start",
    "agent_turn_prepare",
    "before_model_resolve",
    "before_prompt_build",
    "before_agent_start",
    "before_agent_run",
    "before_agent_reply",
    "heartbeat_prompt_contribution",
    "llm_input",
    "model_call_started",
    "model_call_ended",
    "llm_output",
    "before_tool_call",
    "resolve_exec_env",
    "after_tool_call",
    "tool_result_persist",
    "before_message_write",
    "before_agent_finalize",
    "before_compaction",
    "after_compaction",
    "message_sending",
    "reply_payload_sending",
    "before_dispatch",
    "reply_dispatch",
    "message_sent",
    "agent_end",
)


class Recorder:
    """A real plugin that records every turn hook it receives (returns nothing)."""

    plugin_id = "recorder"

    def __init__(self, hooks: tuple[str, ...] = TURN_HOOKS) -> None:
        self.hooks = hooks
        self.calls: list[tuple[str, Any, Any]] = []

    def register(self, api: PluginApi) -> None:
        for hook in self.hooks:
            api.on(hook, self._make(hook), priority=-1000)

    def _make(self, hook: str) -> Callable[..., None]:
        def handler(event: Any, ctx: Any) -> None:
            self.calls.append((hook, event, ctx))

        return handler

    @property
    def order(self) -> list[str]:
        """Hook names in call order (observe hooks are awaited by the runner)."""
        return [c[0] for c in self.calls]

    def events(self, hook: str) -> list[Any]:
        return [c[1] for c in self.calls if c[0] == hook]

    def ctxs(self, hook: str) -> list[Any]:
        return [c[2] for c in self.calls if c[0] == hook]


def on(hook: str, fn: Callable[..., Any], **kw: Any) -> Callable[[PluginApi], None]:
    """A ``register(api)`` plugin with one handler."""

    def register(api: PluginApi) -> None:
        api.on(hook, fn, **kw)

    return register


def make_runner(
    responses: list[Any] | None = None,
    *,
    plugins: Mapping[str, Any] | None = None,
    config: Mapping[str, Any] | None = None,
    agent: Mapping[str, Any] | None = None,
    recorder: Recorder | None = None,
    **kwargs: Any,
) -> tuple[AgentRunner, ScriptedProvider]:
    """A gateway with ``plugins`` (id -> plugin) and a runner over a scripted provider."""
    gateway = Gateway(dict(config or {}))
    host = gateway.host
    if recorder is not None:
        host.register(recorder, recorder.plugin_id)
    for plugin_id, plugin in (plugins or {}).items():
        host.register(plugin, plugin_id)
    provider = ScriptedProvider(responses or ["Hello!"])
    settings = {"tools": {"actions": False}, **dict(agent or {})}
    return gateway.runner_for(provider, config=settings, **kwargs), provider


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


def tool_call(
    name: str, arguments: Mapping[str, Any] | None = None, call_id: str = "c1"
) -> dict[str, Any]:
    """A scripted response that calls one tool."""
    return {
        "text": "",
        "tool_calls": [{"id": call_id, "name": name, "arguments": dict(arguments or {})}],
    }
