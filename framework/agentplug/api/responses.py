"""JSON helpers shared by the control API's guard and route handlers.

:func:`error_response` is the ``{"error": ...}`` response every failure uses;
:func:`jsonable` turns models, dataclasses and mappings into JSON-compatible values.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from starlette.responses import JSONResponse

from agentplug.core.redaction import scrub, scrub_data

__all__ = ["error_response", "jsonable"]


def error_response(status: int, message: str, **extra: Any) -> JSONResponse:
    """``{"error": message, **extra}`` with ``status``, secrets scrubbed."""
    # Error texts often quote what a back-end said: never a configured secret.
    return JSONResponse({"error": scrub(message), **scrub_data(extra)}, status_code=status)


def jsonable(value: Any) -> Any:
    """A JSON-compatible copy of a model, dataclass, mapping or plain value."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if hasattr(value, "__dataclass_fields__") and not isinstance(value, type):
        import dataclasses

        return jsonable(dataclasses.asdict(value))
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [jsonable(v) for v in value]
    if value is None or isinstance(value, str | int | float | bool):
        return value
    if isinstance(value, Path):
        return str(value)
    return repr(value)
