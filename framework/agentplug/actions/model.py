"""The Action model: what an action is, what it receives and what it returns.

An action is a discrete capability the agent can invoke in response to a conversation
(``RESTART_AGENT``, ``CHECK_WEATHER``...). Plugins and hosts build :class:`Action` objects;
the registry (:mod:`agentplug.actions.registry`) keeps them and the execution flow
(:mod:`agentplug.actions.flow`) selects, validates, parameterises and runs them.

Payloads that cross a JSON boundary (parameters, results, messages) are pydantic models with
``snake_case`` fields and ``camelCase`` aliases. :class:`Action` itself holds callables, so it is
a frozen dataclass checked at construction time (the best practices of the specification are
enforced here, once, instead of at every call site).
"""

from __future__ import annotations

import logging
import re
import warnings
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal, Protocol, TypeAlias, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic.alias_generators import to_camel

__all__ = [
    "Action",
    "ActionDefinitionError",
    "ActionExample",
    "ActionHandler",
    "ActionNamingWarning",
    "ActionParameter",
    "ActionResult",
    "ActionRuntime",
    "ActionValidator",
    "Attachment",
    "HandlerOptions",
    "HandlerReturn",
    "Message",
    "ParameterSchema",
    "ParameterType",
    "State",
    "always_valid",
    "is_screaming_snake_case",
]

logger = logging.getLogger("agentplug.actions")

_SCREAMING_SNAKE = re.compile(r"^[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)*$")

ParameterType: TypeAlias = Literal["string", "number", "integer", "boolean", "object", "array"]
"""The JSON-Schema types a parameter may declare."""


class _Wire(BaseModel):
    """Base for JSON payloads: camelCase on the wire, snake_case in Python."""

    model_config = ConfigDict(
        populate_by_name=True,
        serialize_by_alias=True,
        alias_generator=to_camel,
    )


class ActionDefinitionError(ValueError):
    """An action (or one of its parameters) is malformed; the message names it and the fix."""


class ActionNamingWarning(UserWarning):
    """An action name does not follow the ``SCREAMING_SNAKE_CASE`` convention."""


def is_screaming_snake_case(name: str) -> bool:
    """Return whether ``name`` is ``SCREAMING_SNAKE_CASE`` (``RESTART_AGENT``)."""
    return bool(_SCREAMING_SNAKE.match(name))


# ---------------------------------------------------------------------------
# Conversation payloads


class Message(_Wire):
    """The message an action responds to: its text and optional structured content.

    ``content`` carries machine-readable input (for example ``{"action": "CHECK_WEATHER",
    "parameters": {"city": "Paris"}}``) that the default selector and extractor prefer over
    free text.
    """

    text: str = ""
    content: dict[str, Any] | None = None
    entity_id: str | None = None
    room_id: str | None = None


class State(_Wire):
    """Conversation state passed to ``validate`` and ``handler`` (free-form values)."""

    values: dict[str, Any] = Field(default_factory=dict)
    text: str = ""


class Attachment(_Wire):
    """A media item returned with a result (image, audio, file...)."""

    model_config = ConfigDict(extra="allow")

    url: str
    content_type: str | None = None
    title: str | None = None
    description: str | None = None


class ActionResult(_Wire):
    """What a handler returns. ``success`` is mandatory: every result states whether it worked.

    ``data`` is machine-readable metadata for other actions or the UI; ``attachments`` are media
    delivered with ``text``.
    """

    success: bool
    text: str = ""
    data: dict[str, Any] | None = None
    attachments: list[Attachment] | None = None

    @classmethod
    def failure(cls, text: str, **data: Any) -> ActionResult:
        """Build a failed result with ``text`` and optional ``data``."""
        return cls(success=False, text=text, data=data or None)


class HandlerOptions(_Wire):
    """Options passed to a handler; ``parameters`` holds the validated parameter values."""

    parameters: dict[str, Any] = Field(default_factory=dict)


class ActionExample(_Wire):
    """One turn of a conversation example (``name`` speaks ``text``, optionally naming actions)."""

    name: str
    text: str
    actions: list[str] = Field(default_factory=list)


# ---------------------------------------------------------------------------
# Parameters


class ParameterSchema(_Wire):
    """JSON-Schema-like constraints of one parameter.

    Only the keywords listed here are enforced; other JSON-Schema keywords are kept (so
    definitions round-trip) but ignored by the built-in validation.
    """

    model_config = ConfigDict(extra="allow")

    type: ParameterType = "string"
    enum: list[Any] | None = None
    default: Any = None
    pattern: str | None = None
    minimum: float | None = None
    maximum: float | None = None

    @field_validator("pattern")
    @classmethod
    def _pattern_compiles(cls, value: str | None) -> str | None:
        # Fail at definition time: a broken pattern would otherwise reject every call.
        if value is not None:
            try:
                re.compile(value)
            except re.error as exc:
                raise ValueError(
                    f"pattern {value!r} is not a valid regular expression: {exc}"
                ) from exc
        return value

    @model_validator(mode="after")
    def _bounds_ordered(self) -> ParameterSchema:
        if self.minimum is not None and self.maximum is not None and self.minimum > self.maximum:
            raise ValueError(
                f"minimum {self.minimum} is greater than maximum {self.maximum}; swap them"
            )
        return self

    @property
    def has_default(self) -> bool:
        """Whether a default value was declared (``null`` counts as no default)."""
        return self.default is not None


