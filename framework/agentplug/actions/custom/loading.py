"""Loading ``customActions`` from a config: parsing, error reports and conversion.

:func:`read_custom_action_defs` parses every entry and reports malformed ones;
:func:`load_custom_actions` also converts the enabled ones into actions.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from agentplug.actions.custom.convert import def_to_action
from agentplug.actions.custom.models import CONFIG_KEY, CustomActionDef
from agentplug.actions.custom.services import CustomActionServices
from agentplug.actions.model import Action, ActionDefinitionError
from agentplug.actions.registry import normalize_action_name
from agentplug.config.datafiles import DataFileError, read_data_file

__all__ = [
    "CustomActionConfigError",
    "CustomActionLoadError",
    "LoadResult",
    "load_custom_actions",
    "read_custom_action_defs",
]

logger = logging.getLogger("agentplug.actions")


class CustomActionConfigError(ValueError):
    """The config as a whole cannot be read (missing file, bad JSON, ``customActions`` type)."""


@dataclass(frozen=True)
class CustomActionLoadError:
    """A malformed definition: which entry (index and id), which field, and what is wrong."""

    index: int
    id: str | None
    field: str
    message: str

    def __str__(self) -> str:
        who = f" (id {self.id!r})" if self.id else ""
        return (
            f"{CONFIG_KEY}[{self.index}]{who}: field {self.field!r}: {self.message}; "
            "fix this entry (it was skipped, the others loaded)"
        )


@dataclass
class LoadResult:
    """What :func:`load_custom_actions` produced."""

    actions: list[Action] = field(default_factory=list)
    """The enabled definitions, converted, in config order."""
    definitions: list[CustomActionDef] = field(default_factory=list)
    """The enabled, valid definitions (parallel to :attr:`actions`)."""
    disabled: list[CustomActionDef] = field(default_factory=list)
    """Valid definitions with ``enabled: false`` (not converted)."""
    errors: list[CustomActionLoadError] = field(default_factory=list)
    """Malformed entries that were skipped."""


def _field_path(loc: Sequence[int | str]) -> str:
    parts: list[str] = []
    for index, item in enumerate(loc):
        # The discriminated union inserts the tag ("http") into the path; users never wrote it.
        if index == 1 and loc[0] == "handler" and item in ("http", "shell", "code"):
            continue
        if isinstance(item, int):
            parts.append(f"[{item}]")
        else:
            parts.append(("." if parts else "") + item)
    return "".join(parts) or "(entry)"


def _read_config(config: Mapping[str, Any] | str | os.PathLike[str]) -> Mapping[str, Any]:
    if isinstance(config, Mapping):
        return config
    path = Path(config)
    try:
        data = read_data_file(path)
    except DataFileError as exc:
        raise CustomActionConfigError(f"config file {exc}") from None
    if not isinstance(data, Mapping):
        raise CustomActionConfigError(
            f"config file {str(path)!r} must hold a JSON object with a {CONFIG_KEY!r} array"
        )
    return data


def read_custom_action_defs(
    config: Mapping[str, Any] | str | os.PathLike[str],
) -> tuple[list[CustomActionDef], list[CustomActionLoadError]]:
    """Parse every entry of ``customActions`` (enabled or not) and report malformed ones.

    Also reports an entry whose id, or name (ignoring case and ``_``), repeats an earlier
    valid entry. Raises :class:`CustomActionConfigError` when the config itself is unusable.
    """
    indexed, errors = _parse_entries(_read_config(config))
    return [definition for _, definition in indexed], errors


def _parse_entries(
    data: Mapping[str, Any],
) -> tuple[list[tuple[int, CustomActionDef]], list[CustomActionLoadError]]:
    entries = data.get(CONFIG_KEY, [])
    if entries is None:
        entries = []
    if not isinstance(entries, list):
        raise CustomActionConfigError(
            f"{CONFIG_KEY!r} must be a JSON array of action definitions, got "
            f"{type(entries).__name__}"
        )
    definitions: list[tuple[int, CustomActionDef]] = []
    errors: list[CustomActionLoadError] = []
    ids: dict[str, int] = {}
    names: dict[str, int] = {}
    for index, entry in enumerate(entries):
        raw_id = entry.get("id") if isinstance(entry, Mapping) else None
        entry_id = raw_id if isinstance(raw_id, str) else None
        if not isinstance(entry, Mapping):
            errors.append(
                CustomActionLoadError(
                    index, None, "(entry)", f"expected an object, got {type(entry).__name__}"
                )
            )
            continue
        try:
            definition = CustomActionDef.model_validate(entry)
        except ValidationError as exc:
            for error in exc.errors():
                errors.append(
                    CustomActionLoadError(index, entry_id, _field_path(error["loc"]), error["msg"])
                )
            continue
        if definition.id in ids:
            errors.append(
                CustomActionLoadError(
                    index,
                    entry_id,
                    "id",
                    f"id {definition.id!r} is already used by entry [{ids[definition.id]}]",
                )
            )
            continue
        key = normalize_action_name(definition.name)
        if key in names:
            errors.append(
                CustomActionLoadError(
                    index,
                    entry_id,
                    "name",
                    f"name {definition.name!r} clashes with entry [{names[key]}] (names are "
                    "compared ignoring case and '_')",
                )
            )
            continue
        ids[definition.id] = index
        names[key] = index
        definitions.append((index, definition))
    return definitions, errors


def load_custom_actions(
    config: Mapping[str, Any] | str | os.PathLike[str],
    *,
    services: CustomActionServices | None = None,
) -> LoadResult:
    """Read ``customActions`` from ``config`` (a mapping or a JSON file path).

    Keeps only ``enabled`` definitions and converts each with :func:`def_to_action`. A
    malformed entry is reported in :attr:`LoadResult.errors` (index, id, field) and logged,
    then skipped; the others load. Raises :class:`CustomActionConfigError` only when the
    config as a whole is unusable.
    """
    definitions, errors = _parse_entries(_read_config(config))
    backends = services if services is not None else CustomActionServices.default()
    result = LoadResult(errors=errors)
    for index, definition in definitions:
        if not definition.enabled:
            result.disabled.append(definition)
            continue
        try:
            action = def_to_action(definition, services=backends)
        except (ActionDefinitionError, ValidationError) as exc:
            result.errors.append(CustomActionLoadError(index, definition.id, "(entry)", str(exc)))
            continue
        result.actions.append(action)
        result.definitions.append(definition)
    for error in result.errors:
        logger.warning("custom action skipped: %s", error)
    return result
