"""ToolRegistry: actions become tools with JSON schemas; Python tools; sources."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from agentplug import PluginHost
from agentplug.actions.model import Action, ActionParameter, ActionResult
from agentplug.agent import AgentRunner, ScriptedProvider, ToolOutput, ToolRegistry
from agentplug.agent.tools import Tool, ToolCallContext, ToolError, action_schema


def _weather() -> Action:
    return Action(
        name="CHECK_WEATHER",
        description="Check the weather",
        similes=("FORECAST",),
        side_effects=False,
        handler=lambda rt, msg, st, opts: ActionResult(
            success=True, text=f"sunny in {opts.parameters['city']}", data={"temp": 21}
        ),
        parameters=[
            ActionParameter(name="city", description="the city", required=True),
            ActionParameter.model_validate(
                {"name": "units", "schema": {"type": "string", "enum": ["c", "f"], "default": "c"}}
            ),
            ActionParameter.model_validate(
                {"name": "days", "schema": {"type": "integer", "minimum": 1, "maximum": 7}}
            ),
        ],
    )


def test_an_action_schema_carries_types_descriptions_enums_bounds_and_required() -> None:
    assert action_schema(_weather()) == {
        "type": "object",
        "properties": {
            "city": {"type": "string", "description": "the city"},
            "units": {"type": "string", "enum": ["c", "f"], "default": "c"},
            "days": {"type": "integer", "minimum": 1, "maximum": 7},
        },
        "required": ["city"],
        "additionalProperties": False,
    }


def _runner_with_actions() -> tuple[AgentRunner, ScriptedProvider]:
    host = PluginHost()
    host.gateway.actions.registry.register(_weather(), "host")
    provider = ScriptedProvider(
        [
            {"tool_calls": [{"id": "t1", "name": "CHECK_WEATHER", "arguments": {"city": "Oslo"}}]},
            "ok",
        ]
    )
    return AgentRunner(host, provider), provider


def test_a_side_effect_free_action_is_offered_as_a_tool_and_runs_through_the_flow() -> None:
    runner, provider = _runner_with_actions()
    result = asyncio.run(runner.run_turn("weather?", session_key="s1"))
    names = [t.name for t in provider.requests[0].tools]
    assert "CHECK_WEATHER" in names and "CORE_STATUS" in names  # built-ins too
    weather = next(t for t in provider.requests[0].tools if t.name == "CHECK_WEATHER")
    assert "Also known as: FORECAST." in weather.description
    tool_message = next(m for m in result.transcript if m["role"] == "tool")
    assert tool_message["content"] == "sunny in Oslo"
    assert tool_message["details"] == {"success": True, "data": {"temp": 21}}


def test_an_action_tool_with_invalid_arguments_is_an_error_the_model_reads() -> None:
    host = PluginHost()
    host.gateway.actions.registry.register(_weather(), "host")
    provider = ScriptedProvider(
        [
            {
                "tool_calls": [
                    {"id": "t1", "name": "CHECK_WEATHER", "arguments": {"city": "Oslo", "days": 30}}
                ]
            },
            "ok",
        ]
    )
    runner = AgentRunner(host, provider)
    asyncio.run(runner.run_turn("weather?", session_key="s1"))
    replay = provider.requests[1].messages[-1]
    assert replay["role"] == "tool" and "days" in replay["content"]


def test_excluded_tools_are_not_offered() -> None:
    host = PluginHost()
    provider = ScriptedProvider(["ok"])
    runner = AgentRunner(host, provider, config={"tools": {"exclude": ["CORE_STATUS"]}})
    asyncio.run(runner.run_turn("hi", session_key="s1"))
    names = [t.name for t in provider.requests[0].tools]
    assert "CORE_STATUS" not in names and "LIST_EJECTED_PLUGINS" in names


def test_python_tool_schema_comes_from_the_signature() -> None:
    registry = ToolRegistry()

    def search(query: str, limit: int = 5, exact: bool | None = None) -> str:
        """Search the index."""
        return query

    tool = registry.add_python(search)
    assert tool.description == "Search the index."
    assert tool.parameters == {
        "type": "object",
        "properties": {
            "query": {"type": "string"},
            "limit": {"type": "integer"},
            "exact": {"type": "boolean"},
        },
        "required": ["query"],
    }


def test_python_tools_refuse_unknown_and_missing_parameters() -> None:
    registry = ToolRegistry()
    tool = registry.add_python(lambda city: city, name="w", description="weather")
    unknown = asyncio.run(tool.run({"city": "x", "evil": 1}, ToolCallContext()))
    missing = asyncio.run(tool.run({}, ToolCallContext()))
    assert isinstance(unknown, ToolOutput) and unknown.is_error and "evil" in unknown.content
    assert isinstance(missing, ToolOutput) and missing.is_error and "city" in missing.content


@pytest.mark.parametrize("name", ["has space", "x" * 65, "semi;colon", ""])
def test_tool_names_must_be_callable_by_a_model(name: str) -> None:
    with pytest.raises(ToolError, match="tool name"):
        ToolRegistry().add(Tool(name, "d", {"type": "object"}, lambda p, c: "x"))


def test_a_tool_without_a_description_is_refused() -> None:
    with pytest.raises(ToolError, match="no description"):
        ToolRegistry().add_python(lambda: None, name="nodoc")


def test_a_source_joins_namespaced_and_its_calls_go_through_the_gate() -> None:
    class Files:
        def tools(self) -> list[Tool]:
            return [Tool("read", "Read a file", {"type": "object"}, lambda p, c: "contents")]

    seen: list[str] = []

    def register(api: Any) -> None:
        api.on("before_tool_call", lambda event: seen.append(event.tool_name))

    host = PluginHost()
    host.register(register, "watcher")
    provider = ScriptedProvider([{"tool_calls": [{"id": "t", "name": "files__read"}]}, "ok"])
    runner = AgentRunner(host, provider, config={"tools": {"actions": False}})
    runner.tools.add_source(Files(), namespace="files")
    result = asyncio.run(runner.run_turn("read it", session_key="s1"))
    assert seen == ["files__read"]
    assert next(m for m in result.transcript if m["role"] == "tool")["content"] == "contents"
