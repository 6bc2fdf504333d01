"""Tools the model may call: every registered action, plain Python tools, other sources.

A :class:`ToolRegistry` holds :class:`Tool` objects directly (``add``, ``add_python``)
and *sources* that list their tools when asked (``add_source``): the action runtime is
one (every built-in, plugin-provided and custom action becomes a tool, live), and a
later source such as an MCP server joins the same way, its tools namespaced
``<namespace>__<tool>``. Whatever the source, every call the model makes goes through
the one gate path of the runner (trusted policies, ``before_tool_call``, approvals, exec
env): sources only describe and run tools, they never decide whether a call may run.
"""

from __future__ import annotations

import inspect
import logging
import re
import types
import typing
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from agentplug.actions.flow import execute_action
from agentplug.actions.flow.parameters import ParameterValidationError, check_parameters
from agentplug.actions.model import Action, ActionResult, Message, State
from agentplug.agent.providers.base import ToolSchema

if TYPE_CHECKING:
    from agentplug.actions.runtime import AgentRuntime
    from agentplug.services.signals import AbortSignal

__all__ = [
    "ActionToolSource",
    "Tool",
    "ToolCallContext",
    "ToolError",
    "ToolOutput",
    "ToolRegistry",
    "ToolSource",
    "action_schema",
]

log = logging.getLogger("agentplug.agent")

_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


class ToolError(ValueError):
    """A tool definition is invalid (bad name, duplicate, unsupported signature)."""


@dataclass
class ToolCallContext:
    """What a running tool may know about the call."""

    run_id: str | None = None
    session_key: str | None = None
    tool_call_id: str | None = None
    user_text: str = ""
    exec_env: dict[str, str] | None = None
    """The filtered environment to run an exec tool with (``resolve_exec_env``)."""
    signal: AbortSignal | None = None


@dataclass
class ToolOutput:
    """A tool's result: ``content`` goes to the model; ``details`` stay runtime metadata
    (stripped before provider replay, bounded when persisted)."""

    content: str
    details: dict[str, Any] | None = None
    is_error: bool = False


ToolRun = Callable[[dict[str, Any], ToolCallContext], Awaitable[Any] | Any]


@dataclass
class Tool:
    """One tool: its schema for the model and how to run it."""

    name: str
    description: str
    parameters: Mapping[str, Any]
    run: ToolRun
    source: str = "host"
    """``action``, ``python`` or a source namespace."""
    kind: str | None = None
    """``tool_kind`` for the gate (``exec`` makes the call resolve an exec env)."""

    def schema(self) -> ToolSchema:
        """The schema offered to the model."""
        return ToolSchema(self.name, self.description, self.parameters)


@runtime_checkable
class ToolSource(Protocol):
    """Something that lists tools on demand (the action runtime, an MCP server...)."""

    def tools(self) -> Iterable[Tool]:
        """The source's current tools (called when the runner builds a request)."""
        ...


def action_schema(action: Action) -> dict[str, Any]:
    """The JSON schema of an action's parameters (type, description, enum, bounds)."""
    properties: dict[str, Any] = {}
    required: list[str] = []
    for param in action.parameters:
        schema = param.schema_
        prop: dict[str, Any] = {"type": schema.type}
        if param.description:
            prop["description"] = param.description
        for key in ("enum", "default", "pattern", "minimum", "maximum"):
            value = getattr(schema, key)
            if value is not None:
                prop[key] = value
        properties[param.name] = prop
        if param.required and not schema.has_default:
            required.append(param.name)
    out: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        out["required"] = required
    out["additionalProperties"] = False
    return out


def _action_description(action: Action) -> str:
    parts = [action.description]
    if action.similes:
        parts.append("Also known as: " + ", ".join(action.similes) + ".")
    return " ".join(parts)


def _result_output(result: ActionResult) -> ToolOutput:
    details: dict[str, Any] = {"success": result.success}
    if result.data:
        details["data"] = result.data
    if result.attachments:
        details["attachments"] = [a.model_dump(mode="json") for a in result.attachments]
    return ToolOutput(
        result.text or ("ok" if result.success else "failed"), details, not result.success
    )


