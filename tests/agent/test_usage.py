"""Usage: tokens per call and per turn (provider numbers, or an estimate marked as one),
the usage limits of ``agent.limits``, and the rule that every provider call, compaction
and the language-aware action flow included, fires the model-call hooks and honours the
abort signal (agentplug.agent.usage, agentplug.agent.calls)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from agentplug import Gateway
from agentplug.actions.model import Action, Message
from agentplug.agent import ModelRequest, ModelResponse
from agentplug.agent.calls import ModelCaller
from agentplug.agent.selection import LlmActionSelector, LlmParameterExtractor
from agentplug.agent.turn import TurnCancelled
from agentplug.agent.usage import MAX_TOKENS_PER_CALL, usage_of
from agentplug.services.signals import AbortController

from tests.agent.chat_server import ChatServer, chat_server
from tests.agent.conftest import Recorder, make_runner, run, tool_call

LIVENESS_S = 10.0
"""How long a test waits for a cancelled call to end before it fails (a bound on a hang,
not a timing assertion)."""


@pytest.fixture
def server() -> Iterator[ChatServer]:
    with chat_server() as srv:
        yield srv


# -- tokens per call and per turn ---------------------------------------------------------


def test_the_turn_result_holds_the_providers_usage_per_call_and_in_total(
    server: ChatServer,
) -> None:
    server.tool_calls(("echo", {"x": 1}))
    server.answers[-1][1]["usage"] = {"prompt_tokens": 20, "completion_tokens": 4}
    server.reply("done", usage={"prompt_tokens": 30, "completion_tokens": 2, "total_tokens": 32})
    settings = {"model": "openai/m", "providers": {"openai": {"base_url": server.base_url}}}
    runner, _ = make_runner(agent=settings)
    runner.tools.add_python(lambda x: "ok", name="echo", description="E.")
    usage = run(runner.run_turn("hi", session_key="s1")).usage
    assert (usage.input_tokens, usage.output_tokens, usage.total_tokens) == (50, 6, 56)
    assert not usage.estimated and usage.model_calls == 2 and usage.tool_calls == 1
    assert [(c["input_tokens"], c["output_tokens"]) for c in usage.calls] == [(20, 4), (30, 2)]
    assert {c["purpose"] for c in usage.calls} == {"turn"}


def test_a_call_without_usage_is_estimated_and_the_total_says_so(server: ChatServer) -> None:
    server.raw(200, {"choices": [{"message": {"role": "assistant", "content": "x" * 40}}]})
    settings = {"model": "openai/m", "providers": {"openai": {"base_url": server.base_url}}}
    runner, _ = make_runner(agent=settings)
    result = run(runner.run_turn("hello there", session_key="s1"))
    assert result.usage.estimated and result.usage.calls[0]["estimated"]
    assert result.usage.output_tokens == 10  # 40 characters, about four per token
    model = next(e for e in result.trace if e["kind"] == "model")
    assert model["decision"]["usage_estimated"] is True


def test_the_trace_entry_of_each_model_call_has_its_tokens() -> None:
    runner, provider = make_runner(["hi back"])
    provider.usage = {"prompt_tokens": 7, "completion_tokens": 2}
    result = run(runner.run_turn("hi", session_key="s1"))
    (model,) = [e for e in result.trace if e["kind"] == "model"]
    assert model["decision"]["input_tokens"] == 7 and model["decision"]["output_tokens"] == 2
    assert "usage_estimated" not in model["decision"]


@pytest.mark.parametrize(
    "reported",
    [
        {"prompt_tokens": -1, "completion_tokens": 2},
        {"prompt_tokens": "12", "completion_tokens": 2},
        {"prompt_tokens": True, "completion_tokens": 2},
        {"prompt_tokens": 3.5, "completion_tokens": 2},
        "lots",
        None,
    ],
)
def test_usage_numbers_a_provider_should_not_send_are_estimated_instead(reported: Any) -> None:
    usage = usage_of(reported, [{"role": "user", "content": "x" * 80}], 8)
    assert usage.estimated and (usage.input_tokens, usage.output_tokens) == (20, 2)


def test_a_huge_reported_count_is_capped() -> None:
    usage = usage_of({"prompt_tokens": 10**30, "completion_tokens": 1}, [], 0)
    assert usage.input_tokens == MAX_TOKENS_PER_CALL and not usage.estimated


def test_session_tokens_add_up_over_the_turns_of_a_session() -> None:
    runner, provider = make_runner(["one", "two"])
    provider.usage = {"prompt_tokens": 5, "completion_tokens": 5}
    first = run(runner.run_turn("a", session_key="s1"))
    second = run(runner.run_turn("b", session_key="s1"))
    assert (first.usage.session_tokens, second.usage.session_tokens) == (10, 20)


# -- limits ------------------------------------------------------------------------------


def test_tokens_per_turn_stops_the_turn_before_the_next_call() -> None:
    recorder = Recorder()
    runner, provider = make_runner(
        [tool_call("echo", {"x": 1}), "never"],
        recorder=recorder,
        agent={"limits": {"tokens_per_turn": 10}},
    )
    provider.usage = {"prompt_tokens": 8, "completion_tokens": 4}
    runner.tools.add_python(lambda x: "ok", name="echo", description="E.")
    result = run(runner.run_turn("hi", session_key="s1"))
    assert result.status == "usage_limit" and not result.success
    assert result.error == (
        "stopped: this turn used 12 tokens, the limit is 10 (agent.limits.tokens_per_turn); "
        "raise it or ask for less"
    )
    assert provider.calls == 1 and recorder.events("agent_end")[0].success is False


def test_tokens_per_session_counts_the_earlier_turns() -> None:
    runner, provider = make_runner(["one", "two"], agent={"limits": {"tokens_per_session": 15}})
    provider.usage = {"prompt_tokens": 10, "completion_tokens": 6}
    assert run(runner.run_turn("a", session_key="s1")).status == "replied"
    second = run(runner.run_turn("b", session_key="s1"))
    assert second.status == "usage_limit" and "agent.limits.tokens_per_session" in (
        second.error or ""
    )
    assert run(runner.run_turn("c", session_key="other")).status == "replied"


def test_model_calls_per_turn_counts_every_attempt() -> None:
    runner, provider = make_runner(
        [{"error": "busy", "status": 503}] * 3,
        agent={
            "limits": {"model_calls_per_turn": 2},
            "retry": {"attempts": 3, "initial_backoff_s": 0, "max_backoff_s": 0},
        },
    )
    result = run(runner.run_turn("hi", session_key="s1"))
    assert result.status == "usage_limit" and provider.calls == 2
    assert "agent.limits.model_calls_per_turn" in (result.error or "")


def test_tool_calls_per_turn_refuses_the_calls_past_it_and_stops_the_turn() -> None:
    three = {"text": "", "tool_calls": [
        {"id": f"c{i}", "name": "echo", "arguments": {"x": i}} for i in range(3)
    ]}  # fmt: skip
    runner, provider = make_runner([three, "never"], agent={"limits": {"tool_calls_per_turn": 2}})
    ran: list[int] = []
    runner.tools.add_python(lambda x: ran.append(x) or "ok", name="echo", description="E.")
    result = run(runner.run_turn("hi", session_key="s1"))
    assert ran == [0, 1] and provider.calls == 1
    assert result.status == "usage_limit" and "agent.limits.tool_calls_per_turn" in (
        result.error or ""
    )
    answers = [m for m in result.transcript if m.get("role") == "tool"]
    assert [m["tool_call_id"] for m in answers] == ["c0", "c1", "c2"]  # the protocol holds
    assert "refused" in answers[2]["content"] and answers[2]["is_error"]


def test_a_bad_usage_limit_is_a_config_error_naming_the_key() -> None:
    from agentplug.core.errors import ConfigError

    with pytest.raises(ConfigError, match=r"agent\.limits\.tokens_per_turn"):
        make_runner(agent={"limits": {"tokens_per_turn": 0}})


# -- every provider call is governed ------------------------------------------------------


def _compacting(responses: list[Any], recorder: Recorder) -> Any:
    runner, provider = make_runner(
        responses,
        recorder=recorder,
        agent={"context_token_budget": 5, "compaction_keep_messages": 1},
    )
    return runner, provider


def test_compactions_summary_call_fires_the_model_call_hooks_and_counts_usage() -> None:
    recorder = Recorder()
    runner, provider = _compacting(["first reply", "the summary", "second reply"], recorder)
    # The provider's count (past the budget of 5) is what starts the compaction.
    provider.usage = {"prompt_tokens": 30, "completion_tokens": 1}
    run(runner.run_turn("a long first message to pass the budget", session_key="s1"))
    result = run(runner.run_turn("again", session_key="s1"))
    assert "after_compaction" in recorder.order
    assert [c["purpose"] for c in result.usage.calls] == ["compaction", "turn"]
    assert len(recorder.events("model_call_started")) == 3  # 1 + compaction + 1
    model = [e for e in result.trace if e["kind"] == "model"]
    assert model[0]["decision"]["purpose"] == "compaction"


def test_compaction_honours_the_turns_abort_signal() -> None:
    recorder = Recorder()
    runner, provider = _compacting(["first reply", {"hang": True}], recorder)
    controller = AbortController()
    run(runner.run_turn("a long first message to pass the budget", session_key="s1"))

    async def go() -> Any:
        turn = asyncio.ensure_future(
            runner.run_turn("again", session_key="s1", signal=controller.signal)
        )
        while provider.calls < 2:
            await asyncio.sleep(0.01)
        controller.abort("user left")
        return await asyncio.wait_for(turn, LIVENESS_S)  # a regression fails, never hangs

    result = run(go())
    assert result.status == "cancelled"
    assert recorder.events("model_call_ended")[-1].outcome == "cancelled"


class _Answers:
    """A provider answering from a list (the selector's then the extractor's)."""

    name = "scripted"

    def __init__(self, answers: list[str], hang: bool = False) -> None:
        self.answers = answers
        self.hang = hang

    async def complete(self, request: ModelRequest) -> ModelResponse:
        if self.hang:
            await asyncio.Event().wait()
        return ModelResponse(text=self.answers.pop(0))


def _weather() -> Action:
    from agentplug.actions.model import ActionParameter

    async def handler(*args: Any, **kwargs: Any) -> None:
        return None

    return Action(
        name="CHECK_WEATHER",
        description="The weather of a city.",
        handler=handler,
        parameters=[ActionParameter(name="city", description="The city", required=True)],
    )


def test_the_llm_selector_and_extractor_fire_the_model_call_hooks() -> None:
    recorder = Recorder(("model_call_started", "model_call_ended"))
    gateway = Gateway({})
    gateway.host.register(recorder, recorder.plugin_id)
    provider = _Answers(['{"action": "CHECK_WEATHER"}', '{"city": "Paris"}'])
    selector = LlmActionSelector(provider, "m", host=gateway.host)
    extractor = LlmParameterExtractor(provider, "m", host=gateway.host)
    action, message = _weather(), Message(text="what's the weather in Paris?")

    async def go() -> Any:
        await selector.select([action], message, None)
        return await extractor.extract(action, message, None)

    assert run(go())["city"] == "Paris"
    ended = recorder.events("model_call_ended")
    assert [e.outcome for e in ended] == ["ok", "ok"]
    assert all(e.run_id and e.run_id.startswith("flow-") for e in ended)
    assert isinstance(selector.caller, ModelCaller) and len(selector.caller.ledger.calls) == 1


def test_the_llm_selector_honours_the_abort_signal() -> None:
    controller = AbortController()
    gateway = Gateway({})
    selector = LlmActionSelector(
        _Answers([], hang=True), "m", host=gateway.host, signal=controller.signal
    )

    async def go() -> None:
        task = asyncio.ensure_future(selector.select([_weather()], Message(text="weather?"), None))
        await asyncio.sleep(0.05)
        controller.abort("closing")
        await asyncio.wait_for(task, LIVENESS_S)

    with pytest.raises(TurnCancelled):
        run(go())


def test_the_language_aware_flow_of_a_config_is_governed_with_a_host() -> None:
    from agentplug.agent.selection import language_aware_flow

    gateway = Gateway({})
    flow = language_aware_flow({"model": "scripted/m"}, gateway.host)
    assert flow is not None and isinstance(flow[0].caller, ModelCaller)
    assert flow[1].caller is flow[0].caller