class ActionParameter(_Wire):
    """A declared input of an action: ``{name, description, required, schema}``.

    The Python attribute is ``schema_`` because ``schema`` is taken by pydantic; on the wire
    and in the constructor the key is ``schema``.
    """

    model_config = ConfigDict(frozen=True)

    name: str = Field(min_length=1)
    description: str = ""
    required: bool = False
    schema_: ParameterSchema = Field(default_factory=ParameterSchema, alias="schema")

    @field_validator("name")
    @classmethod
    def _name_is_identifier(cls, value: str) -> str:
        # Extractors read ``name=value`` and placeholders ``{{name}}``: keep names plain.
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.-]*", value):
            raise ValueError(
                f"parameter name {value!r} must start with a letter or '_' and contain only "
                "letters, digits, '_', '.', '-'"
            )
        return value


# ---------------------------------------------------------------------------
# Runtime and callables


@runtime_checkable
class ActionRuntime(Protocol):
    """What validators and handlers may ask of the runtime running them."""

    def get_service(self, name: str) -> object | None:
        """Return the service registered under ``name``, or ``None``."""
        ...

    def register_action(self, action: Action) -> None:
        """Make ``action`` available immediately (live registration)."""
        ...


HandlerReturn: TypeAlias = ActionResult | Mapping[str, Any]
"""A handler returns an :class:`ActionResult` (or a mapping that validates as one)."""

ActionValidator: TypeAlias = Callable[
    [ActionRuntime, Message, State | None], bool | Awaitable[bool]
]
"""``validate(runtime, message, state) -> bool``, sync or async."""

ActionHandler: TypeAlias = Callable[
    [ActionRuntime, Message, State | None, HandlerOptions | None],
    HandlerReturn | Awaitable[HandlerReturn],
]
"""``handler(runtime, message, state, options) -> ActionResult``, sync or async."""


def always_valid(runtime: ActionRuntime, message: Message, state: State | None) -> bool:
    """Default ``validate``: the action may always run."""
    return True


@dataclass(frozen=True, kw_only=True, eq=False)
class Action:
    """A discrete capability the agent can invoke.

    ``side_effects`` defaults to ``True``: an action is side-effecting unless it says it is
    not, so a model is never offered it without the operator's consent (``agent.tools``).

    Construction enforces the best practices of the specification: an empty ``name`` or
    ``description`` raises :class:`ActionDefinitionError`; a name that is not
    ``SCREAMING_SNAKE_CASE`` emits :class:`ActionNamingWarning` (and a log record) naming the
    action; parameter names must be unique. ``similes``, ``parameters`` and ``examples`` are
    stored as tuples so a registered action cannot be changed behind the registry's back.
    Equality and hashing are by identity: two separately built actions are different actions.
    """

    name: str
    description: str
    handler: ActionHandler
    validate: ActionValidator = always_valid
    similes: Sequence[str] = ()
    parameters: Sequence[ActionParameter] = ()
    examples: Sequence[Sequence[ActionExample]] = ()
    metadata: Mapping[str, Any] = field(default_factory=dict)
    side_effects: bool = True
    """Whether running it changes anything beyond the conversation: state, files, processes,
    messages to other people, calls to paid or outside services. An action that declares
    nothing counts as side-effecting; declare ``False`` for read-only and conversational
    actions (only those are offered to a model by default, see ``agent.tools``)."""

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise ActionDefinitionError(
                "an action needs a non-empty name; use SCREAMING_SNAKE_CASE such as 'MY_ACTION'"
            )
        if not isinstance(self.description, str) or not self.description.strip():
            raise ActionDefinitionError(
                f"action {self.name!r} has an empty description; describe what it does and "
                "when to use it (the agent selects actions by their description)"
            )
        if not callable(self.handler):
            raise ActionDefinitionError(f"action {self.name!r}: handler must be callable")
        if not callable(self.validate):
            raise ActionDefinitionError(f"action {self.name!r}: validate must be callable")
        if not isinstance(self.side_effects, bool):
            raise ActionDefinitionError(
                f"action {self.name!r}: side_effects must be True or False, got "
                f"{type(self.side_effects).__name__}"
            )
        params = tuple(
            p if isinstance(p, ActionParameter) else ActionParameter.model_validate(p)
            for p in self.parameters
        )
        seen: set[str] = set()
        for param in params:
            if param.name in seen:
                raise ActionDefinitionError(
                    f"action {self.name!r} declares parameter {param.name!r} twice; "
                    "parameter names must be unique"
                )
            seen.add(param.name)
        # Frozen dataclass: normalise through object.__setattr__ once, at construction.
        object.__setattr__(self, "parameters", params)
        object.__setattr__(self, "similes", tuple(str(s) for s in self.similes))
        object.__setattr__(self, "examples", tuple(tuple(turns) for turns in self.examples))
        object.__setattr__(self, "metadata", MappingProxyType(dict(self.metadata)))
        if not is_screaming_snake_case(self.name):
            suggestion = re.sub(r"[^A-Za-z0-9]+", "_", self.name)
            suggestion = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", suggestion).upper().strip("_")
            text = (
                f"action name {self.name!r} is not SCREAMING_SNAKE_CASE; rename it "
                f"(e.g. {suggestion!r}) so selectors and users match it reliably"
            )
            logger.warning(text)
            warnings.warn(text, ActionNamingWarning, stacklevel=3)

    def parameter(self, name: str) -> ActionParameter | None:
        """Return the declared parameter called ``name``, or ``None``."""
        return next((p for p in self.parameters if p.name == name), None)

    def describe(self) -> dict[str, Any]:
        """A JSON-serialisable description (name, similes, description, parameters)."""
        return {
            "name": self.name,
            "similes": list(self.similes),
            "description": self.description,
            "parameters": [p.model_dump(by_alias=True, exclude_none=True) for p in self.parameters],
        }
