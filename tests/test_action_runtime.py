"""Plugins contribute actions through ``provide_actions``; the host runs the flow."""

from __future__ import annotations

import asyncio
from typing import Any

from agentplug import PluginHost, hookimpl
from agentplug.actions.model import Action, ActionParameter, ActionResult


def _echo(name: str) -> Action:
    async def handler(runtime: Any, message: Any, state: Any, options: Any) -> ActionResult:
        return ActionResult(success=True, text=f"{name}:{options.parameters.get('word')}")

    return Action(
        name=name,
        description=f"echo a word ({name})",
        handler=handler,
        parameters=[ActionParameter(name="word", description="the word", required=True)],
    )


class Pack:
    @hookimpl
    def provide_actions(self) -> list[Action]:
        return [_echo("ECHO_WORD")]


class Clasher:
    @hookimpl
    def provide_actions(self) -> list[Action]:
        return [_echo("ECHO_WORD")]


def test_plugin_actions_are_registered_under_their_plugin_id() -> None:
    host = PluginHost()
    host.register(Pack(), "pack")
    problems = asyncio.run(host.actions.load())
    assert problems == []
    assert host.actions.registry.owner_of("ECHO_WORD") == "pack"


def test_action_flow_runs_a_plugin_action_from_a_message() -> None:
    host = PluginHost()
    host.register(Pack(), "pack")

    async def go() -> Any:
        await host.actions.load()
        return await host.actions.run('ECHO_WORD {"word": "hello"}')

    result = asyncio.run(go())
    assert result.ok and result.result.text == "ECHO_WORD:hello"


def test_action_name_clash_names_both_owners_and_keeps_the_first() -> None:
    host = PluginHost()
    host.register(Pack(), "pack")
    host.register(Clasher(), "clasher")
    problems = asyncio.run(host.actions.load())
    assert len(problems) == 1 and "pack" in problems[0] and "clasher" in problems[0]
    assert host.actions.registry.owner_of("ECHO_WORD") == "pack"


def test_custom_actions_from_config_join_the_registry() -> None:
    host = PluginHost(
        {
            "customActions": [
                {
                    "id": "say",
                    "name": "SAY_IT",
                    "description": "say something",
                    "parameters": [{"name": "text", "description": "t", "required": True}],
                    "handler": {"type": "shell", "command": "printf '%s' {{text}}"},
                    "enabled": True,
                    "createdAt": "2025-01-01T00:00:00Z",
                    "updatedAt": "2025-01-01T00:00:00Z",
                }
            ]
        }
    )
    assert asyncio.run(host.actions.load()) == []
    assert host.actions.registry.owner_of("SAY_IT") == "custom-actions"