class ActionToolSource:
    """Every action of an action runtime, as tools (read live: new actions appear)."""

    def __init__(self, runtime: AgentRuntime) -> None:
        self.runtime = runtime
        self._warned: set[str] = set()

    def tools(self) -> list[Tool]:
        """One tool per registered action (names a model cannot call are left out)."""
        found = []
        for action in self.runtime.registry.all():
            if not _NAME.match(action.name):
                if action.name not in self._warned:
                    self._warned.add(action.name)
                    log.warning(
                        "action %r is not offered to the model as a tool: tool names are "
                        "1-64 letters, digits, '_' or '-' (rename it in SCREAMING_SNAKE_CASE)",
                        action.name,
                    )
                continue
            found.append(self._tool(action))
        return found

    def _tool(self, action: Action) -> Tool:
        runtime = self.runtime

        async def run(params: dict[str, Any], call: ToolCallContext) -> ToolOutput:
            try:
                checked = check_parameters(action, params)
            except ParameterValidationError as exc:
                return ToolOutput(str(exc), {"parameter": exc.parameter}, is_error=True)
            message = Message(text=call.user_text, room_id=call.session_key)
            result = await execute_action(action, runtime, message, State(), checked)
            return _result_output(result)

        kind = action.metadata.get("tool_kind")
        return Tool(
            name=action.name,
            description=_action_description(action),
            parameters=action_schema(action),
            run=run,
            source="action",
            kind=str(kind) if kind else None,
        )


_JSON_TYPES: dict[Any, str] = {
    str: "string",
    int: "integer",
    float: "number",
    bool: "boolean",
    dict: "object",
    list: "array",
}


def _json_type(annotation: Any) -> str:
    origin = typing.get_origin(annotation) or annotation
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        return _json_type(args[0]) if len(args) == 1 else "string"
    return _JSON_TYPES.get(origin, "string")


def _python_schema(fn: Callable[..., Any]) -> dict[str, Any]:
    signature = inspect.signature(fn)
    hints = typing.get_type_hints(fn)
    properties: dict[str, Any] = {}
    required: list[str] = []
    for name, param in signature.parameters.items():
        if name == "call" or param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        properties[name] = {"type": _json_type(hints.get(name, str))}
        if param.default is inspect.Parameter.empty:
            required.append(name)
    out: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        out["required"] = required
    return out


def _python_runner(fn: Callable[..., Any], schema: Mapping[str, Any]) -> ToolRun:
    wants_call = "call" in inspect.signature(fn).parameters
    allowed = set((schema.get("properties") or {}).keys())
    required = list(schema.get("required") or [])

    async def run(params: dict[str, Any], call: ToolCallContext) -> ToolOutput:
        unknown = sorted(set(params) - allowed)
        if unknown:
            return ToolOutput(f"unknown parameter(s): {', '.join(unknown)}", is_error=True)
        missing = [name for name in required if name not in params]
        if missing:
            return ToolOutput(f"missing required parameter(s): {', '.join(missing)}", is_error=True)
        kwargs = dict(params)
        if wants_call:
            kwargs["call"] = call
        value = fn(**kwargs)
        if inspect.isawaitable(value):
            value = await value
        return value if isinstance(value, ToolOutput) else ToolOutput(_text(value))

    return run


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    import json

    try:
        return json.dumps(value, default=str)
    except (TypeError, ValueError):
        return str(value)


@dataclass
class _Source:
    source: ToolSource
    namespace: str | None

    def tools(self) -> list[Tool]:
        """The source's tools, named ``<namespace>__<tool>`` when it has a namespace."""
        if not self.namespace:
            return list(self.source.tools())
        return [
            Tool(
                name=f"{self.namespace}__{tool.name}",
                description=tool.description,
                parameters=tool.parameters,
                run=tool.run,
                source=self.namespace,
                kind=tool.kind,
            )
            for tool in self.source.tools()
        ]


