"""Base models shared by every hook payload.

Events and contexts are *frozen*: a handler cannot change what another handler or
the host sees except through the result it returns (HOOKS.md §2 rule 6). Containers
inside them are deep-frozen once, when the host builds the event, so the runtime can
hand the same object to every handler without copying it per handler.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterable, Mapping
from typing import Annotated, Any, NoReturn, Self

from pydantic import AfterValidator, BaseModel, ConfigDict, model_validator
from pydantic.alias_generators import to_camel

__all__ = [
    "Context",
    "Event",
    "FrozenDict",
    "FrozenList",
    "HandlerContext",
    "HookModel",
    "JsonList",
    "JsonMap",
    "Result",
    "bind_handler_context",
    "deep_freeze",
    "thaw",
]


def _read_only(self: object, *args: object, **kwargs: object) -> NoReturn:
    raise TypeError(
        "hook events are read-only: a handler changes what others see only through "
        "the result it returns (e.g. return {'params': {...}} from before_tool_call)"
    )


class FrozenDict(dict[str, Any]):
    """A ``dict`` that refuses mutation; JSON-serialisable and ``isinstance(x, dict)``."""

    __slots__ = ()
    __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = _read_only
    __ior__ = _read_only

    def __reduce__(self) -> tuple[Any, ...]:
        return (FrozenDict, (dict(self),))

    def __copy__(self) -> FrozenDict:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> FrozenDict:
        return self


class FrozenList(list[Any]):
    """A ``list`` that refuses mutation."""

    __slots__ = ()
    __setitem__ = __delitem__ = append = extend = insert = pop = remove = _read_only
    clear = sort = reverse = __iadd__ = __imul__ = _read_only

    def __reduce__(self) -> tuple[Any, ...]:
        return (FrozenList, (list(self),))

    def __copy__(self) -> FrozenList:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> FrozenList:
        return self


def deep_freeze(value: Any) -> Any:
    """Return ``value`` with every nested dict/list replaced by a read-only twin."""
    if isinstance(value, FrozenDict | FrozenList):
        return value
    if isinstance(value, Mapping):
        return FrozenDict({str(k): deep_freeze(v) for k, v in value.items()})
    if isinstance(value, list | tuple):
        return FrozenList(deep_freeze(v) for v in value)
    return value


def thaw(value: Any) -> Any:
    """Return a plain, mutable deep copy of a (possibly frozen) JSON-like value."""
    if isinstance(value, Mapping):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [thaw(v) for v in value]
    return value


def _freeze_held(model: BaseModel) -> None:
    """Deep-freeze, in ``model``'s own storage, every container it holds (extras included).

    Typed JSON fields are frozen by their validators; this also covers fields typed
    ``Any`` or ``list[...]``, extra host fields and nested models, which every handler
    shares with the host just the same.
    """
    for store in (model.__dict__, model.__pydantic_extra__ or {}):
        for key, value in store.items():
            if isinstance(value, HookModel):  # the contract's own models only
                _freeze_held(value)
            elif isinstance(value, tuple):
                store[key] = tuple(deep_freeze(v) for v in value)
            elif isinstance(value, Mapping | list) and not isinstance(
                value, FrozenDict | FrozenList
            ):
                store[key] = deep_freeze(value)


JsonMap = Annotated[dict[str, Any], AfterValidator(deep_freeze)]
"""A JSON object field that is deep-frozen on validation."""

JsonList = Annotated[list[Any], AfterValidator(deep_freeze)]
"""A JSON array field that is deep-frozen on validation."""


class HookModel(BaseModel):
    """Base of every payload: ``snake_case`` fields, the seed's ``camelCase`` accepted."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        serialize_by_alias=False,
        arbitrary_types_allowed=True,
        use_attribute_docstrings=True,
    )

    def to_json_dict(self, *, by_alias: bool = False) -> dict[str, Any]:
        """JSON-compatible dump without unset optional fields."""
        return self.model_dump(mode="json", by_alias=by_alias, exclude_none=True)


class HandlerContext(HookModel):
    """What ``event.context`` shows one handler: its own plugin's resolved config."""

    model_config = ConfigDict(frozen=True)

    plugin_id: str = ""
    plugin_config: JsonMap = FrozenDict()


_EMPTY_HANDLER_CONTEXT = HandlerContext()
_HANDLER_CONTEXT: contextvars.ContextVar[HandlerContext] = contextvars.ContextVar(
    "agentplug_handler_context", default=_EMPTY_HANDLER_CONTEXT
)


def bind_handler_context(context: HandlerContext) -> contextvars.Token[HandlerContext]:
    """Make ``event.context`` resolve to ``context`` for the code that runs next.

    The runtime binds it around each handler call; a handler that suspends keeps the
    binding because asyncio copies the context into the task that resumes it.
    """
    return _HANDLER_CONTEXT.set(context)


class Event(HookModel):
    """Base of every hook event. Frozen; extra host fields are kept (read-only)."""

    model_config = ConfigDict(frozen=True, extra="allow")

    @model_validator(mode="after")
    def _freeze_containers(self) -> Self:
        _freeze_held(self)
        return self

    @property
    def context(self) -> HandlerContext:
        """The per-handler context (``event.context.plugin_config``, HOOKS.md §2.5).

        Injected per handler without mutating the shared event: each handler reads
        its own plugin's config here.
        """
        return _HANDLER_CONTEXT.get()

    def replace(self, **changes: Any) -> Any:
        """Return a copy with ``changes`` applied (validated and frozen)."""
        data = self.model_dump(exclude_unset=False)
        data.update(changes)
        return type(self).model_validate(data)


class Context(HookModel):
    """Base of every correlation context (``ctx``). Frozen; extra host fields kept."""

    model_config = ConfigDict(frozen=True, extra="allow")

    @model_validator(mode="after")
    def _freeze_containers(self) -> Self:
        _freeze_held(self)
        return self


class Result(HookModel):
    """Base of handler results. Unknown keys make a result *invalid* (wrong shape).

    Decision flags (``block``, ``cancel``, ``handled``) are strict booleans: ``"false"``
    or ``0`` is a wrong shape (a failed handler), never coerced into a decision.
    """

    model_config = ConfigDict(extra="forbid")


def field_names(models: Iterable[type[BaseModel]]) -> list[str]:
    """Every field name of ``models`` (documentation helper)."""
    names: list[str] = []
    for model in models:
        names.extend(model.model_fields)
    return names
