"""Turning a pydantic :class:`~pydantic.ValidationError` into config problems that name
the key and say what to do: one formatter for every section, so that ``agent``,
``actions.shell``, ``security.ssrf`` and ``plugins`` all read alike.

A problem is a ``(key path, problem)`` pair (:data:`ConfigIssue`): ``("agent.max_step",
"unknown setting; did you mean 'max_steps'? (see `agentplug config schema`)")``. Keys
are dotted; list positions read ``[0]`` (``customActions[0].name``). Values shown are
cut at 80 characters; a missing key shows none.
"""

from __future__ import annotations

import types
import typing
from collections import abc
from collections.abc import Callable, Mapping
from typing import Any

from pydantic import BaseModel, ValidationError

from agentplug.config.suggest import did_you_mean

__all__ = ["ConfigIssue", "IssueRule", "key_path", "keys_of", "shown", "validation_issues"]

ConfigIssue = tuple[str, str]
"""``(key path, problem)``."""
IssueRule = Callable[[str, Mapping[str, Any]], str | None]
"""A section's own wording of a problem (``key``, the pydantic error): the problem text,
or ``None`` for the general wording."""

SCHEMA_HINT = "(see `agentplug config schema`)"


def key_path(prefix: str, loc: tuple[int | str, ...]) -> str:
    """``prefix`` and a pydantic location as a key path: ``a.b[0].c``."""
    key = prefix
    for part in loc:
        if isinstance(part, int):
            key += f"[{part}]"
        else:
            key = f"{key}.{part}" if key else str(part)
    return key or "<root>"


def shown(value: Any, limit: int = 80) -> str:
    """``repr(value)``, cut at ``limit`` characters."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _fields_of(annotation: Any) -> type[BaseModel] | None:
    """The model an annotation holds (through ``X | None``, ``Annotated``, unions)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        found = _fields_of(arg)
        if found is not None:
            return found
    return None


def _step(annotation: Any, part: int | str) -> Any:
    """The annotation one location part below ``annotation`` (``None``: unknown)."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:
        return _step(args[0], part)
    if origin in (typing.Union, types.UnionType):
        for arg in args:
            below = _step(arg, part) if arg is not type(None) else None
            if below is not None:
                return below
        return None
    if origin in (list, tuple, set, frozenset) or origin is abc.Sequence:
        return args[0] if args and isinstance(part, int) else None
    if origin in (dict, abc.Mapping):
        return args[-1] if args else None
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        fields = annotation.model_fields
        info = next((f for n, f in fields.items() if part in (n, f.alias)), None)
        return info.annotation if info is not None else None
    return None


def keys_of(model: type[BaseModel], loc: tuple[int | str, ...]) -> list[str]:
    """The setting names (and their camelCase aliases) of the section at ``loc`` of
    ``model`` (``("agent",)`` -> the agent settings); empty when it is free-form."""
    annotation: Any = model
    for part in loc:
        annotation = _step(annotation, part)
        if annotation is None:
            return []
    found = _fields_of(annotation)
    if found is None:
        return []
    fields = found.model_fields
    return [*fields, *(f.alias for f in fields.values() if f.alias and f.alias not in fields)]


def validation_issues(
    exc: ValidationError,
    model: type[BaseModel],
    prefix: str = "",
    *,
    rule: IssueRule | None = None,
) -> list[ConfigIssue]:
    """Every error of ``exc`` (raised by ``model``, the section at ``prefix``) as a
    problem naming its key; an unknown key gets a did-you-mean from the section's own
    settings. ``rule`` words a section's special cases."""
    issues: list[ConfigIssue] = []
    for err in exc.errors():
        loc = tuple(err["loc"])
        key = key_path(prefix, loc)
        special = rule(key, err) if rule is not None else None
        if special is not None:
            problem = special
        elif err["type"] == "extra_forbidden":
            word = str(loc[-1]) if loc else key
            hint = did_you_mean(
                word, keys_of(model, loc[:-1]), lead="", otherwise="check the spelling"
            )
            problem = f"unknown setting; {hint} {SCHEMA_HINT}"
        elif err["type"] == "missing":
            problem = f"{err['msg']} {SCHEMA_HINT}"
        else:
            message = str(err["msg"]).removeprefix("Value error, ")
            problem = f"{message} (got {shown(err.get('input'))})"
        issues.append((key, problem))
    return issues
