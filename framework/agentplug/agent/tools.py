"""Tools the model may call: the actions an operator allowed, Python tools, other sources.

A :class:`ToolRegistry` holds :class:`Tool` objects directly (``add``, ``add_python``)
and *sources* that list their tools when asked (``add_source``): the action runtime is
one (the built-in, plugin-provided and custom actions that ``agent.tools`` allows become
tools, live; see :mod:`~agentplug.agent.action_tools`), and a later source such as an
MCP server joins the same way, its tools namespaced ``<namespace>__<tool>``. A source
may list per turn (``tools_for``): the action source leaves out an action whose
``validate()`` fails for the turn's message. Whatever the source, every call the model
makes goes through the one gate path of the runner (trusted policies,
``before_tool_call``, approvals, exec env): sources describe and run tools, and a tool
may carry an approval the operator requires (:attr:`Tool.approval`), but they never
decide alone whether a call may run.
"""

from __future__ import annotations

import dataclasses
import inspect
import logging
import re
import types
import typing
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from agentplug_hookspecs.tools import ApprovalRequest

from agentplug.actions.catalogue import unavailable_reason
from agentplug.actions.flow import execute_action
from agentplug.actions.flow.parameters import ParameterValidationError, check_parameters
from agentplug.actions.model import Action, ActionResult, Message, State
from agentplug.agent.action_tools import (
    ToolPolicy,
    action_description,
    action_schema,
    operator_approval,
    validate_refusal,
    validate_refusals,
)
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
    "ToolPolicy",
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
ToolValidate = Callable[[ToolCallContext], Awaitable[str | None]]
"""Why a tool may not run now (``None``: it may); asked before the gate."""


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
    approval: ApprovalRequest | None = None
    """An approval the gate asks before every call, whatever the plugins say (an allowed
    side-effecting action not in ``agent.tools.without_approval``)."""
    validate: ToolValidate | None = None
    """Asked first at every call: a reason to refuse it (an action's ``validate()``)."""

    def schema(self) -> ToolSchema:
        """The schema offered to the model."""
        return ToolSchema(self.name, self.description, self.parameters)


@runtime_checkable
class ToolSource(Protocol):
    """Something that lists tools on demand (the action runtime, an MCP server...)."""

    def tools(self) -> Iterable[Tool]:
        """The source's current tools (called when the runner builds a request).

        A source that lists per turn also defines ``async tools_for(call) -> list[Tool]``
        (``call``: a :class:`ToolCallContext` with the turn's run id, session and user
        text); :meth:`ToolRegistry.offered` prefers it.
        """
        ...


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
    """The actions of an action runtime that ``policy`` allows, as tools (read live).

    Left out: actions that cannot run as configured (``agentplug actions list`` shows
    them as not enabled, e.g. ``SHELL_COMMAND`` while the shell is off), actions the
    policy does not allow, names a model cannot call and, per turn (:meth:`tools_for`),
    actions whose ``validate()`` fails for the turn's message. A call is validated again
    before it runs, and refused by name when ``validate()`` says no.
    """

    _CACHED_RUNS = 64

    def __init__(self, runtime: AgentRuntime, policy: ToolPolicy | None = None) -> None:
        self.runtime = runtime
        self.policy = policy if policy is not None else ToolPolicy()
        self._warned: set[str] = set()
        # validate() answers per turn (run id): a turn's message does not change between
        # its model calls, so each action is validated once per turn for the listing.
        self._validated: OrderedDict[str, dict[Action, str | None]] = OrderedDict()
        self._built: dict[Action, Tool] = {}

    def actions(self) -> list[Action]:
        """The actions offered (before any turn's ``validate()``), in registration order."""
        settings = self.runtime.host.config.actions
        found = []
        for action in self.runtime.registry.all():
            if not self.policy.offers(action) or unavailable_reason(action, settings):
                continue
            if not _NAME.match(action.name):
                if action.name not in self._warned:
                    self._warned.add(action.name)
                    log.warning(
                        "action %r is not offered to the model as a tool: tool names are "
                        "1-64 letters, digits, '_' or '-' (rename it in SCREAMING_SNAKE_CASE)",
                        action.name,
                    )
                continue
            found.append(action)
        return found

    def tools(self) -> list[Tool]:
        """One tool per offered action (no turn: ``validate()`` is not asked)."""
        return [tool for _, tool in self._tools_of(self.actions())]

    def _tools_of(self, actions: list[Action]) -> list[tuple[Action, Tool]]:
        # A tool depends only on its action and the policy, so it is built once; the map
        # follows the registry (an unregistered action's tool goes with it).
        built = self._built
        self._built = {a: built.get(a) or self._tool(a) for a in actions}
        return list(self._built.items())

    async def tools_for(self, call: ToolCallContext) -> list[Tool]:
        """The offered actions whose ``validate()`` holds for ``call``'s message."""
        actions = self.actions()
        refusals = self._refusals(call.run_id)
        todo = [a for a in actions if a not in refusals]
        if todo:
            answers = await validate_refusals(todo, self.runtime, _message(call))
            refusals.update(zip(todo, answers, strict=True))
        return [tool for action, tool in self._tools_of(actions) if refusals[action] is None]

    def _refusals(self, run_id: str | None) -> dict[Action, str | None]:
        """The ``validate()`` answers already known for turn ``run_id`` (kept for the
        latest turns only)."""
        if not run_id:
            return {}
        known = self._validated.pop(run_id, None)
        self._validated[run_id] = known = known if known is not None else {}
        while len(self._validated) > self._CACHED_RUNS:
            self._validated.popitem(last=False)
        return known

    def _tool(self, action: Action) -> Tool:
        runtime = self.runtime

        async def validate(call: ToolCallContext) -> str | None:
            refused = await validate_refusal(action, runtime, _message(call))
            if refused is None:
                return None
            return f"action {action.name} refused: {refused}; it cannot run now"

        async def run(params: dict[str, Any], call: ToolCallContext) -> ToolOutput:
            message = _message(call)
            try:
                checked = check_parameters(action, params)
            except ParameterValidationError as exc:
                return ToolOutput(str(exc), {"parameter": exc.parameter}, is_error=True)
            result = await execute_action(action, runtime, message, State(), checked)
            return _result_output(result)

        kind = action.metadata.get("tool_kind")
        return Tool(
            name=action.name,
            description=action_description(action),
            parameters=action_schema(action),
            run=run,
            source="action",
            kind=str(kind) if kind else None,
            approval=operator_approval(action) if self.policy.needs_approval(action) else None,
            validate=validate,
        )


