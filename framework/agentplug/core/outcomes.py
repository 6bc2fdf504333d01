"""Building outcome models from values that are valid already, without a second validation.

Reducers assemble outcomes from validated events and results (the hot path of every
dispatch); these helpers fill a model's storage directly when its class has no validator
that could change the values, and fall back to ``model_validate`` otherwise.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from agentplug_hookspecs import Event, HookModel

__all__ = ["Untouched", "assemble", "untouched_builder"]

M = TypeVar("M", bound=HookModel)

_new = object.__new__
_set = object.__setattr__


def assemble(cls: type[M], values: dict[str, Any]) -> M:
    """Build an outcome from already-validated values (``values`` holds every field)."""
    obj = _new(cls)
    _set(obj, "__dict__", values)
    _set(obj, "__pydantic_fields_set__", set(values))
    _set(obj, "__pydantic_extra__", None)
    _set(obj, "__pydantic_private__", None)
    return obj


_ATOMIC_DEFAULTS = (str, int, float, bool, type(None), tuple, frozenset)
_Template = tuple[dict[str, Any], tuple[tuple[str, Callable[[], Any]], ...]]
_TEMPLATES: dict[type, _Template | None] = {}


def _template(cls: type[HookModel]) -> _Template | None:
    """Defaults of ``cls`` for building outcomes without validation, or ``None`` when the
    class has validators, private attributes or defaults that must be copied."""
    decorators = cls.__pydantic_decorators__
    if (
        decorators.model_validators
        or decorators.field_validators
        or decorators.validators
        or decorators.root_validators
        or cls.__private_attributes__
    ):
        return None
    static: dict[str, Any] = {}
    factories: list[tuple[str, Callable[[], Any]]] = []
    for name, info in cls.model_fields.items():
        if info.default_factory is not None:
            if info.default_factory_takes_validated_data:
                return None
            factories.append((name, info.default_factory))  # type: ignore[arg-type]
        elif info.is_required() or not isinstance(info.default, _ATOMIC_DEFAULTS):
            return None
        else:
            static[name] = info.default
    return static, tuple(factories)


Untouched = Callable[[Event], HookModel]
"""Builds the outcome of a dispatch in which no handler returned anything or failed."""


def untouched_builder(
    cls: type[HookModel],
    constants: Mapping[str, Any],
    fresh: Mapping[str, Callable[[], Any]] | None = None,
    from_event: tuple[str, str, Callable[[Any], Any]] | None = None,
) -> Untouched:
    """A function ``event -> outcome``: ``constants``, a new ``fresh[name]()`` per call and
    ``from_event`` (outcome field, event attribute, copy function), defaults for the rest.

    Every value is valid already (constants, or taken from a validated event), so the
    outcome is assembled without a second validation when ``cls`` has no validators
    (otherwise it is validated like :meth:`Reducer.finish` would).
    """
    fields = cls.model_fields
    constants = {k: v for k, v in constants.items() if k in fields}
    fresh = {k: f for k, f in (fresh or {}).items() if k in fields}
    if from_event is not None and from_event[0] not in fields:
        from_event = None
    template = _template(cls)
    if template is None:

        def validated(event: Event) -> HookModel:
            data = {**constants, **{k: f() for k, f in fresh.items()}}
            if from_event is not None:
                data[from_event[0]] = from_event[2](getattr(event, from_event[1]))
            return cls.model_validate(data)

        return validated
    static, defaults = template
    base = {**static, **constants}
    factories = tuple(
        (name, factory) for name, factory in (*defaults, *fresh.items()) if name not in constants
    )
    given = set((*constants, *fresh, *(() if from_event is None else (from_event[0],))))

    def assembled(event: Event) -> HookModel:
        data = base.copy()
        for name, factory in factories:
            data[name] = factory()
        if from_event is not None:
            data[from_event[0]] = from_event[2](getattr(event, from_event[1]))
        obj = _new(cls)
        _set(obj, "__dict__", data)
        _set(obj, "__pydantic_fields_set__", given.copy())
        _set(obj, "__pydantic_extra__", None)
        _set(obj, "__pydantic_private__", None)
        return obj

    return assembled
