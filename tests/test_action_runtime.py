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
    problems = asyncio.run(host.gateway.actions.load())
    assert problems == []
    assert host.gateway.actions.registry.owner_of("ECHO_WORD") == "pack"


def test_action_flow_runs_a_plugin_action_from_a_message() -> None:
    host = PluginHost()
    host.register(Pack(), "pack")

    async def go() -> Any:
        await host.gateway.actions.load()
        return await host.gateway.actions.run('ECHO_WORD {"word": "hello"}')

    result = asyncio.run(go())
    assert result.ok and result.result.text == "ECHO_WORD:hello"


def test_action_name_clash_names_both_owners_and_keeps_the_first() -> None:
    host = PluginHost()
    host.register(Pack(), "pack")
    host.register(Clasher(), "clasher")
    problems = asyncio.run(host.gateway.actions.load())
    assert len(problems) == 1 and "pack" in problems[0] and "clasher" in problems[0]
    assert host.gateway.actions.registry.owner_of("ECHO_WORD") == "pack"


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
    assert asyncio.run(host.gateway.actions.load()) == []
    assert host.gateway.actions.registry.owner_of("SAY_IT") == "custom-actions"


def test_a_plugin_modules_actions_list_is_registered_like_provide_actions() -> None:
    import types

    module = types.ModuleType("seed_style_plugin")
    module.name = "Seed style"  # type: ignore[attr-defined]
    module.description = "My custom plugin"  # type: ignore[attr-defined]
    module.actions = [_echo("ECHO_SEED")]  # type: ignore[attr-defined]
    module.register = lambda api: None  # type: ignore[attr-defined]
    host = PluginHost()
    host.register(module, "seed")
    problems = asyncio.run(host.gateway.actions.load())
    assert problems == []
    assert host.gateway.actions.registry.owner_of("ECHO_SEED") == "seed"
    result = asyncio.run(host.gateway.actions.run('ECHO_SEED {"word": "hi"}'))
    assert result.result is not None and result.result.text == "ECHO_SEED:hi"


def test_a_plugin_objects_actions_add_to_its_provide_actions() -> None:
    class Both(Pack):
        actions = (_echo("ECHO_DECLARED"),)

    host = PluginHost()
    host.register(Both(), "both")
    assert asyncio.run(host.gateway.actions.load()) == []
    assert {"ECHO_WORD", "ECHO_DECLARED"} <= set(host.gateway.actions.registry.names())
    assert host.gateway.actions.registry.owner_of("ECHO_DECLARED") == "both"


def test_a_plugin_actions_attribute_that_is_not_a_list_is_reported_naming_the_plugin() -> None:
    class Wrong:
        actions = "ECHO"

        def register(self, api: Any) -> None:
            pass

    host = PluginHost()
    host.register(Wrong(), "wrong")
    problems = asyncio.run(host.gateway.actions.load())
    assert problems == [
        "plugin 'wrong': 'actions' must be a list of agentplug.actions.Action, got str"
    ]


def test_the_built_in_actions_arrive_through_provide_actions_as_the_bundled_plugin_builtin() -> (
    None
):
    import asyncio

    from agentplug import Gateway

    gateway = Gateway()
    assert gateway.host.plugins == []  # nothing until actions are used
    asyncio.run(gateway.actions.load())
    (record,) = gateway.host.plugins
    assert (record.plugin_id, record.bundled, record.hooks) == (
        "builtin",
        True,
        ["provide_actions"],
    )
    assert gateway.actions.registry.owner_of("RESTART_AGENT") == "builtin"


def test_a_plugin_action_named_like_a_built_in_is_the_clash_reported() -> None:
    import asyncio

    from agentplug import Action, ActionResult, Gateway, hookimpl

    class Clash:
        @hookimpl
        def provide_actions(self, event: object, ctx: object) -> list[Action]:
            return [
                Action(
                    name="RESTART_AGENT",
                    description="not the real one",
                    handler=lambda rt, m, s, o: ActionResult(success=True),
                )
            ]

    gateway = Gateway()
    gateway.host.register(Clash(), "clash")
    problems = asyncio.run(gateway.actions.load())
    assert gateway.actions.registry.owner_of("RESTART_AGENT") == "builtin"
    assert any("clash" in p and "RESTART_AGENT" in p for p in problems), problems
