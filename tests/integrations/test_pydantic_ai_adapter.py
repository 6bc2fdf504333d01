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

from agentplug.adapters.pydantic_ai import AgentplugCapability
from agentplug.services.approvals import ApprovalBroker, ScriptedResolver
from pydantic_ai import Agent
from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import FunctionModel
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
    broker = ApprovalBroker(resolver, store=plugins.host.store)
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
