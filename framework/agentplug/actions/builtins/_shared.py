"""Helpers shared by the built-in action modules (``comms``, ``media``).

Holds the base model of an ``actions.<section>`` settings block (:class:`SettingsSection`),
its validation into a :class:`~agentplug.core.errors.ConfigError` naming each key
(:func:`load_settings`), get-or-register of a runtime service (:func:`get_or_register`) and
the readers of handler parameters.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic.alias_generators import to_camel

from agentplug.actions.model import HandlerOptions
from agentplug.core.errors import ConfigError

__all__ = [
    "SettingsSection",
    "get_or_register",
    "handler_params",
    "load_settings",
    "stripped_text_param",
    "text_param",
]

_T = TypeVar("_T")
_M = TypeVar("_M", bound=BaseModel)


class SettingsSection(BaseModel):
    """Base of an ``actions.<section>`` settings model: camelCase aliases accepted,
    unknown keys refused, frozen."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True
    )


def load_settings(actions: Mapping[str, Any], key: str, model: type[_M]) -> _M:
    """Validate ``actions.<key>`` with ``model``; raise :class:`ConfigError` naming each key."""
    raw = actions.get(key)
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        raise ConfigError([(f"actions.{key}", f"must be an object, got {type(raw).__name__}")])
    try:
        return model.model_validate(dict(raw))
    except ValidationError as exc:
        issues = []
        for error in exc.errors():
            where = ".".join(str(part) for part in error["loc"])
            issues.append((f"actions.{key}.{where}" if where else f"actions.{key}", error["msg"]))
        raise ConfigError(issues) from None


def get_or_register(runtime: object, name: str, kind: type[_T], factory: Callable[[], _T]) -> _T:
    """The ``name`` service of ``runtime`` when it is a ``kind``; else a new one, registered."""
    get = getattr(runtime, "get_service", None)
    existing = get(name) if callable(get) else None
    if isinstance(existing, kind):
        return existing
    if existing is not None:
        raise TypeError(
            f"service {name!r} is a {type(existing).__name__}, expected {kind.__name__}; "
            f"register an {kind.__name__} under {name!r} or leave the name free"
        )
    service = factory()
    register = getattr(runtime, "register_service", None)
    if callable(register):
        register(name, service)
    return service


def handler_params(options: HandlerOptions | None) -> Mapping[str, Any]:
    """The parameters of a handler call (empty without options)."""
    return options.parameters if options is not None else {}


def text_param(params: Mapping[str, Any], name: str) -> str | None:
    """Parameter ``name`` as given when it is a non-blank string, else ``None``."""
    value = params.get(name)
    if isinstance(value, str) and value.strip():
        return value
    return None


def stripped_text_param(params: Mapping[str, Any], name: str) -> str | None:
    """Parameter ``name`` stripped when it is a non-blank string, else ``None``."""
    value = params.get(name)
    return value.strip() if isinstance(value, str) and value.strip() else None
