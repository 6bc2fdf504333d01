"""An action's ``validate()`` holds for the model too: an action that fails it for a turn
is not offered in that turn, and a call the model makes anyway is refused by name."""

from __future__ import annotations

from typing import Any

from agentplug import PluginHost
from agentplug.actions.model import Action, ActionResult, Message
from agentplug.agent import AgentRunner, ScriptedProvider

from tests.agent.conftest import run, tool_call


class Weather:
    """An action valid only when the message talks about the weather; counts its calls."""

    def __init__(self) -> None:
        self.validated: list[str] = []
        self.ran: list[str] = []

    async def validate(self, runtime: Any, message: Message, state: Any) -> bool:
        self.validated.append(message.text)
        return "weather" in message.text

    def handler(self, runtime: Any, message: Message, state: Any, options: Any) -> ActionResult:
        self.ran.append(message.text)
        return ActionResult(success=True, text="sunny")

    def action(self) -> Action:
        return Action(
            name="CHECK_WEATHER",
            description="Check the weather.",
            handler=self.handler,
            validate=self.validate,
            side_effects=False,
        )


def _runner(weather: Weather, responses: list[Any]) -> tuple[AgentRunner, ScriptedProvider]:
    host = PluginHost({"plugins": {"enabled": False}})
    host.gateway.actions.registry.register(weather.action())
    provider = ScriptedProvider(responses)
    return AgentRunner(host, provider), provider


def _names(provider: ScriptedProvider, index: int) -> set[str]:
    return {t.name for t in provider.requests[index].tools}


def test_an_action_that_fails_validate_for_this_turn_is_not_offered_in_it() -> None:
    weather = Weather()
    runner, provider = _runner(weather, ["ok", "ok"])
    run(runner.run_turn("what is the weather?", session_key="s1"))
    run(runner.run_turn("hello", session_key="s1"))
    assert "CHECK_WEATHER" in _names(provider, 0)
    assert "CHECK_WEATHER" not in _names(provider, 1)
    assert "CORE_STATUS" in _names(provider, 1)  # the others still are


def test_a_model_calling_an_action_that_fails_validate_is_refused_naming_it() -> None:
    weather = Weather()
    runner, _ = _runner(weather, [tool_call("CHECK_WEATHER"), "ok"])
    result = run(runner.run_turn("hello", session_key="s1"))
    tool = next(m for m in result.transcript if m["role"] == "tool")
    assert tool["is_error"]
    assert "CHECK_WEATHER" in tool["content"] and "validate" in tool["content"]
    assert weather.ran == []


def test_validate_runs_once_per_turn_for_the_listing_however_many_model_calls() -> None:
    weather = Weather()
    responses = [tool_call("CORE_STATUS", call_id=f"c{i}") for i in range(3)] + ["done"]
    runner, provider = _runner(weather, responses)
    run(runner.run_turn("weather?", session_key="s1"))
    assert len(provider.requests) == 4
    assert all("CHECK_WEATHER" in _names(provider, i) for i in range(4))
    assert weather.validated == ["weather?"]


def test_a_validate_that_raises_keeps_the_action_out_and_refuses_its_call() -> None:
    def broken(runtime: Any, message: Message, state: Any) -> bool:
        raise RuntimeError("no weather service")

    ran: list[str] = []
    host = PluginHost({"plugins": {"enabled": False}})
    host.gateway.actions.registry.register(
        Action(
            name="CHECK_WEATHER",
            description="Check the weather.",
            handler=lambda rt, msg, st, opts: ran.append("x") or ActionResult(success=True),
            validate=broken,
            side_effects=False,
        )
    )
    provider = ScriptedProvider([tool_call("CHECK_WEATHER"), "ok"])
    result = run(AgentRunner(host, provider).run_turn("weather", session_key="s1"))
    assert "CHECK_WEATHER" not in _names(provider, 0)
    tool = next(m for m in result.transcript if m["role"] == "tool")
    assert tool["is_error"] and "CHECK_WEATHER" in tool["content"]
    assert "RuntimeError" in tool["content"] and ran == []
