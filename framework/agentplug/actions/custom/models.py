"""The custom-action definition models: one ``customActions`` entry and its parts.

:class:`CustomActionDef` is one entry of the config's ``customActions`` array (the seed's
camelCase JSON shape), with its :class:`CustomActionParameter` list and one ``http``,
``shell`` or ``code`` handler object.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, TypeAlias

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic.alias_generators import to_camel

from agentplug.actions.code_handler import CodeHandlerDef
from agentplug.actions.handler_output import HandlerOutput
from agentplug.actions.http_handler import HttpHandlerDef
from agentplug.actions.shell_handler import ShellHandlerDef

__all__ = [
    "ACTION_ID_PATTERN",
    "CONFIG_KEY",
    "MAX_ACTION_ID_LENGTH",
    "CustomActionDef",
    "CustomActionHandlerDef",
    "CustomActionParameter",
    "TestOutput",
]

CONFIG_KEY = "customActions"
"""Top-level key of the config file that holds the definitions."""

MAX_ACTION_ID_LENGTH = 64
"""Longest custom-action ``id``."""
ACTION_ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
"""What a custom-action ``id`` looks like: letters, digits, ``_``, ``.`` and ``-``, starting
with a letter or digit (so it is one URL path segment: no ``/``, no ``..``)."""

TestOutput: TypeAlias = HandlerOutput
"""What a test handler returns: ``{ok: bool, output: str}``."""


CustomActionHandlerDef: TypeAlias = Annotated[
    HttpHandlerDef | ShellHandlerDef | CodeHandlerDef, Field(discriminator="type")
]
"""One of the ``http``, ``shell`` or ``code`` handler objects, chosen by ``type``."""


class CustomActionParameter(BaseModel):
    """``{name, description, required}``; every custom-action parameter is a string."""

    model_config = ConfigDict(populate_by_name=True, extra="ignore")

    name: str = Field(min_length=1, pattern=r"^[A-Za-z_][A-Za-z0-9_.-]*$")
    description: str = ""
    required: bool = False


class CustomActionDef(BaseModel):
    """One entry of ``customActions``, in the seed's JSON shape (camelCase keys).

    Unknown keys are ignored so definitions written by newer tools still load; the fields
    below are checked, and a bad one is reported by :func:`load_custom_actions` with its path.
    """

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, serialize_by_alias=True, extra="ignore"
    )

    id: str = Field(min_length=1)
    name: str = Field(min_length=1)
    description: str
    similes: list[str] = Field(default_factory=list)
    parameters: list[CustomActionParameter]
    handler: CustomActionHandlerDef
    enabled: bool
    side_effects: bool | None = Field(default=None, strict=True)
    """``sideEffects``: whether the action changes anything; left out, it counts as
    ``true`` (and the definition round-trips unchanged). ``false`` (a JSON boolean) lets
    ``agent.tools`` offer it to a model by default."""
    created_at: str
    updated_at: str

    @field_validator("id")
    @classmethod
    def _id_is_a_path_segment(cls, value: str) -> str:
        if len(value) > MAX_ACTION_ID_LENGTH or not ACTION_ID_PATTERN.match(value):
            raise ValueError(
                f"id {value[:80]!r} must be 1-{MAX_ACTION_ID_LENGTH} letters, digits, '_', '.' "
                "or '-', starting with a letter or digit (e.g. 'weather-check')"
            )
        return value

    @field_validator("description")
    @classmethod
    def _description_not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must describe what the action does and when to use it")
        return value

    @field_validator("created_at", "updated_at")
    @classmethod
    def _iso_timestamp(cls, value: str) -> str:
        try:
            datetime.fromisoformat(value)
        except ValueError:
            raise ValueError(
                f"{value!r} is not an ISO 8601 timestamp such as '2025-01-01T00:00:00Z'"
            ) from None
        return value

    @field_validator("parameters")
    @classmethod
    def _unique_parameter_names(
        cls, value: list[CustomActionParameter]
    ) -> list[CustomActionParameter]:
        seen: set[str] = set()
        for param in value:
            if param.name in seen:
                raise ValueError(f"parameter {param.name!r} is declared twice")
            seen.add(param.name)
        return value

    @property
    def declared_names(self) -> list[str]:
        """Names of the declared parameters (the only ones substituted into templates)."""
        return [p.name for p in self.parameters]
