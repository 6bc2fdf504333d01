"""Sub-agents (issue 27 item 6): a configured agent called as a tool, with its own session,
model, tools and hook contexts, the subagent hooks as HOOKS.md orders them, a depth limit,
cancellation that reaches children, roll-up into the parent's result, background spawns."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest
from agentplug import Gateway
from agentplug.agent import ModelRequest, ModelResponse, ScriptedProvider, ToolCall
from agentplug.agent.subagents import usage_of
from agentplug.core.errors import ConfigError, one_line
from agentplug.services.approvals import ApprovalBroker
from agentplug.services.signals import AbortController

from tests.agent.chat_server import ChatServer, chat_server
from tests.agent.conftest import Recorder, make_runner, on, run, tool_call

pytestmark = pytest.mark.filterwarnings("ignore:plugin .* uses deprecated hook .subagent_spawning.")

SAFETY_S = 30
"""A bound on waits that only a broken rule would hit (a failure, never a timing check)."""
SUBAGENT_HOOKS = ("subagent_spawning", "subagent_spawned", "subagent_ended")
RESEARCHER = {
    "description": "Finds facts and reports them.",
    "system_prompt": "You research.",
    "tools": {"actions": False},
}


@pytest.fixture
def server() -> Iterator[ChatServer]:
    with chat_server() as srv:
        yield srv


def _ask(name: str, task: str, call_id: str = "c1") -> dict[str, Any]:
    return tool_call(name, {"task": task}, call_id)


def _subagents(**entries: dict[str, Any]) -> dict[str, Any]:
    return {"subagents": entries}


def _child_requests(provider: ScriptedProvider) -> list[ModelRequest]:
    return [
        r for r in provider.requests if r.messages and r.messages[0]["content"] == "You research."
    ]


# -- a sub-agent as a tool ------------------------------------------------------------------------


def test_a_model_calls_a_configured_subagent_and_reads_its_answer() -> None:
    runner, provider = make_runner(
        [_ask("researcher", "find the VAT rate"), "VAT is 21 %.", "The VAT rate is 21 %."],
        agent=_subagents(researcher=RESEARCHER),
    )
    result = run(runner.run_turn("what is the VAT rate?", session_key="s1"))
    assert result.status == "replied" and result.reply == "The VAT rate is 21 %."
    offered = {t.name: t for t in provider.requests[0].tools}
    assert offered["researcher"].description == "Finds facts and reports them."
    (child,) = _child_requests(provider)
    assert child.messages == [
        {"role": "system", "content": "You research."},
        {"role": "user", "content": "find the VAT rate"},
    ]
    tool_message = next(m for m in result.transcript if m["role"] == "tool")
    assert tool_message["content"] == "VAT is 21 %."


def test_the_subagent_runs_as_its_own_agent_in_its_own_session_and_model() -> None:
    recorder = Recorder(("before_agent_run",))
    kid = ScriptedProvider(["from the kid"])
    kid.name = "kid"
    runner, _ = make_runner(
        [_ask("researcher", "look"), "done"],
        recorder=recorder,
        agent=_subagents(researcher={**RESEARCHER, "model": "kid/small"}),
    )
    runner.providers.register("kid", kid)
    result = run(runner.run_turn("go", session_key="s1"))
    parent_ctx, child_ctx = recorder.ctxs("before_agent_run")
    assert (parent_ctx.agent_id, parent_ctx.trigger) == ("main", "user")
    assert (child_ctx.agent_id, child_ctx.trigger) == ("researcher", "subagent")
    assert child_ctx.session_key.startswith("agent:researcher:subagent:")
    assert child_ctx.trace == {
        "parent_agent_id": "main",
        "parent_run_id": result.run_id,
        "parent_session_key": "s1",
        "subagent_depth": 1,
    }
    assert kid.requests[0].model == "small"
    assert runner.transcripts.load(child_ctx.session_key) is not None


def test_the_subagent_has_its_own_tools() -> None:
    runner, provider = make_runner(
        [_ask("researcher", "look"), "found", "done"],
        agent=_subagents(researcher=RESEARCHER),
    )
    runner.tools.add_python(lambda: "x", name="parent_only", description="The parent's tool.")
    run(runner.run_turn("go", session_key="s1"))
    (child,) = _child_requests(provider)
    assert "parent_only" in {t.name for t in provider.requests[0].tools}
    assert {t.name for t in child.tools} == set()


def test_the_spawn_hooks_fire_around_the_child_turn_with_the_spec_fields() -> None:
    recorder = Recorder((*SUBAGENT_HOOKS, "before_tool_call", "after_tool_call", "agent_end"))
    runner, _ = make_runner(
        [_ask("researcher", "find the VAT rate"), "21 %", "done"],
        recorder=recorder,
        agent=_subagents(researcher={**RESEARCHER, "model": "scripted/researcher-model"}),
    )
    result = run(runner.run_turn("go", session_key="s1"))
    assert recorder.order == [
        "before_tool_call",
        "subagent_spawning",
        "subagent_spawned",
        "agent_end",  # the child's turn
        "subagent_ended",
        "after_tool_call",
        "agent_end",  # the parent's turn
    ]
    spawned, ended = recorder.events("subagent_spawned")[0], recorder.events("subagent_ended")[0]
    assert spawned.child_session_key == ended.target_session_key
    assert (spawned.agent_id, spawned.label, spawned.run_id) == (
        "researcher",
        "find the VAT rate",
        result.run_id,
    )
    assert (spawned.resolved_provider, spawned.resolved_model) == ("scripted", "researcher-model")
    assert (ended.target_kind, ended.outcome, ended.error) == ("subagent", "ok", None)
    assert ended.run_id == result.subagents[0].run_id != result.run_id
    assert isinstance(ended.ended_at, float)
    assert "agent_id" not in ended.model_dump() and "child_session_key" not in ended.model_dump()
    for ctx in (recorder.ctxs("subagent_spawned")[0], recorder.ctxs("subagent_ended")[0]):
        assert (ctx.agent_id, ctx.session_key, ctx.run_id) == ("main", "s1", result.run_id)


def test_a_plugin_handling_subagent_spawning_answers_in_the_subagents_place() -> None:
    recorder = Recorder(SUBAGENT_HOOKS)
    with pytest.warns(DeprecationWarning, match="subagent_spawning"):
        runner, provider = make_runner(
            [_ask("researcher", "look"), "done"],
            recorder=recorder,
            plugins={
                "legacy": on("subagent_spawning", lambda: {"handled": True, "reply": "cached"})
            },
            agent=_subagents(researcher=RESEARCHER),
        )
    result = run(runner.run_turn("go", session_key="s1"))
    assert _child_requests(provider) == []
    assert recorder.order == []  # the claim stopped the chain; nothing was spawned
    assert next(m for m in result.transcript if m["role"] == "tool")["content"] == "cached"
    assert result.subagents[0].status == "claimed"


def test_before_tool_call_can_block_a_spawn() -> None:
    recorder = Recorder(SUBAGENT_HOOKS)
    block = on(
        "before_tool_call",
        lambda event: (
            {"block": True, "block_reason": "no sub-agents here"}
            if event.tool_kind == "subagent"
            else None
        ),
    )
    runner, provider = make_runner(
        [_ask("researcher", "look"), "ok then"],
        recorder=recorder,
        plugins={"guard": block},
        agent=_subagents(researcher=RESEARCHER),
    )
    result = run(runner.run_turn("go", session_key="s1"))
    assert recorder.order == [] and _child_requests(provider) == []
    assert (
        "blocked: no sub-agents here"
        in next(m for m in result.transcript if m["role"] == "tool")["content"]
    )


# -- depth -----------------------------------------------------------------------------------------

NESTED = {
    **RESEARCHER,
    "subagents": {"helper": {"description": "Helps.", "tools": {"actions": False}}},
}


@pytest.mark.parametrize(("depth", "helper_runs"), [(1, False), (2, True)])
def test_sub_agents_nest_at_most_max_subagent_depth_deep(depth: int, helper_runs: bool) -> None:
    recorder = Recorder(("subagent_spawned",))
    runner, _ = make_runner(
        [_ask("researcher", "look"), _ask("helper", "help"), "helped", "found", "done"],
        recorder=recorder,
        agent={"max_subagent_depth": depth, **_subagents(researcher=NESTED)},
    )
    result = run(runner.run_turn("go", session_key="s1"))
    spawned = [e.agent_id for e in recorder.events("subagent_spawned")]
    assert spawned == (["researcher", "helper"] if helper_runs else ["researcher"])
    child = runner.transcripts.load(result.subagents[0].session_key)
    assert child is not None
    helper_result = next(m for m in child.messages if m["role"] == "tool")["content"]
    if not helper_runs:
        assert "nest at most 1 deep (agent.max_subagent_depth)" in helper_result


def test_a_runner_that_calls_itself_stops_at_the_depth_limit() -> None:
    runner, _ = make_runner(
        [_ask("again", "go deeper")] * 3 + ["bottom", "up", "up", "top"],
        agent={"max_subagent_depth": 2},
    )
    runner.add_subagent("again", "Runs this very agent again.", runner)
    result = run(runner.run_turn("start", session_key="s1"))
    assert result.status == "replied"
    depths = [len(r.subagents) for r in [result, *result.subagents]]
    assert depths == [1, 1]
    assert result.subagents[0].subagents[0].subagents == []


def test_a_turn_starts_at_most_max_subagents_per_turn() -> None:
    recorder = Recorder(("subagent_spawned",))
    three = {
        "text": "",
        "tool_calls": [
            {"id": f"c{i}", "name": "researcher", "arguments": {"task": f"part {i}"}}
            for i in range(3)
        ],
    }
    runner, _ = make_runner(
        [three, "one", "two", "done"],
        recorder=recorder,
        agent={"max_subagents_per_turn": 2, **_subagents(researcher=RESEARCHER)},
    )
    result = run(runner.run_turn("go", session_key="s1"))
    assert len(recorder.events("subagent_spawned")) == 2
    answers = [m["content"] for m in result.transcript if m["role"] == "tool"]
    assert answers[:2] == ["one", "two"]
    assert "already started 2 sub-agents (agent.max_subagents_per_turn)" in answers[2]


def test_max_subagent_depth_zero_offers_no_subagent() -> None:
    runner, provider = make_runner(
        ["plain"], agent={"max_subagent_depth": 0, **_subagents(researcher=RESEARCHER)}
    )
    run(runner.run_turn("go", session_key="s1"))
    assert "researcher" not in {t.name for t in provider.requests[0].tools}


# -- cancellation and time limits ---------------------------------------------------------------


class HangingChild:
    """The parent asks the researcher; the researcher's model never answers."""

    name = "scripted"

    def __init__(self) -> None:
        self.child_called = asyncio.Event()

    async def complete(self, request: ModelRequest) -> ModelResponse:
        if request.messages[0]["content"] == "You research.":
            self.child_called.set()
            await asyncio.Event().wait()
        if any(m["role"] == "tool" for m in request.messages):
            return ModelResponse(text="I answered without it.")
        return ModelResponse(tool_calls=[ToolCall("c1", "researcher", {"task": "look"})])


