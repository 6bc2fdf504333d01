"""The PydanticAI adapter: a scripted ``FunctionModel`` run gated by the example plugins."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from tests.integrations.conftest import ExampleHost, rewriter

pytest.importorskip(
    "pydantic_ai",
    reason="the PydanticAI adapter needs the extra: pip install 'agentplug[pydantic-ai]'",
)

from agentplug import PluginHost
from agentplug.adapters.pydantic_ai import AgentplugCapability
from agentplug.services.approvals import ApprovalBroker, ScriptedResolver
from pydantic_ai import Agent, ModelRetry
from pydantic_ai.exceptions import UnexpectedModelBehavior
from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, FunctionModel
from pydantic_ai.models.test import TestModel


def _model(tool: str, args: dict[str, Any], final: str = "done: {result}") -> FunctionModel:
    """Calls ``tool(args)`` once, then answers with the tool's result."""

    def script(messages: list[Any], info: Any) -> ModelResponse:
        returns = [p for p in messages[-1].parts if isinstance(p, ToolReturnPart)]
        if returns:
            return ModelResponse(parts=[TextPart(final.format(result=returns[0].content))])
        return ModelResponse(parts=[ToolCallPart(tool, args, tool_call_id="call-7")])

    return FunctionModel(script)


def _agent(model: Any, capability: AgentplugCapability, ran: list[Any]) -> Agent[None, str]:
    agent = Agent(model, capabilities=[capability])

    @agent.tool_plain
    def web_search(query: str) -> str:
        """Search the web."""
        ran.append(("web_search", query))
        return f"results for {query}"

    @agent.tool_plain
    def echo(text: str) -> str:
        """Repeat the text."""
        ran.append(("echo", text))
        return f"echo: {text}"

    @agent.tool_plain
    def delete_everything(confirm: bool) -> str:
        """Delete everything."""
        ran.append(("delete_everything", confirm))
        return "deleted"

    return agent


def test_a_blocked_tool_call_does_not_run_and_the_model_reads_the_reason(tmp_path: Path) -> None:
    plugins = ExampleHost(tmp_path)
    ran: list[Any] = []
    agent = _agent(
        _model("delete_everything", {"confirm": True}), AgentplugCapability(plugins.host), ran
    )
    result = asyncio.run(agent.run("clean up"))
    assert ran == []
    assert "tool call blocked" in result.output and "blocked by the operator" in result.output


def test_rewritten_params_are_what_the_tool_receives(tmp_path: Path) -> None:
    plugins = ExampleHost(tmp_path, rewriter=rewriter)
    ran: list[Any] = []
    agent = _agent(_model("echo", {"text": "quiet"}), AgentplugCapability(plugins.host), ran)
    result = asyncio.run(agent.run("say it"))
    assert ran == [("echo", "QUIET")]
    assert result.output == "done: echo: QUIET"


def test_an_approved_call_runs_and_allow_always_becomes_a_grant(tmp_path: Path) -> None:
    plugins = ExampleHost(tmp_path)
    resolver = ScriptedResolver(["allow-always"])
    broker = ApprovalBroker(resolver, store=plugins.host.gateway.store)
    ran: list[Any] = []
    agent = _agent(
        _model("web_search", {"query": "mcp"}),
        AgentplugCapability(plugins.host, broker=broker),
        ran,
    )
    asyncio.run(agent.run("search"))
    asyncio.run(agent.run("search again"))  # the standing grant answers
    assert ran == [("web_search", "mcp"), ("web_search", "mcp")]
    assert len(resolver.asked) == 1
    assert [g.tool_name for g in broker.list_grants()] == ["web_search"]


def test_an_unanswered_approval_blocks_the_call(tmp_path: Path) -> None:
    plugins = ExampleHost(tmp_path)
    ran: list[Any] = []
    agent = _agent(_model("web_search", {"query": "x"}), AgentplugCapability(plugins.host), ran)
    result = asyncio.run(agent.run("search"))
    assert ran == []
    assert "needs approval" in result.output


