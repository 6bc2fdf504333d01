"""action-pack, exercised through a real PluginHost loading its entry point."""

from __future__ import annotations

import asyncio
import random
from typing import Any

from agentplug import PluginHost
from agentplug.actions.flow import FlowResult
from agentplug.actions.model import Action, HandlerOptions, Message
from agentplug.actions.runtime import AgentRuntime
from agentplug_action_pack import roll_dice, word_count

PLUGIN_ID = "action-pack"


def make_host(config: dict[str, Any] | None = None) -> PluginHost:
    entries = {PLUGIN_ID: {"config": config or {}}}
    host = PluginHost({"plugins": {"allow": [PLUGIN_ID], "entries": entries}})
    host.load_installed()
    assert host.load_errors == []
    return host


def provided(config: dict[str, Any] | None = None) -> list[Action]:
    host = make_host(config)
    outcome = asyncio.run(host.hooks.provide_actions({"reason": "startup"})).outcome
    return outcome.by_plugin[PLUGIN_ID]


def loaded(services: dict[str, object] | None = None) -> AgentRuntime:
    """The host's action runtime after collecting every plugin's actions."""
    runtime: AgentRuntime = make_host().actions
    for name, service in (services or {}).items():
        runtime.register_service(name, service)
    assert asyncio.run(runtime.load()) == []
    return runtime


def run(text: str, services: dict[str, object] | None = None) -> FlowResult:
    return asyncio.run(loaded(services).run(text))


def test_provides_roll_dice_and_word_count_through_the_hook() -> None:
    actions = provided()
    assert [a.name for a in actions] == ["ROLL_DICE", "WORD_COUNT"]
    assert all(isinstance(a, Action) for a in actions)


def test_the_host_action_runtime_registers_them_under_the_plugin_id() -> None:
    registry = loaded().registry
    assert [registry.owner_of(n) for n in ("ROLL_DICE", "WORD_COUNT")] == [PLUGIN_ID] * 2


def test_sides_is_an_integer_of_at_least_two_defaulting_to_six() -> None:
    sides = provided()[0].parameter("sides")
    assert sides is not None
    schema = sides.schema_
    assert (schema.type, schema.minimum, schema.default) == ("integer", 2, 6)


def test_max_sides_config_bounds_the_die() -> None:
    sides = provided({"max_sides": 100})[0].parameter("sides")
    assert sides is not None and sides.schema_.maximum == 100


def test_roll_dice_rolls_within_the_faces_of_the_die() -> None:
    flow = run("ROLL_DICE sides=20")
    assert flow.ok and flow.result is not None and flow.result.data is not None
    assert flow.result.data["sides"] == 20
    assert 1 <= flow.result.data["roll"] <= 20


def test_roll_dice_uses_the_runtime_random_service_when_there_is_one() -> None:
    first = run("ROLL_DICE sides=1000", {"random": random.Random(7)})
    second = run("ROLL_DICE sides=1000", {"random": random.Random(7)})
    assert first.result is not None and second.result is not None
    assert first.result.text == second.result.text


def test_roll_dice_without_sides_rolls_a_d6() -> None:
    flow = run("roll dice please")
    assert flow.action is not None and flow.action.name == "ROLL_DICE"
    assert flow.result is not None and flow.result.text.startswith("Rolled a d6: ")


def test_a_one_sided_die_is_refused_before_the_handler_runs() -> None:
    flow = run("ROLL_DICE sides=1")
    assert flow.outcome == "failed"
    assert flow.result is not None and "below the minimum" in flow.result.text


def test_word_count_counts_words_characters_and_lines() -> None:
    flow = run('WORD_COUNT text="to be or not to be"')
    assert flow.ok and flow.result is not None
    assert flow.result.text == "6 words, 18 characters."
    assert flow.result.data == {"words": 6, "characters": 18, "lines": 1}


def test_a_simile_selects_word_count() -> None:
    flow = run("COUNT_WORDS text='hello'")
    assert flow.action is not None and flow.action.name == "WORD_COUNT"
    assert flow.result is not None and flow.result.text == "1 word, 5 characters."


def test_word_count_without_text_explains_what_is_missing() -> None:
    flow = run("WORD_COUNT")
    assert flow.outcome == "failed"
    assert flow.result is not None and "Missing required parameter: text" in flow.result.text


def test_the_handlers_check_their_parameters_themselves() -> None:
    rt, message = loaded(), Message(text="")
    counted = word_count(rt, message, None, HandlerOptions())
    rolled = roll_dice(rt, message, None, HandlerOptions(parameters={"sides": "many"}))
    assert (counted.success, rolled.success) == (False, False)
    assert "Missing required parameter: text" in counted.text
    assert "at least 2" in rolled.text