def test_cancelling_the_parent_cancels_the_child() -> None:
    async def scenario() -> None:
        recorder = Recorder(("subagent_ended", "agent_end"))
        runner, _ = make_runner(recorder=recorder, agent=_subagents(researcher=RESEARCHER))
        model = HangingChild()
        runner.providers.register("scripted", model)
        controller = AbortController()
        turn = asyncio.create_task(
            runner.run_turn("go", session_key="s1", signal=controller.signal)
        )
        await model.child_called.wait()
        controller.abort("the user pressed stop")
        async with asyncio.timeout(SAFETY_S):  # a child that ignores the abort fails here
            result = await turn
        assert result.status == "cancelled"
        (ended,) = recorder.events("subagent_ended")
        assert ended.outcome == "killed"
        child_end, parent_end = recorder.events("agent_end")
        assert child_end.success is False and parent_end.success is False

    asyncio.run(scenario())


def test_cancelling_the_parent_cancels_the_childs_pending_approval() -> None:
    async def scenario() -> None:
        resolutions: list[str] = []
        asked = asyncio.Event()

        class Waits:
            async def resolve(self, pending: Any) -> str:
                asked.set()
                await asyncio.Event().wait()
                return "allow-once"

        def ask(event: Any) -> dict[str, Any] | None:
            if event.tool_name != "lookup":
                return None
            return {
                "require_approval": {
                    "title": "Look up?",
                    "description": "x",
                    "on_resolution": resolutions.append,
                }
            }

        runner, _ = make_runner(
            [_ask("researcher", "look"), tool_call("lookup", {}, "c2")],
            plugins={"asker": on("before_tool_call", ask)},
            agent=_subagents(researcher=RESEARCHER),
            broker=ApprovalBroker(Waits()),
        )
        child = runner.subagents.runner_for("researcher")
        child.tools.add_python(lambda: "found", name="lookup", description="Look it up.")
        controller = AbortController()
        turn = asyncio.create_task(
            runner.run_turn("go", session_key="s1", signal=controller.signal)
        )
        await asked.wait()
        controller.abort("stop")
        async with asyncio.timeout(SAFETY_S):
            result = await turn
        assert result.status == "cancelled" and resolutions == ["cancelled"]
        assert result.subagents[0].outcome == "killed"

    asyncio.run(scenario())


