"""Every action says whether it has side effects; saying nothing means it has some."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

from agentplug import PluginHost
from agentplug.actions.catalogue import list_actions
from agentplug.actions.custom import def_to_action, load_custom_actions
from agentplug.actions.model import Action, ActionResult

from tests.actions.test_custom_actions import SEED_WEATHER

SIDE_EFFECT_FREE_BUILTINS = {"CORE_STATUS", "LIST_EJECTED_PLUGINS", "PLAY_EMOTE"}


def _action(**kwargs: Any) -> Action:
    return Action(
        name="LOOK_UP",
        description="Look something up.",
        handler=lambda rt, msg, st, opts: ActionResult(success=True),
        **kwargs,
    )


def test_an_action_that_declares_nothing_has_side_effects() -> None:
    assert _action().side_effects is True


def test_an_action_may_declare_that_it_has_no_side_effects() -> None:
    assert _action(side_effects=False).side_effects is False


def test_only_the_read_only_and_conversational_builtins_declare_no_side_effects() -> None:
    host = PluginHost({"plugins": {"enabled": False}})
    asyncio.run(host.gateway.actions.load())
    builtins = {
        row.name: row.side_effects
        for row in list_actions(host.gateway.actions)
        if row.source == "builtin"
    }
    assert "RESTART_AGENT" in builtins and "SHELL_COMMAND" in builtins
    assert {name for name, side_effects in builtins.items() if not side_effects} == (
        SIDE_EFFECT_FREE_BUILTINS
    )


def test_a_custom_action_has_side_effects_unless_its_definition_says_otherwise() -> None:
    quiet = copy.deepcopy(SEED_WEATHER) | {"id": "weather-quiet", "sideEffects": False}
    assert def_to_action(copy.deepcopy(SEED_WEATHER)).side_effects is True
    assert def_to_action(quiet).side_effects is False


def test_a_custom_side_effects_declaration_must_be_a_boolean() -> None:
    entry = copy.deepcopy(SEED_WEATHER) | {"sideEffects": "no"}
    result = load_custom_actions({"customActions": [entry]})
    assert not result.actions
    assert [e.field for e in result.errors] == ["sideEffects"]
