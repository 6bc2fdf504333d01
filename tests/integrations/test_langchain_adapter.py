"""The LangChain adapter: ``create_agent`` with a fake chat model, gated by the example plugins."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from tests.integrations.conftest import ExampleHost, rewriter

pytest.importorskip(
    "langchain.agents",
    reason="the LangChain adapter needs the extra: pip install 'agentplug[langchain]'",
)

from agentplug.adapters.langchain import AgentplugMiddleware
from agentplug.services.approvals import ApprovalBroker, ScriptedResolver
from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import tool


class FakeToolModel(GenericFakeChatModel):
    """LangChain's fake chat model; it accepts tools (and ignores them)."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self


def _model(name: str, args: dict[str, Any], final: str = "done") -> FakeToolModel:
    call = AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": "call-9"}])
    return FakeToolModel(messages=iter([call, AIMessage(content=final)]))


def _agent(model: Any, middleware: AgentplugMiddleware, ran: list[Any]) -> Any:
    @tool
    def web_search(query: str) -> str:
        """Search the web."""
        ran.append(("web_search", query))
        return f"results for {query}"

    @tool
    def echo(text: str) -> str:
        """Repeat the text."""
        ran.append(("echo", text))
        return f"echo: {text}"

    @tool
    def delete_everything(confirm: bool) -> str:
        """Delete everything."""
        ran.append(("delete_everything", confirm))
        return "deleted"

    return create_agent(model, tools=[web_search, echo, delete_everything], middleware=[middleware])


def _invoke(agent: Any, thread: str = "thread-1") -> dict[str, Any]:
    state: dict[str, Any] = asyncio.run(
        agent.ainvoke(
            {"messages": [{"role": "user", "content": "go"}]},
            {"configurable": {"thread_id": thread}},
        )
    )
    return state


def _tool_message(state: dict[str, Any]) -> ToolMessage:
    return next(m for m in state["messages"] if isinstance(m, ToolMessage))


def test_a_blocked_tool_call_does_not_run_and_the_model_reads_the_reason(tmp_path: Path) -> None:
    plugins = ExampleHost(tmp_path)
    ran: list[Any] = []
    agent = _agent(
        _model("delete_everything", {"confirm": True}), AgentplugMiddleware(plugins.host), ran
    )
    message = _tool_message(_invoke(agent))
    assert ran == []
    assert message.status == "error"
    assert "blocked by the operator" in str(message.content)


def test_rewritten_args_are_what_the_tool_receives(tmp_path: Path) -> None:
    plugins = ExampleHost(tmp_path, rewriter=rewriter)
    ran: list[Any] = []
    agent = _agent(_model("echo", {"text": "quiet"}), AgentplugMiddleware(plugins.host), ran)
    assert _tool_message(_invoke(agent)).content == "echo: QUIET"
    assert ran == [("echo", "QUIET")]


def test_an_approved_call_runs_and_allow_always_becomes_a_grant(tmp_path: Path) -> None:
    plugins = ExampleHost(tmp_path)
    resolver = ScriptedResolver(["allow-always"])
    broker = ApprovalBroker(resolver, store=plugins.host.gateway.store)
    middleware = AgentplugMiddleware(plugins.host, broker=broker)
    ran: list[Any] = []
    _invoke(_agent(_model("web_search", {"query": "mcp"}), middleware, ran))
    _invoke(_agent(_model("web_search", {"query": "mcp"}), middleware, ran))
    assert ran == [("web_search", "mcp"), ("web_search", "mcp")]
    assert len(resolver.asked) == 1


def test_an_unanswered_approval_blocks_the_call(tmp_path: Path) -> None:
    plugins = ExampleHost(tmp_path)
    ran: list[Any] = []
    agent = _agent(_model("web_search", {"query": "x"}), AgentplugMiddleware(plugins.host), ran)
    assert "needs approval" in str(_tool_message(_invoke(agent)).content)
    assert ran == []


def test_the_audit_log_sees_the_call_under_langchains_ids(tmp_path: Path) -> None:
    plugins = ExampleHost(tmp_path)
    agent = _agent(_model("echo", {"text": "hi"}), AgentplugMiddleware(plugins.host), [])
    state = _invoke(agent, thread="thread-42")
    before, after = plugins.audit_lines("before_tool_call"), plugins.audit_lines("after_tool_call")
    assert len(after) == 1
    assert after[0]["event"]["tool_call_id"] == "call-9"
    assert after[0]["session_id"] == "thread-42"
    assert after[0]["session_key"] == "agent:main:langchain:thread-42"
    assert after[0]["run_id"] == before[0]["run_id"] == state["agentplug_run_id"]


def test_a_run_id_given_to_langgraph_is_the_hooks_run_id(tmp_path: Path) -> None:
    plugins = ExampleHost(tmp_path)
    agent = _agent(_model("echo", {"text": "hi"}), AgentplugMiddleware(plugins.host), [])
    run_id = "7d1f0c3e-2b54-4c1a-9a57-2f0d4e7b9c11"
    asyncio.run(
        agent.ainvoke(
            {"messages": [{"role": "user", "content": "go"}]},
            {"configurable": {"thread_id": "t"}, "run_id": run_id},
        )
    )
    assert plugins.audit_lines("after_tool_call")[0]["run_id"] == run_id


def test_the_final_reply_goes_through_message_sending(tmp_path: Path) -> None:
    plugins = ExampleHost(tmp_path)
    agent = _agent(
        _model("echo", {"text": "a"}, "mail ops@example.com"), AgentplugMiddleware(plugins.host), []
    )
    assert _invoke(agent)["messages"][-1].content == "mail [REDACTED:email]"


def test_a_cancelled_reply_is_emptied_and_says_who_cancelled(tmp_path: Path) -> None:
    plugins = ExampleHost(tmp_path)
    middleware = AgentplugMiddleware(plugins.host)
    agent = _agent(_model("echo", {"text": "a"}, "about Project Nightingale"), middleware, [])
    assert _invoke(agent)["messages"][-1].content == ""
    assert middleware.last_delivery is not None
    assert middleware.last_delivery.cancelled_by == "message-redactor"


def test_a_synchronous_invoke_is_gated_too(tmp_path: Path) -> None:
    plugins = ExampleHost(tmp_path)
    ran: list[Any] = []
    agent = _agent(
        _model("delete_everything", {"confirm": True}), AgentplugMiddleware(plugins.host), ran
    )
    state = agent.invoke({"messages": [{"role": "user", "content": "go"}]})
    assert ran == []
    assert "blocked by the operator" in str(_tool_message(state).content)