def test_a_subagent_past_its_timeout_ends_as_timeout_and_the_parent_goes_on() -> None:
    recorder = Recorder(("subagent_ended",))
    runner, _ = make_runner(
        recorder=recorder, agent=_subagents(researcher={**RESEARCHER, "timeout_s": 0.05})
    )
    runner.providers.register("scripted", HangingChild())
    result = run(runner.run_turn("go", session_key="s1"))
    assert result.status == "replied" and result.reply == "I answered without it."
    (ended,) = recorder.events("subagent_ended")
    assert (ended.outcome, ended.reason) == ("timeout", "timed out")
    tool_message = next(m for m in result.transcript if m["role"] == "tool")
    assert tool_message["content"].startswith("sub-agent 'researcher' timed out")
    assert tool_message["is_error"] is True


# -- roll-up -----------------------------------------------------------------------------------


def test_the_childs_model_calls_roll_up_into_the_parents_result() -> None:
    runner, _ = make_runner(
        [
            _ask("researcher", "look"),
            tool_call("lookup", {}, "c2"),
            "found it",
            "done",
        ],
        agent=_subagents(researcher=RESEARCHER),
    )
    child = runner.subagents.runner_for("researcher")
    child.tools.add_python(lambda: "data", name="lookup", description="Look it up.")
    result = run(runner.run_turn("go", session_key="s1"))
    (spawn,) = result.subagents
    assert (spawn.agent_id, spawn.status, spawn.outcome) == ("researcher", "replied", "ok")
    assert (spawn.steps, spawn.tool_calls) == (2, 1)
    assert result.steps == 2 and result.total_steps == 4
    entry = next(e for e in result.trace if e["kind"] == "subagent")
    assert entry["name"] == "researcher" and entry["decision"]["steps"] == 2


