"""Parameter checks: coercing raw values and validating them against their schemas."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any

from agentplug.actions.model import Action, ActionParameter

__all__ = ["ParameterValidationError", "check_parameters", "coerce_parameter"]


class ParameterValidationError(ValueError):
    """A parameter value is missing or does not satisfy its schema."""

    def __init__(self, action: str, parameter: str, reason: str, message: str) -> None:
        self.action = action
        self.parameter = parameter
        self.reason = reason
        super().__init__(message)


_TRUE = frozenset({"true", "yes", "y", "on", "1"})
_FALSE = frozenset({"false", "no", "n", "off", "0"})
_INT_TEXT = re.compile(r"[+-]?\d+")
_ABSENT = object()


def _is_absent(value: object) -> bool:
    return value is None or value is _ABSENT or (isinstance(value, str) and value == "")


def coerce_parameter(param: ActionParameter, value: Any) -> Any:
    """Coerce ``value`` to ``param``'s schema type and check enum, pattern and bounds.

    Strings are converted for ``number``, ``integer``, ``boolean`` (``true/false``,
    ``yes/no``, ``on/off``, ``1/0``), ``object`` and ``array`` (JSON text). Raises
    ``ValueError`` with the reason (without the parameter name; the caller adds it).
    """
    schema = param.schema_
    kind = schema.type
    converted: Any
    if kind == "string":
        if isinstance(value, str):
            converted = value
        elif isinstance(value, bool):
            converted = "true" if value else "false"
        elif isinstance(value, int | float):
            converted = str(value)
        else:
            raise ValueError(f"expected a string, got {type(value).__name__} {value!r}")
    elif kind == "integer":
        if isinstance(value, bool):
            raise ValueError(f"expected an integer, got boolean {value!r}")
        if isinstance(value, int):
            converted = value
        elif isinstance(value, float) and value.is_integer():
            converted = int(value)
        elif isinstance(value, str) and _INT_TEXT.fullmatch(value.strip()):
            converted = int(value.strip())
        else:
            raise ValueError(f"expected an integer (a whole number such as 3), got {value!r}")
    elif kind == "number":
        if isinstance(value, bool):
            raise ValueError(f"expected a number, got boolean {value!r}")
        if isinstance(value, int | float):
            converted = value
        elif isinstance(value, str):
            text = value.strip()
            try:
                converted = int(text) if _INT_TEXT.fullmatch(text) else float(text)
            except ValueError:
                raise ValueError(f"expected a number (such as 2.5), got {value!r}") from None
        else:
            raise ValueError(f"expected a number (such as 2.5), got {value!r}")
        if isinstance(converted, float) and not math.isfinite(converted):
            raise ValueError(f"expected a finite number, got {value!r}")
    elif kind == "boolean":
        if isinstance(value, bool):
            converted = value
        elif isinstance(value, int) and value in (0, 1):
            converted = bool(value)
        elif isinstance(value, str) and value.strip().casefold() in _TRUE | _FALSE:
            converted = value.strip().casefold() in _TRUE
        else:
            raise ValueError(f"expected a boolean (true or false), got {value!r}")
    else:
        python_type: type[Any] = dict if kind == "object" else list
        converted = value
        if isinstance(value, str):
            try:
                converted = json.loads(value)
            except json.JSONDecodeError:
                converted = value
        if not isinstance(converted, python_type):
            raise ValueError(f"expected a JSON {kind}, got {value!r}")
    if schema.enum is not None and converted not in schema.enum:
        allowed = ", ".join(repr(v) for v in schema.enum)
        raise ValueError(f"{converted!r} is not one of the allowed values: {allowed}")
    pattern = schema.pattern
    if pattern is not None and isinstance(converted, str) and not re.search(pattern, converted):
        raise ValueError(f"{converted!r} does not match the pattern {pattern!r}")
    if isinstance(converted, int | float) and not isinstance(converted, bool):
        if schema.minimum is not None and converted < schema.minimum:
            raise ValueError(f"{converted!r} is below the minimum {schema.minimum:g}")
        if schema.maximum is not None and converted > schema.maximum:
            raise ValueError(f"{converted!r} is above the maximum {schema.maximum:g}")
    return converted


def check_parameters(action: Action, raw: Mapping[str, Any]) -> dict[str, Any]:
    """Validate ``raw`` values against ``action``'s declared parameters.

    Missing or empty values take the schema ``default`` when there is one; a required
    parameter without value or default raises :class:`ParameterValidationError` with the text
    ``Missing required parameter: <name>``. Undeclared keys are dropped. Returns the coerced
    values (optional parameters without value or default are left out).
    """
    values: dict[str, Any] = {}
    for param in action.parameters:
        value = raw.get(param.name, _ABSENT)
        if _is_absent(value):
            if param.schema_.has_default:
                value = param.schema_.default
            elif param.required:
                hint = f" ({param.description})" if param.description else ""
                raise ParameterValidationError(
                    action.name,
                    param.name,
                    "missing",
                    f"Missing required parameter: {param.name}{hint}. Action {action.name} "
                    f"needs it: send {param.name}=<value> or a JSON object with "
                    f'"{param.name}".',
                )
            else:
                continue
        try:
            values[param.name] = coerce_parameter(param, value)
        except ValueError as exc:
            raise ParameterValidationError(
                action.name,
                param.name,
                "invalid",
                f"Invalid parameter {param.name} for action {action.name}: {exc}.",
            ) from exc
    return values
