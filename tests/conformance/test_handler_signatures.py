"""HOOKS.md §2 (handler arguments): what an ``api.on`` or ``@hookimpl`` handler receives.

Only parameters without a default decide, by position: none gets nothing, one gets the
event, two get the event and the context. A defaulted parameter keeps its default, which is
how a seed-style handler binds a loop variable (``lambda event, pid=pid: ...``).
"""

from __future__ import annotations

import functools
from typing import Any

from agentplug import hookimpl
from agentplug_hookspecs.tools import ToolCallEvent, ToolContext

from .conftest import ApiPlugin, dispatch, make_host, on

TOOL_EVENT = {"tool_name": "exec", "params": {"command": "ls"}}
TOOL_CTX = {"tool_name": "exec"}


def _call(plugin: object) -> None:
    host = make_host()
    host.register(plugin, "sig")
    dispatch(host, "before_tool_call", TOOL_EVENT, TOOL_CTX)


def test_a_defaulted_second_parameter_keeps_its_bound_value() -> None:
    seen: list[tuple[str, Any]] = []
    plugin = ApiPlugin(
        *[
            ("before_tool_call", lambda event, pid=pid: seen.append((event.tool_name, pid)), {})
            for pid in ("first", "second")
        ]
    )
    _call(plugin)
    assert seen == [("exec", "first"), ("exec", "second")]


def test_an_async_handler_with_a_defaulted_second_parameter_keeps_its_default() -> None:
    seen: list[Any] = []

    async def handler(event: Any, pid: str = "bound") -> None:
        seen.append((type(event), pid))

    _call(on("before_tool_call", handler))
    assert seen == [(ToolCallEvent, "bound")]


def test_a_bound_method_with_a_defaulted_parameter_keeps_its_default() -> None:
    seen: list[Any] = []

    class Guard:
        def check(self, event: Any, pid: str = "bound") -> None:
            seen.append((type(event), pid))

    _call(on("before_tool_call", Guard().check))
    assert seen == [(ToolCallEvent, "bound")]


def test_a_defaulted_ctx_parameter_is_not_given_the_context_in_either_style() -> None:
    seen: list[Any] = []

    def handler(event: Any, ctx: Any = None) -> None:
        seen.append(("api.on", ctx))

    class Decorated:
        @hookimpl
        def before_tool_call(self, event: Any, ctx: Any = None) -> None:
            seen.append(("hookimpl", ctx))

    _call(on("before_tool_call", handler))
    _call(Decorated())
    assert seen == [("api.on", None), ("hookimpl", None)]


def test_two_required_parameters_get_the_event_and_the_context_whatever_their_names() -> None:
    seen: list[Any] = []

    def named(event: Any, ctx: Any) -> None:
        seen.append((type(event), type(ctx)))

    def seed_style(e: Any, c: Any, extra: str = "kept") -> None:
        seen.append((type(e), type(c), extra))

    _call(ApiPlugin(("before_tool_call", named, {}), ("before_tool_call", seed_style, {})))
    assert seen == [(ToolCallEvent, ToolContext), (ToolCallEvent, ToolContext, "kept")]


def test_a_partial_or_a_callable_object_is_called_by_its_required_parameters() -> None:
    seen: list[Any] = []

    def tagged(tag: str, event: Any, ctx: Any) -> None:
        seen.append((tag, type(event), type(ctx)))

    class Handler:
        def __call__(self, event: Any, pid: str = "bound") -> None:
            seen.append(("object", type(event), pid))

    _call(
        ApiPlugin(
            ("before_tool_call", functools.partial(tagged, "partial"), {}),
            ("before_tool_call", Handler(), {}),
        )
    )
    assert seen == [("partial", ToolCallEvent, ToolContext), ("object", ToolCallEvent, "bound")]


def test_a_var_positional_handler_gets_the_event_and_the_context() -> None:
    seen: list[tuple[Any, ...]] = []

    def handler(*args: Any) -> None:
        seen.append(tuple(type(a) for a in args))

    _call(on("before_tool_call", handler))
    assert seen == [(ToolCallEvent, ToolContext)]