def test_nested_spawns_roll_up_at_every_depth() -> None:
    runner, _ = make_runner(
        [_ask("researcher", "look"), _ask("helper", "help"), "helped", "found", "done"],
        agent=_subagents(researcher=NESTED),
    )
    result = run(runner.run_turn("go", session_key="s1"))
    (researcher,) = result.subagents
    (helper,) = researcher.subagents
    assert (researcher.steps, helper.steps) == (2, 1)
    assert result.total_steps == 2 + 2 + 1


def test_usage_of_reads_a_child_results_token_totals() -> None:
    assert usage_of(SimpleNamespace(usage={"total_tokens": 12, "note": "x"})) == {
        "total_tokens": 12
    }
    assert usage_of(SimpleNamespace()) is None


# -- delivery ----------------------------------------------------------------------------------


def test_the_childs_answer_goes_to_the_parent_not_to_the_channel() -> None:
    sent: list[dict[str, Any]] = []
    recorder = Recorder(("message_sending",))
    runner, _ = make_runner(
        [_ask("researcher", "look"), "internal notes", "Final answer."],
        recorder=recorder,
        channel=sent.append,
        agent=_subagents(researcher=RESEARCHER),
    )
    run(runner.run_turn("go", session_key="s1"))
    assert [p["text"] for p in sent] == ["Final answer."]
    assert len(recorder.events("message_sending")) == 1


def test_a_background_subagents_answer_reaches_the_requesters_channel() -> None:
    async def scenario() -> None:
        sent: list[dict[str, Any]] = []
        recorder = Recorder(("subagent_ended", "subagent_delivery_target"))
        runner, _ = make_runner(
            [_ask("researcher", "look"), "I started it.", "Here is what I found."],
            recorder=recorder,
            channel=sent.append,
            agent=_subagents(researcher={**RESEARCHER, "background": True}),
        )
        result = await runner.run_turn("go", session_key="s1")
        assert result.reply == "I started it."
        assert result.subagents[0].status == "started"
        tool_message = next(m for m in result.transcript if m["role"] == "tool")
        assert "started in the background" in tool_message["content"]
        await runner.subagents.wait()
        assert [p["text"] for p in sent] == ["I started it.", "[researcher] Here is what I found."]
        assert recorder.events("subagent_ended")[0].outcome == "ok"
        assert recorder.events("subagent_delivery_target") == []
        assert runner.subagents.finished[0].status == "replied"

    asyncio.run(scenario())


