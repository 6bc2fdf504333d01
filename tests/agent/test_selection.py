"""LLM action selector and parameter extractor with scripted model answers."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from agentplug.actions.flow import SimpleActionRuntime, run_action_flow
from agentplug.actions.model import Action, ActionExample, ActionParameter, ActionResult
from agentplug.actions.registry import ActionRegistry
from agentplug.agent import ScriptedProvider
from agentplug.agent.selection import LlmActionSelector, LlmParameterExtractor


def _handler(name: str) -> Any:
    def handler(runtime: Any, message: Any, state: Any, options: Any) -> ActionResult:
        return ActionResult(
            success=True, text=f"{name} {json.dumps(options.parameters, sort_keys=True)}"
        )

    return handler


def _action(
    name: str,
    description: str,
    params: list[dict[str, Any]],
    similes: tuple[str, ...] = (),
    examples: Any = (),
) -> Action:
    return Action(
        name=name,
        description=description,
        handler=_handler(name),
        similes=similes,
        parameters=[ActionParameter.model_validate(p) for p in params],
        examples=examples,
    )


def _registry() -> ActionRegistry:
    registry = ActionRegistry()
    for action in [
        _action(
            "CHECK_WEATHER",
            "Check the current weather for a city",
            [{"name": "city", "description": "the city", "required": True}],
            similes=("WEATHER", "FORECAST"),
            examples=[
                [
                    ActionExample(
                        name="user", text="is it raining in Rome?", actions=["CHECK_WEATHER"]
                    )
                ]
            ],
        ),
        _action(
            "SEND_EMAIL",
            "Send an e-mail",
            [
                {
                    "name": "to",
                    "required": True,
                    "schema": {"type": "string", "pattern": "^[^@]+@[^@]+$"},
                },
                {"name": "subject", "required": True},
            ],
        ),
        _action(
            "SET_TIMER",
            "Start a countdown timer",
            [
                {
                    "name": "minutes",
                    "required": True,
                    "schema": {"type": "integer", "minimum": 1, "maximum": 600},
                }
            ],
            similes=("COUNTDOWN",),
        ),
        _action(
            "ROLL_DICE",
            "Roll dice",
            [{"name": "sides", "schema": {"type": "integer", "default": 6}}],
        ),
        _action(
            "TRANSLATE",
            "Translate a text",
            [
                {"name": "text", "required": True},
                {
                    "name": "language",
                    "required": True,
                    "schema": {"type": "string", "enum": ["fr", "es", "de"]},
                },
            ],
        ),
        _action("CORE_STATUS", "Report the agent's status", []),
        _action(
            "CREATE_REMINDER",
            "Remind the user of something at a time",
            [{"name": "what", "required": True}, {"name": "when", "required": True}],
        ),
        _action("PLAY_MUSIC", "Play a song or artist", [{"name": "query", "required": True}]),
    ]:
        registry.register(action, "host")
    return registry


def _flow(answers: list[Any], text: str) -> tuple[Any, ScriptedProvider, LlmParameterExtractor]:
    provider = ScriptedProvider(answers)
    extractor = LlmParameterExtractor(provider, "m")
    flow = asyncio.run(
        run_action_flow(
            SimpleActionRuntime(),
            _registry(),
            text,
            selector=LlmActionSelector(provider, "m"),
            extractor=extractor,
        )
    )
    return flow, provider, extractor


PLAIN_LANGUAGE = [
    ("what is the weather in Paris", "CHECK_WEATHER", {"city": "Paris"}),
    ("will I need an umbrella in London today?", "CHECK_WEATHER", {"city": "London"}),
    (
        "email bob@example.org that the invoice is late",
        "SEND_EMAIL",
        {"to": "bob@example.org", "subject": "the invoice is late"},
    ),
    ("wake me up in 25 minutes", "SET_TIMER", {"minutes": 25}),
    ("start a countdown of 3 minutes for the tea", "SET_TIMER", {"minutes": 3}),
    ("roll a twenty-sided die", "ROLL_DICE", {"sides": 20}),
    (
        "how do you say good morning in Spanish",
        "TRANSLATE",
        {"text": "good morning", "language": "es"},
    ),
    ("say thank you in German", "TRANSLATE", {"text": "thank you", "language": "de"}),
    (
        "remind me to call mum tomorrow at 9",
        "CREATE_REMINDER",
        {"what": "call mum", "when": "tomorrow at 9"},
    ),
    ("put on some Miles Davis", "PLAY_MUSIC", {"query": "Miles Davis"}),
    ("are you up and running?", "CORE_STATUS", {}),
    ("roll the dice", "ROLL_DICE", {"sides": 6}),
]


@pytest.mark.parametrize(("text", "action", "params"), PLAIN_LANGUAGE)
def test_the_llm_selector_and_extractor_understand_plain_language(
    text: str, action: str, params: dict[str, Any]
) -> None:
    extracted = {
        k: v for k, v in params.items() if not (action == "ROLL_DICE" and text == "roll the dice")
    }
    answers: list[Any] = [
        f'{{"action": "{action}"}}',
        "```json\n" + json.dumps(extracted) + "\n```",
    ]
    flow, _, _ = _flow(answers, text)
    assert flow.outcome == "success", flow.result
    assert flow.action is not None and flow.action.name == action
    assert flow.parameters == params


def test_the_selector_prompt_shows_similes_and_examples() -> None:
    _, provider, _ = _flow(['{"action": "CHECK_WEATHER"}', '{"city": "Oslo"}'], "weather in Oslo?")
    system = provider.requests[0].messages[0]["content"]
    assert "also called: WEATHER, FORECAST" in system
    assert 'user: "is it raining in Rome?"' in system


def test_the_model_naming_a_simile_selects_its_action() -> None:
    flow, _, _ = _flow(['{"action": "countdown"}', '{"minutes": 5}'], "five minutes please")
    assert flow.action is not None and flow.action.name == "SET_TIMER"


def test_a_failed_extraction_is_asked_once_more_with_the_error() -> None:
    flow, provider, extractor = _flow(
        ['{"action": "SET_TIMER"}', '{"minutes": "a while"}', '{"minutes": 10}'],
        "a timer for ten minutes",
    )
    assert flow.ok and flow.parameters == {"minutes": 10}
    assert extractor.asked == 2
    assert "was not valid" in provider.requests[2].messages[-1]["content"]


def test_a_parameter_still_missing_after_the_second_ask_is_reported() -> None:
    flow, _, extractor = _flow(
        ['{"action": "CHECK_WEATHER"}', "{}", "no idea"], "what's the weather like"
    )
    assert flow.outcome == "failed" and extractor.asked == 2
    assert flow.result is not None and "city" in flow.result.text


def test_the_model_saying_no_action_fits_is_no_match() -> None:
    flow, _, _ = _flow(['{"action": null}'], "tell me a joke")
    assert flow.outcome == "no_match"


def test_structured_input_needs_no_model_call() -> None:
    flow, provider, extractor = _flow([], 'CHECK_WEATHER {"city": "Lima"}')
    assert flow.ok and flow.parameters == {"city": "Lima"}
    assert provider.requests == [] and extractor.asked == 0


def test_a_provider_failure_falls_back_to_the_deterministic_selector() -> None:
    flow, _, _ = _flow([{"error": "down"}], "CORE_STATUS please")
    assert flow.action is not None and flow.action.name == "CORE_STATUS"


def test_an_invented_parameter_is_never_passed_to_the_handler() -> None:
    flow, _, _ = _flow(['{"action": "PLAY_MUSIC"}', '{"query": "jazz", "volume": 11}'], "play jazz")
    assert flow.parameters == {"query": "jazz"}
