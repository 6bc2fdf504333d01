"""Base models shared by every hook payload.

Events and contexts are *frozen*: a handler cannot change what another handler or
the host sees except through the result it returns (HOOKS.md §2 rule 6). Containers
inside them are deep-frozen once, when the host builds the event, so the runtime can
hand the same object to every handler without copying it per handler.
"""

from __future__ import annotations

import contextvars
import enum
import types
import typing
from collections.abc import Iterable, Mapping
from typing import Annotated, Any, Literal, NoReturn, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    ValidatorFunctionWrapHandler,
    WrapValidator,
    model_validator,
)
from pydantic.alias_generators import to_camel

__all__ = [
    "TRUST_MARKERS",
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
    "current_handler_context",
    "deep_freeze",
    "thaw",
]


TRUST_MARKERS = frozenset({"trusted_local_media", "trustedLocalMedia"})
"""Runtime-only trust markers: no handler sees them and no plugin sets them, at any depth.

Every event and context drops them when it is built (top-level extra fields and keys of
nested mappings alike), and :class:`FrozenDict` never holds one: the runtime grants trust
itself, after the hooks ran (e.g. ``send_reply_payload``)."""


def _read_only(self: object, *args: object, **kwargs: object) -> NoReturn:
    raise TypeError(
        "hook events are read-only: a handler changes what others see only through "
        "the result it returns (e.g. return {'params': {...}} from before_tool_call)"
    )


# Values that are never containers: returned as they are, without a closer look.
_ATOMS = frozenset({str, int, float, bool, type(None), bytes})
_dict_new = dict.__new__
_dict_init = dict.__init__
_list_new = list.__new__
_list_init = list.__init__


class FrozenDict(dict[str, Any]):
    """A ``dict`` that refuses mutation; JSON-serialisable and ``isinstance(x, dict)``.

    Always deep-frozen and free of :data:`TRUST_MARKERS`: building one freezes the values
    and drops marker keys, whoever builds it.
    """

    __slots__ = ()
    __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = _read_only
    __ior__ = _read_only

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        _dict_init(self, _clean_items(dict(*args, **kwargs)))

    def __reduce__(self) -> tuple[Any, ...]:
        return (FrozenDict, (dict(self),))

    def __copy__(self) -> FrozenDict:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> FrozenDict:
        return self


class FrozenList(list[Any]):
    """A ``list`` that refuses mutation; always deep-frozen (see :class:`FrozenDict`)."""

    __slots__ = ()
    __setitem__ = __delitem__ = append = extend = insert = pop = remove = _read_only
    clear = sort = reverse = __iadd__ = __imul__ = _read_only

    def __init__(self, items: Iterable[Any] = ()) -> None:
        _list_init(self, [deep_freeze(v) for v in items])

    def __reduce__(self) -> tuple[Any, ...]:
        return (FrozenList, (list(self),))

    def __copy__(self) -> FrozenList:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> FrozenList:
        return self