def test_a_background_answer_nothing_routes_asks_subagent_delivery_target() -> None:
    async def scenario() -> None:
        seen: list[Any] = []

        def route(event: Any) -> dict[str, Any]:
            seen.append(event)
            return {"handled": True, "target": {"channel": "email", "to": "ana@example.org"}}

        runner, _ = make_runner(
            [_ask("researcher", "look"), "Started.", "The report."],
            plugins={"router": on("subagent_delivery_target", route)},
            agent=_subagents(researcher={**RESEARCHER, "background": True}),
        )
        result = await runner.run_turn("go", session_key="s1")
        await runner.subagents.wait()
        (event,) = seen
        assert event.target_session_key == result.subagents[0].session_key
        assert event.content == "The report."
        assert event.requester["session_key"] == "s1"

    asyncio.run(scenario())


def test_stopping_the_gateway_cancels_background_subagents() -> None:
    async def scenario() -> None:
        recorder = Recorder(("subagent_ended",))
        runner, _ = make_runner(
            recorder=recorder,
            agent=_subagents(researcher={**RESEARCHER, "background": True}),
        )
        model = HangingChild()
        runner.providers.register("scripted", model)
        await runner.run_turn("go", session_key="s1")
        await model.child_called.wait()
        assert len(runner.subagents.running) == 1
        async with asyncio.timeout(SAFETY_S):
            await runner.gateway.stop()
        assert runner.subagents.running == []
        assert recorder.events("subagent_ended")[0].outcome == "killed"

    asyncio.run(scenario())


# -- config and the real protocol server ----------------------------------------------------------


def test_a_subagent_without_a_description_is_a_one_line_config_error() -> None:
    with pytest.raises(ConfigError) as caught:
        Gateway.from_config({"agent": {"subagents": {"researcher": {"model": "openai/m"}}}})
    line = one_line(caught.value)
    assert "agent.subagents.researcher.description" in line and "needs a description" in line


def test_a_subagent_key_typo_names_the_key() -> None:
    with pytest.raises(ConfigError, match=r"agent\.subagents\.r\.sytem_prompt: unknown key"):
        Gateway.from_config(
            {"agent": {"subagents": {"r": {"description": "d", "sytem_prompt": "x"}}}}
        )


def test_a_subagent_on_the_openai_server_gets_its_prompt_and_task(server: ChatServer) -> None:
    server.reply("The server says 42.")
    runner, scripted = make_runner(
        [_ask("researcher", "what is the answer?"), "It is 42."],
        agent={
            "providers": {"openai": {"base_url": server.base_url}},
            **_subagents(researcher={**RESEARCHER, "model": "openai/research-model"}),
        },
    )
    result = run(runner.run_turn("go", session_key="s1"))
    assert result.reply == "It is 42."
    (request,) = server.requests
    assert request["body"]["model"] == "research-model"
    assert request["body"]["messages"] == [
        {"role": "system", "content": "You research."},
        {"role": "user", "content": "what is the answer?"},
    ]
    assert len(scripted.requests) == 2  # the parent's two calls only


def test_the_childs_usage_rolls_up_into_the_parents_turn() -> None:
    runner, _ = make_runner(
        [_ask("researcher", "find the VAT rate"), "VAT is 21 %.", "The VAT rate is 21 %."],
        agent=_subagents(researcher=RESEARCHER),
    )
    result = run(runner.run_turn("what is the VAT rate?", session_key="s1"))
    (spawned,) = result.subagents
    assert spawned.usage is not None and spawned.usage["total_tokens"] > 0
    (rolled,) = [c for c in result.usage.calls if c["purpose"] == "subagent"]
    assert (rolled["model"], rolled["total_tokens"]) == (
        "researcher",
        spawned.usage["total_tokens"],
    )
    own = sum(c["total_tokens"] for c in result.usage.calls if c["purpose"] != "subagent")
    assert result.usage.total_tokens == own + spawned.usage["total_tokens"]
    assert result.usage.model_calls == 2 + spawned.usage["model_calls"]


def test_a_turn_token_limit_counts_the_childs_tokens() -> None:
    runner, _ = make_runner(
        [_ask("researcher", "find it"), "x " * 400, "never asked"],
        agent={**_subagents(researcher=RESEARCHER), "limits": {"tokens_per_turn": 150}},
    )
    result = run(runner.run_turn("go", session_key="s1"))
    assert result.status == "usage_limit" and "tokens_per_turn" in (result.error or "")
