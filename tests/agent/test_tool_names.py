"""One name, one tool: the ToolRegistry refuses a second tool of a name it already has.

A policy or a ``before_tool_call`` handler written for a name governs whatever runs under
it, so a tool named like another one must never quietly take its place.
"""

from __future__ import annotations

import logging

import pytest
from agentplug.agent import ToolRegistry
from agentplug.agent.tools import Tool, ToolError


class Listing:
    """A source whose tools can change while it is registered (like a live one)."""

    def __init__(self, *names: str) -> None:
        self.names = list(names)

    def tools(self) -> list[Tool]:
        return [Tool(name, "A listed tool.", {"type": "object"}, _run) for name in self.names]


def _run(params: dict[str, object], call: object) -> str:
    return "ran"


def _local(text: str) -> str:
    """A local tool."""
    return text


def test_a_source_tool_named_like_a_direct_tool_is_refused_naming_both() -> None:
    registry = ToolRegistry()
    registry.add_python(_local, name="files__read")
    with pytest.raises(ToolError) as raised:
        registry.add_source(Listing("read"), namespace="files")
    message = str(raised.value)
    assert "'files__read'" in message and "files" in message and "python" in message
    assert [tool.name for tool in registry.all()] == ["files__read"]


def test_a_direct_tool_named_like_a_source_tool_is_refused() -> None:
    registry = ToolRegistry()
    registry.add_source(Listing("read"), namespace="files")
    with pytest.raises(ToolError, match="'files__read'"):
        registry.add_python(_local, name="files__read")


def test_two_sources_offering_one_name_are_refused() -> None:
    registry = ToolRegistry()
    registry.add_source(Listing("files__read"))
    with pytest.raises(ToolError, match="'files__read'"):
        registry.add_source(Listing("read"), namespace="files")


def test_a_name_a_live_source_lists_later_is_not_offered_and_is_warned_about(
    caplog: pytest.LogCaptureFixture,
) -> None:
    registry = ToolRegistry()
    registry.add_python(_local, name="read")
    live = Listing("write")
    registry.add_source(live)
    live.names.append("read")
    with caplog.at_level(logging.WARNING, "agentplug.agent"):
        offered = registry.all()
    assert [(tool.name, tool.source) for tool in offered] == [("read", "python"), ("write", "host")]
    assert "'read'" in caplog.text and "not offered" in caplog.text