def test_the_audit_log_sees_the_call_under_pydantic_ais_ids(tmp_path: Path) -> None:
    plugins = ExampleHost(tmp_path)
    agent = _agent(_model("echo", {"text": "hi"}), AgentplugCapability(plugins.host), [])
    result = asyncio.run(agent.run("say hi"))
    after = plugins.audit_lines("after_tool_call")
    assert len(after) == 1
    assert after[0]["run_id"] == result.run_id
    assert after[0]["event"]["tool_call_id"] == "call-7"
    assert after[0]["session_id"] == result.conversation_id
    assert plugins.audit_lines("before_tool_call")[0]["run_id"] == result.run_id


def test_the_output_goes_through_message_sending(tmp_path: Path) -> None:
    plugins = ExampleHost(tmp_path)
    agent = _agent(
        _model("echo", {"text": "a"}, "mail ops@example.com"), AgentplugCapability(plugins.host), []
    )
    assert asyncio.run(agent.run("go")).output == "mail [REDACTED:email]"


def test_a_cancelled_output_is_empty_and_says_who_cancelled(tmp_path: Path) -> None:
    plugins = ExampleHost(tmp_path)
    capability = AgentplugCapability(plugins.host)
    agent = _agent(_model("echo", {"text": "a"}, "about Project Nightingale"), capability, [])
    assert asyncio.run(agent.run("go")).output == ""
    assert capability.last_delivery is not None and capability.last_delivery.suppressed
    assert capability.last_delivery.cancelled_by == "message-redactor"


def test_test_model_calls_are_gated_too(tmp_path: Path) -> None:
    plugins = ExampleHost(tmp_path)
    ran: list[Any] = []
    agent = _agent(
        TestModel(call_tools=["delete_everything", "echo"]), AgentplugCapability(plugins.host), ran
    )
    asyncio.run(agent.run("go"))
    assert [name for name, _ in ran] == ["echo"]


# -- output functions and ModelRetry ----------------------------------------------------


def _block_everything(api: Any) -> None:
    api.on("before_tool_call", lambda event: {"block": True, "block_reason": "nothing runs here"})


def _returned_contents(messages: list[Any]) -> list[str]:
    """The tool results (returned or retried) the model has read so far."""
    return [
        str(part.content)
        for message in messages
        for part in message.parts
        if isinstance(part, ToolReturnPart)
    ]


def _calls_output_tool(seen: list[list[str]]) -> FunctionModel:
    """Calls the agent's output tool with ``{"text": "hi"}`` every time."""

    def script(messages: list[Any], info: AgentInfo) -> ModelResponse:
        seen.append(_returned_contents(messages))
        name = info.output_tools[0].name
        return ModelResponse(parts=[ToolCallPart(name, {"text": "hi"}, tool_call_id="out-1")])

    return FunctionModel(script)


def test_an_output_function_blocked_by_a_policy_does_not_run_and_the_model_reads_why() -> None:
    host = PluginHost({})
    host.register(_block_everything, "blocker")
    ran: list[str] = []

    def publish(text: str) -> str:
        """Publish the text."""
        ran.append(text)
        return "published"

    seen: list[list[str]] = []
    agent = Agent(
        _calls_output_tool(seen), output_type=publish, capabilities=[AgentplugCapability(host)]
    )
    with pytest.raises(UnexpectedModelBehavior, match="retries"):
        asyncio.run(agent.run("publish hi"))
    assert ran == []
    assert seen[1] == ["tool call blocked: nothing runs here"]


def _recording_host(seen: list[tuple[str, Any]]) -> PluginHost:
    """A host whose only plugin records every ``before_tool_call`` / ``after_tool_call``."""

    def recorder(api: Any) -> None:
        for hook in ("before_tool_call", "after_tool_call"):
            api.on(hook, lambda event, hook=hook: seen.append((hook, event)))

    host = PluginHost({})
    host.register(recorder, "recorder")
    return host


def test_an_allowed_output_function_runs_once_between_the_tool_hooks() -> None:
    hooks: list[tuple[str, Any]] = []
    ran: list[str] = []

    def publish(text: str) -> str:
        """Publish the text."""
        ran.append(text)
        return f"published {text}"

    agent = Agent(
        _calls_output_tool([]),
        output_type=publish,
        capabilities=[AgentplugCapability(_recording_host(hooks))],
    )
    assert asyncio.run(agent.run("publish hi")).output == "published hi"
    assert ran == ["hi"]
    (hook, before), (hook_after, after) = hooks
    assert (hook, hook_after) == ("before_tool_call", "after_tool_call")
    assert (before.tool_name, before.tool_kind, dict(before.params)) == (
        "publish",
        "output",
        {"text": "hi"},
    )
    assert (after.tool_call_id, after.result, after.error) == ("out-1", "published hi", None)


