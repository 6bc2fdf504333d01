"""action-pack, loaded from its installed entry point with agentplug's pytest fixtures.

The action runtime (``agentplug_host.gateway.actions``) is not covered by the fixtures: the tests
drive it with ``asyncio.run`` on the fixture host.
"""

from __future__ import annotations

import asyncio
import random
from typing import Any

import pytest
from agentplug import PluginHost, PluginRecord
from agentplug.actions.flow import FlowResult
from agentplug.actions.model import Action, HandlerOptions, Message
from agentplug.actions.runtime import AgentRuntime
from agentplug.testing.pytest_plugin import Dispatcher, DispatchRecorder, PluginLoader
from agentplug_action_pack import roll_dice, word_count

PLUGIN_ID = "action-pack"


def action_pack_config(**config: Any) -> pytest.MarkDecorator:
    """``plugins.entries.action-pack.config`` for the test's host."""
    return pytest.mark.agentplug_config({"plugins": {"entries": {PLUGIN_ID: {"config": config}}}})


@pytest.fixture(autouse=True)
def action_pack(agentplug_load: PluginLoader) -> PluginRecord:
    """The plugin, registered from its entry point like an installed plugin (not bundled)."""
    return agentplug_load(PLUGIN_ID)


@pytest.fixture
def actions(agentplug_host: PluginHost, action_pack: PluginRecord) -> AgentRuntime:
    """The fixture host's action runtime, after collecting every plugin's actions."""
    runtime: AgentRuntime = agentplug_host.gateway.actions
    assert asyncio.run(runtime.load()) == []
    return runtime


def provided(agentplug_dispatch: Dispatcher) -> list[Action]:
    outcome = agentplug_dispatch("provide_actions", {"reason": "startup"}).outcome
    found: list[Action] = outcome.by_plugin[PLUGIN_ID]
    return found


def run(runtime: AgentRuntime, text: str) -> FlowResult:
    return asyncio.run(runtime.run(text))


def test_provides_roll_dice_and_word_count_through_the_hook(
    agentplug_dispatch: Dispatcher,
) -> None:
    actions = provided(agentplug_dispatch)
    assert [a.name for a in actions] == ["ROLL_DICE", "WORD_COUNT"]
    assert all(isinstance(a, Action) for a in actions)


def test_the_host_action_runtime_registers_them_under_the_plugin_id(
    agentplug_host: PluginHost, agentplug_recorder: DispatchRecorder
) -> None:
    runtime: AgentRuntime = agentplug_host.gateway.actions
    assert asyncio.run(runtime.load()) == []
    registry = runtime.registry
    assert [registry.owner_of(n) for n in ("ROLL_DICE", "WORD_COUNT")] == [PLUGIN_ID] * 2
    # ...collected through one provide_actions dispatch on the fixture host, which the
    # framework's own built-in actions (plugin "builtin") answer too.
    (collect,) = agentplug_recorder.calls("provide_actions")
    assert collect.event == {"reason": "startup"}
    assert collect.statuses == {"builtin": "ok", PLUGIN_ID: "ok"}


def test_sides_is_an_integer_of_at_least_two_defaulting_to_six(
    agentplug_dispatch: Dispatcher,
) -> None:
    sides = provided(agentplug_dispatch)[0].parameter("sides")
    assert sides is not None
    schema = sides.schema_
    assert (schema.type, schema.minimum, schema.default) == ("integer", 2, 6)


@action_pack_config(max_sides=100)
def test_max_sides_config_bounds_the_die(agentplug_dispatch: Dispatcher) -> None:
    sides = provided(agentplug_dispatch)[0].parameter("sides")
    assert sides is not None and sides.schema_.maximum == 100


def test_roll_dice_rolls_within_the_faces_of_the_die(actions: AgentRuntime) -> None:
    flow = run(actions, "ROLL_DICE sides=20")
    assert flow.ok and flow.result is not None and flow.result.data is not None
    assert flow.result.data["sides"] == 20
    assert 1 <= flow.result.data["roll"] <= 20


def test_roll_dice_uses_the_runtime_random_service_when_there_is_one(
    actions: AgentRuntime,
) -> None:
    expected = random.Random(7).randint(1, 1000)
    actions.register_service("random", random.Random(7))
    flow = run(actions, "ROLL_DICE sides=1000")
    assert flow.ok and flow.result is not None
    assert flow.result.data == {"sides": 1000, "roll": expected}
    assert flow.result.text == f"Rolled a d1000: {expected}."


def test_roll_dice_without_sides_rolls_a_d6(actions: AgentRuntime) -> None:
    flow = run(actions, "roll dice please")
    assert flow.action is not None and flow.action.name == "ROLL_DICE"
    assert flow.result is not None and flow.result.text.startswith("Rolled a d6: ")


def test_a_one_sided_die_is_refused_before_the_handler_runs(actions: AgentRuntime) -> None:
    flow = run(actions, "ROLL_DICE sides=1")
    assert flow.outcome == "failed"
    assert flow.result is not None and "below the minimum" in flow.result.text


def test_word_count_counts_words_characters_and_lines(actions: AgentRuntime) -> None:
    flow = run(actions, 'WORD_COUNT text="to be or not to be"')
    assert flow.ok and flow.result is not None
    assert flow.result.text == "6 words, 18 characters."
    assert flow.result.data == {"words": 6, "characters": 18, "lines": 1}


def test_a_simile_selects_word_count(actions: AgentRuntime) -> None:
    flow = run(actions, "COUNT_WORDS text='hello'")
    assert flow.action is not None and flow.action.name == "WORD_COUNT"
    assert flow.result is not None and flow.result.text == "1 word, 5 characters."


def test_word_count_without_text_explains_what_is_missing(actions: AgentRuntime) -> None:
    flow = run(actions, "WORD_COUNT")
    assert flow.outcome == "failed"
    assert flow.result is not None and "Missing required parameter: text" in flow.result.text


def test_the_handlers_check_their_parameters_themselves(actions: AgentRuntime) -> None:
    message = Message(text="")
    counted = word_count(actions, message, None, HandlerOptions())
    rolled = roll_dice(actions, message, None, HandlerOptions(parameters={"sides": "many"}))
    assert (counted.success, rolled.success) == (False, False)
    assert "Missing required parameter: text" in counted.text
    assert "at least 2" in rolled.text