def _clean_items(value: Mapping[Any, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    atoms = _ATOMS
    for k, v in value.items():
        key = k if type(k) is str else str(k)
        if key not in TRUST_MARKERS:
            out[key] = v if type(v) in atoms else deep_freeze(v)
    return out


def _clean_str_items(value: dict[Any, Any]) -> dict[str, Any] | None:
    """:func:`_clean_items` for a plain dict, or ``None`` at the first non-string key."""
    out: dict[str, Any] = {}
    atoms = _ATOMS
    for k, v in value.items():
        if type(k) is not str:
            return None
        if k not in TRUST_MARKERS:
            out[k] = v if type(v) in atoms else deep_freeze(v)
    return out


def _frozen_dict(items: dict[str, Any]) -> FrozenDict:
    # Skips FrozenDict.__init__: ``items`` is already frozen and clean.
    frozen: FrozenDict = _dict_new(FrozenDict)
    _dict_init(frozen, items)
    return frozen


def _frozen_list(items: list[Any]) -> FrozenList:
    frozen: FrozenList = _list_new(FrozenList)
    _list_init(frozen, items)
    return frozen


def deep_freeze(value: Any) -> Any:
    """Return ``value`` with every nested dict/list replaced by a read-only twin.

    Mapping keys become strings and :data:`TRUST_MARKERS` keys are dropped at any depth.
    """
    kind = type(value)
    if kind in _ATOMS or kind is FrozenDict or kind is FrozenList:
        return value
    if isinstance(value, FrozenDict | FrozenList):
        return value
    if isinstance(value, Mapping):
        return _frozen_dict(_clean_items(value))
    if isinstance(value, list | tuple):
        atoms = _ATOMS
        return _frozen_list([v if type(v) in atoms else deep_freeze(v) for v in value])
    return value


def thaw(value: Any) -> Any:
    """Return a plain, mutable deep copy of a (possibly frozen) JSON-like value."""
    if type(value) in _ATOMS:
        return value
    if isinstance(value, Mapping):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [thaw(v) for v in value]
    return value


def _freeze_value(value: Any) -> Any:
    if isinstance(value, HookModel):  # the contract's own models only
        _freeze_held(value)
        return value
    if isinstance(value, tuple):
        return tuple(deep_freeze(v) for v in value)
    if isinstance(value, Mapping | list) and not isinstance(value, FrozenDict | FrozenList):
        return deep_freeze(value)
    return value


def _freeze_held(model: BaseModel) -> None:
    """Deep-freeze, in ``model``'s own storage, every container it holds (extras included),
    and drop :data:`TRUST_MARKERS` extra fields.

    Typed JSON fields are frozen by their validators; this also covers fields typed
    ``Any`` or ``list[...]``, extra host fields and nested models, which every handler
    shares with the host just the same. Fields that can only hold scalars are not
    visited, and values of an atomic or already frozen type are left at once.
    """
    store = model.__dict__
    visit = _VISIT.get(type(model))
    if visit is None:
        visit = _fields_to_visit(type(model))
    for key in visit:
        value = store[key]
        kind = type(value)
        if kind in _ATOMS or kind is FrozenDict or kind is FrozenList:
            continue
        store[key] = _freeze_value(value)
    extra = model.__pydantic_extra__
    if extra:
        for marker in TRUST_MARKERS.intersection(extra):
            del extra[marker]
        for key, value in extra.items():
            kind = type(value)
            if kind in _ATOMS or kind is FrozenDict or kind is FrozenList:
                continue
            extra[key] = _freeze_value(value)


_VISIT: dict[type, tuple[str, ...]] = {}
_SCALAR_ANNOTATIONS = (str, int, float, bool, type(None), bytes, enum.Enum)


def _scalar_only(annotation: Any) -> bool:
    """Whether a field annotated ``annotation`` can only hold atoms (never a container)."""
    if isinstance(annotation, type):
        return issubclass(annotation, _SCALAR_ANNOTATIONS)
    origin = typing.get_origin(annotation)
    if origin is Literal:
        return all(type(arg) in _ATOMS or isinstance(arg, enum.Enum) for arg in annotation.__args__)
    if origin is typing.Union or origin is types.UnionType:
        return all(_scalar_only(arg) for arg in typing.get_args(annotation))
    return False


def _fields_to_visit(cls: type[BaseModel]) -> tuple[str, ...]:
    visit = tuple(
        name for name, field in cls.model_fields.items() if not _scalar_only(field.annotation)
    )
    _VISIT[cls] = visit
    return visit


def _frozen_map(value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
    # A plain dict with string keys (what hosts pass) is frozen in one pass; anything else
    # goes through pydantic's own ``dict[str, Any]`` validation first (same errors).
    kind = type(value)
    if kind is FrozenDict:
        return value
    if kind is dict:
        items = _clean_str_items(value)
        if items is not None:
            return _frozen_dict(items)
    return deep_freeze(handler(value))


def _frozen_items(value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
    kind = type(value)
    if kind is FrozenList or kind is list:
        return deep_freeze(value)
    return deep_freeze(handler(value))


JsonMap = Annotated[dict[str, Any], WrapValidator(_frozen_map)]
"""A JSON object field that is deep-frozen on validation."""

JsonList = Annotated[list[Any], WrapValidator(_frozen_items)]
"""A JSON array field that is deep-frozen on validation."""


class HookModel(BaseModel):
    """Base of every payload: ``snake_case`` fields, the seed's ``camelCase`` accepted."""

    # ``defer_build``: a model's validator is built on first use, not at import (the
    # catalogue holds some 150 models; ``tests/test_startup.py`` checks they all build).
    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        serialize_by_alias=False,
        arbitrary_types_allowed=True,
        use_attribute_docstrings=True,
        defer_build=True,
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
HANDLER_CONTEXT: contextvars.ContextVar[HandlerContext] = contextvars.ContextVar(
    "agentplug_handler_context", default=_EMPTY_HANDLER_CONTEXT
)
"""What ``event.context`` resolves to. Shared with the runtime, not exported (``__all__``
is what the package re-exports): its dispatch loops bind it directly, a function call
per handler less than :func:`bind_handler_context`."""


def bind_handler_context(context: HandlerContext) -> contextvars.Token[HandlerContext]:
    """Make ``event.context`` resolve to ``context`` for the code that runs next.

    The runtime binds it around each handler call; a handler that suspends keeps the
    binding because asyncio copies the context into the task that resumes it.
    """
    return HANDLER_CONTEXT.set(context)


def current_handler_context() -> HandlerContext:
    """The context of the plugin handler running now (``plugin_id`` ``""`` outside one).

    Lets the runtime stamp who did something from inside a handler (and the tasks it
    started) without trusting what the plugin says.
    """
    return HANDLER_CONTEXT.get()


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
        return HANDLER_CONTEXT.get()

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

    @model_validator(mode="after")
    def _drop_trust_markers(self) -> Self:
        # A plugin never grants trust: markers in what it returns are dropped at any depth.
        store = self.__dict__
        visit = _VISIT.get(type(self))
        if visit is None:
            visit = _fields_to_visit(type(self))
        for key in visit:
            value = store[key]
            if type(value) not in _ATOMS:
                store[key] = without_trust_markers(value)
        return self


def without_trust_markers(value: Any) -> Any:
    """``value`` without :data:`TRUST_MARKERS` keys at any depth (the same object when it
    holds none; frozen containers stay frozen, plain ones stay plain)."""
    kind = type(value)
    if kind in _ATOMS or kind is FrozenDict or kind is FrozenList:
        return value
    if isinstance(value, Mapping):
        cleaned = {
            k: without_trust_markers(v) for k, v in value.items() if str(k) not in TRUST_MARKERS
        }
        if len(cleaned) == len(value) and all(cleaned[k] is value[k] for k in cleaned):
            return value
        return cleaned
    if isinstance(value, list | tuple):
        items = [without_trust_markers(v) for v in value]
        if all(a is b for a, b in zip(items, value, strict=True)):
            return value
        return items if isinstance(value, list) else tuple(items)
    return value


def field_names(models: Iterable[type[BaseModel]]) -> list[str]:
    """Every field name of ``models`` (documentation helper)."""
    names: list[str] = []
    for model in models:
        names.extend(model.model_fields)
    return names