def test_a_model_retry_from_a_tool_reaches_pydantic_ai_and_the_model_retries() -> None:
    hooks: list[tuple[str, Any]] = []
    seen: list[list[str]] = []

    def script(messages: list[Any], info: AgentInfo) -> ModelResponse:
        seen.append(_returned_contents(messages))
        if seen[-1] and seen[-1][-1] == "echo: second":
            return ModelResponse(parts=[TextPart("done")])
        text = "second" if seen[-1] else "first"
        return ModelResponse(parts=[ToolCallPart("echo", {"text": text}, tool_call_id="c1")])

    agent = Agent(FunctionModel(script), capabilities=[AgentplugCapability(_recording_host(hooks))])

    @agent.tool_plain
    def echo(text: str) -> str:
        """Repeat the text."""
        if text == "first":
            raise ModelRetry("say 'second' instead")
        return f"echo: {text}"

    result = asyncio.run(agent.run("go"))
    assert result.output == "done"
    assert "say 'second' instead" in seen[1][0] and "ToolRetryError" not in seen[1][0]
    assert seen[2][-1] == "echo: second"
    errors = [event.error for hook, event in hooks if hook == "after_tool_call"]
    assert errors == ["ModelRetry: say 'second' instead", None]


def test_a_model_retry_from_an_output_function_reaches_pydantic_ai() -> None:
    host = PluginHost({})
    tries: list[str] = []

    def publish(text: str) -> str:
        """Publish the text."""
        tries.append(text)
        if len(tries) == 1:
            raise ModelRetry("publish it again")
        return "published"

    seen: list[list[str]] = []
    agent = Agent(
        _calls_output_tool(seen), output_type=publish, capabilities=[AgentplugCapability(host)]
    )
    assert asyncio.run(agent.run("publish hi")).output == "published"
    assert tries == ["hi", "hi"]
    assert "publish it again" in seen[1][0]


def test_a_streamed_output_function_runs_gated_on_the_final_output_only() -> None:
    hooks: list[tuple[str, Any]] = []
    ran: list[tuple[str, str]] = []

    def publish(title: str, body: str) -> str:
        """Publish a post."""
        ran.append((title, body))
        return f"{title}: {body}"

    async def stream(messages: list[Any], info: AgentInfo) -> Any:
        name = info.output_tools[0].name
        yield {0: DeltaToolCall(name=name, json_args='{"title": "T", ')}
        yield {0: DeltaToolCall(json_args='"body": "half')}
        yield {0: DeltaToolCall(json_args=' and the rest"}')}

    agent = Agent(
        FunctionModel(stream_function=stream),
        output_type=publish,
        capabilities=[AgentplugCapability(_recording_host(hooks))],
    )

    async def consume() -> list[str]:
        async with agent.run_stream("go") as streamed:
            return [o async for o in streamed.stream_output(debounce_by=None)]

    assert asyncio.run(consume()) == ["T: half and the rest"]
    assert ran == [("T", "half and the rest")]
    assert [hook for hook, _ in hooks] == ["before_tool_call", "after_tool_call"]


def test_an_output_function_whose_arguments_a_plugin_rewrites_does_not_run() -> None:
    host = PluginHost({})
    host.register(
        lambda api: api.on("before_tool_call", lambda event: {"params": {"text": "rewritten"}}),
        "rewrite-all",
    )
    ran: list[str] = []

    def publish(text: str) -> str:
        """Publish the text."""
        ran.append(text)
        return "published"

    seen: list[list[str]] = []
    agent = Agent(
        _calls_output_tool(seen), output_type=publish, capabilities=[AgentplugCapability(host)]
    )
    with pytest.raises(UnexpectedModelBehavior):
        asyncio.run(agent.run("publish hi"))
    assert ran == []
    assert "rewrote the arguments of output function 'publish'" in seen[1][0]