def _refuse_clashes(new: Iterable[Tool], present: Iterable[Tool]) -> None:
    held = {tool.name: tool for tool in present}
    for tool in new:
        other = held.get(tool.name)
        if other is not None:
            raise ToolError(
                f"tool {tool.name!r} of {tool.source} has the name of the {other.source} tool "
                f"{other.name!r}: one name must mean one tool (a policy for it would govern "
                "both); rename or exclude one"
            )


@dataclass
class ToolRegistry:
    """The tools of one runner (see the module docstring)."""

    _tools: dict[str, Tool] = field(default_factory=dict)
    _sources: list[_Source] = field(default_factory=list)
    _warned: set[tuple[str, str]] = field(default_factory=set)

    def add(self, tool: Tool) -> Tool:
        """Add one tool; its name must be unique and match ``[A-Za-z0-9_-]{1,64}``."""
        if not _NAME.match(tool.name):
            raise ToolError(
                f"tool name {tool.name!r} must be 1-64 letters, digits, '_' or '-' "
                "(what chat-completions servers accept)"
            )
        if tool.name in self._tools:
            raise ToolError(f"tool {tool.name!r} is already registered; pick another name")
        _refuse_clashes([tool], self.all())
        self._tools[tool.name] = tool
        return tool

    def add_python(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        parameters: Mapping[str, Any] | None = None,
        kind: str | None = None,
    ) -> Tool:
        """Offer a plain function (sync or async) as a tool.

        The schema comes from its signature (``str``/``int``/``float``/``bool``/``dict``/
        ``list``; parameters without a default are required) unless ``parameters`` is
        given; the description defaults to the docstring. A parameter named ``call``
        receives the :class:`ToolCallContext`. The return value becomes the content
        (strings as they are, other values as JSON); return a :class:`ToolOutput` for
        ``details`` or errors.
        """
        schema = dict(parameters) if parameters is not None else _python_schema(fn)
        text = description or inspect.getdoc(fn) or ""
        if not text.strip():
            raise ToolError(
                f"tool {name or fn.__name__!r} has no description: give description= or a "
                "docstring (the model chooses tools by their description)"
            )
        return self.add(
            Tool(
                name=name or fn.__name__,
                description=text.strip(),
                parameters=schema,
                run=_python_runner(fn, schema),
                source="python",
                kind=kind,
            )
        )

    def add_source(self, source: ToolSource, namespace: str | None = None) -> None:
        """Add a source whose tools are listed on demand (named ``<namespace>__<tool>``).

        A tool named like one the registry already has is refused (:class:`ToolError`):
        a name means one tool, which the policies written for it govern.
        """
        entry = _Source(source, namespace)
        _refuse_clashes(entry.tools(), self.all())
        self._sources.append(entry)

    def add_actions(self, runtime: AgentRuntime) -> None:
        """Offer every action of ``runtime`` (live) as a tool."""
        self.add_source(ActionToolSource(runtime))

    def all(self) -> list[Tool]:
        """Every tool: direct ones first, then each source's. A name that a source lists
        later than another holder (a live source's new tool) is not offered, with a
        warning."""
        found = dict(self._tools)
        for entry in self._sources:
            for tool in entry.tools():
                held = found.setdefault(tool.name, tool)
                if held is not tool and (tool.name, tool.source) not in self._warned:
                    self._warned.add((tool.name, tool.source))
                    log.warning(
                        "tool %r of %s is not offered: the %s tool of that name was there first",
                        tool.name,
                        tool.source,
                        held.source,
                    )
        return list(found.values())

    def get(self, name: str) -> Tool | None:
        """The tool called ``name`` (direct or from a source)."""
        tool = self._tools.get(name)
        if tool is not None:
            return tool
        return next((t for t in self.all() if t.name == name), None)

    def schemas(self, exclude: Iterable[str] = ()) -> list[ToolSchema]:
        """The schemas to offer the model."""
        skip = set(exclude)
        return [t.schema() for t in self.all() if t.name not in skip]

    def __len__(self) -> int:
        return len(self.all())