def _message(call: ToolCallContext) -> Message:
    """The message an action tool validates and runs with (the turn's user text)."""
    return Message(text=call.user_text, room_id=call.session_key)


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

    def named(self, tool: Tool) -> Tool:
        """``tool`` named ``<namespace>__<tool>`` when the source has a namespace."""
        if not self.namespace:
            return tool
        return dataclasses.replace(
            tool, name=f"{self.namespace}__{tool.name}", source=self.namespace
        )

    def tools(self) -> list[Tool]:
        """The source's tools, as the registry names them."""
        return [self.named(tool) for tool in self.source.tools()]


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

    def add_actions(self, runtime: AgentRuntime, policy: ToolPolicy | None = None) -> None:
        """Offer the actions of ``runtime`` that ``policy`` allows (live) as tools.

        The default policy offers the actions that declare no side effects.
        """
        self.add_source(ActionToolSource(runtime, policy))

    def _merge(self, listed: Iterable[tuple[_Source, Iterable[Tool]]]) -> list[Tool]:
        """Direct tools first, then each source's (named by :meth:`_Source.name`). A name
        that a source lists later than another holder (a live source's new tool) is not
        offered, with a warning."""
        found = dict(self._tools)
        for entry, tools in listed:
            for tool in tools:
                tool = entry.named(tool)
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

    def all(self) -> list[Tool]:
        """Every tool: direct ones first, then each source's (first name wins)."""
        return self._merge((entry, entry.source.tools()) for entry in self._sources)

    async def offered(
        self, call: ToolCallContext | None = None, exclude: Iterable[str] = ()
    ) -> list[Tool]:
        """The tools to offer the model in one turn, ``call`` naming the turn (run id,
        session, user text): :meth:`all` without ``exclude``, each source that lists per
        turn (``tools_for(call)``) asked for this turn's tools."""
        context = call if call is not None else ToolCallContext()
        listed: list[tuple[_Source, Iterable[Tool]]] = []
        for entry in self._sources:
            tools_for = getattr(entry.source, "tools_for", None)
            if callable(tools_for):
                listed.append((entry, await tools_for(context)))
            else:
                listed.append((entry, entry.source.tools()))
        skip = set(exclude)
        return [t for t in self._merge(listed) if t.name not in skip]

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
