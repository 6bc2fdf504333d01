"""Operator configuration (TOML, YAML or JSON), validated with errors that name the key.

Shape (snake_case or the seed's camelCase)::

    {"plugins": {"enabled": true, "allow": [], "deny": [],
                 "entries": {"<id>": {"enabled": true, "config": {...},
                                      "hooks": {"timeout_ms": 30000,
                                                "timeouts": {"<hook>": 90000},
                                                "allow_conversation_access": false,
                                                "allow_prompt_injection": true},
                                      "contracts": {"trusted_tool_policies": []}}}},
     "runtime": {"default_timeout_ms": 30000, "shutdown_timeout_ms": 5000},
     "state": {"url": "postgresql://host/db", "retry_ms": 5000},
     "customActions": [...]}
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

from agentplug_hookspecs._markers import MAX_TIMEOUT_MS
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic.alias_generators import to_camel

from agentplug.config.datafiles import DataFileError, read_data_file
from agentplug.config.errors import ConfigError

__all__ = [
    "AgentplugConfig",
    "ConfigFileError",
    "Contracts",
    "HookSettings",
    "PluginEntry",
    "PluginsConfig",
    "RuntimeSettings",
    "StateSettings",
    "load_config",
]

TimeoutMs = Annotated[int, Field(strict=True, gt=0, le=MAX_TIMEOUT_MS)]


class _Strict(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True
    )


class HookSettings(_Strict):
    """``plugins.entries.<id>.hooks``."""

    timeout_ms: TimeoutMs | None = None
    timeouts: dict[str, TimeoutMs] = Field(default_factory=dict)
    allow_conversation_access: bool | None = None
    allow_prompt_injection: bool | None = None


class Contracts(_Strict):
    """``plugins.entries.<id>.contracts``: what a plugin declares it will register."""

    trusted_tool_policies: list[str] = Field(default_factory=list)


class PluginEntry(_Strict):
    """``plugins.entries.<id>``."""

    enabled: bool = True
    config: dict[str, Any] = Field(default_factory=dict)
    hooks: HookSettings = Field(default_factory=HookSettings)
    contracts: Contracts = Field(default_factory=Contracts)


class PluginsConfig(_Strict):
    """``plugins``."""

    enabled: bool = True
    """``false`` loads no installed plugin at all."""
    allow: list[str] = Field(default_factory=list)
    """When non-empty, only these installed plugin ids load."""
    deny: list[str] = Field(default_factory=list)
    """These installed plugin ids never load (deny wins over allow)."""
    entries: dict[str, PluginEntry] = Field(default_factory=dict)


class RuntimeSettings(_Strict):
    """``runtime``."""

    default_timeout_ms: TimeoutMs = 30_000
    """Budget of handlers of hooks that declare no default of their own."""
    shutdown_timeout_ms: TimeoutMs = 5_000
    """How long shutdown waits for abandoned (timed-out) handlers."""
    state_dir: str | None = None
    """Folder of the durable state store (SQLite); in memory when unset."""


STATE_URL_SCHEMES = ("postgresql://", "postgres://", "sqlite:///", "memory:")
"""What ``state.url`` may start with."""


class StateSettings(_Strict):
    """``state``: which store holds grants, pending approvals, session state and queues.

    ``$AGENTPLUG_STATE_URL`` wins over ``url``; with neither, the store is SQLite under
    ``runtime.state_dir`` (in memory when that is unset too).
    """

    url: str | None = None
    """``postgresql://user@host:5432/db``, ``sqlite:///path/state.sqlite3`` or ``memory:``."""
    retry_ms: Annotated[int, Field(strict=True, ge=0, le=MAX_TIMEOUT_MS)] = 5_000
    """How long a PostgreSQL call retries a lost connection before it fails."""

    @field_validator("url")
    @classmethod
    def _known_scheme(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(STATE_URL_SCHEMES):
            raise ValueError(
                "unknown store scheme; use postgresql://user@host:5432/db, "
                "sqlite:///path/state.sqlite3 or memory:"
            )
        return value


class AgentplugConfig(BaseModel):
    """The whole operator config. Unknown top-level keys are kept (shared host files)."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="allow", frozen=True
    )

    plugins: PluginsConfig = Field(default_factory=PluginsConfig)
    runtime: RuntimeSettings = Field(default_factory=RuntimeSettings)
    state: StateSettings = Field(default_factory=StateSettings)
    security: dict[str, Any] = Field(default_factory=dict)
    """``install_policy`` and related settings (validated by their services)."""
    actions: dict[str, Any] = Field(default_factory=dict)
    """Built-in action settings: ``disabled`` names and per-action sections."""
    custom_actions: list[Any] = Field(default_factory=list)
    agent: dict[str, Any] = Field(default_factory=dict)
    """The turn runner's settings (validated by ``agentplug.agent.config``)."""

    def entry(self, plugin_id: str) -> PluginEntry:
        """The entry of ``plugin_id`` (defaults when the operator wrote none)."""
        return self.plugins.entries.get(plugin_id) or _DEFAULT_ENTRY

    @classmethod
    def parse(cls, data: Mapping[str, Any] | None, source: str | None = None) -> AgentplugConfig:
        """Validate ``data``; raise :class:`ConfigError` naming every bad key."""
        try:
            return cls.model_validate(dict(data or {}))
        except ValidationError as exc:
            raise ConfigError(_issues(exc), source) from None


_DEFAULT_ENTRY = PluginEntry()


def _issues(exc: ValidationError) -> list[tuple[str, str]]:
    issues: list[tuple[str, str]] = []
    for err in exc.errors():
        key = ".".join(str(part) for part in err["loc"]) or "<root>"
        if key.lower().endswith(("timeout_ms", "timeoutms")) or ".timeouts." in key:
            problem = (
                f"must be a positive integer of at most {MAX_TIMEOUT_MS} (milliseconds); "
                f"got {err.get('input')!r}"
            )
        elif err["type"] == "extra_forbidden":
            close = difflib.get_close_matches(str(err["loc"][-1]), _keys_at(err["loc"][:-1]), n=1)
            hint = f"did you mean {close[0]!r}?" if close else "check the spelling"
            problem = f"unknown setting; {hint} (see `agentplug config schema`)"
        elif key == "state.url":
            # The URL may hold a password: name the scheme only.
            got = str(err.get("input")).split("://")[0].split(":")[0]
            problem = f"{err['msg'].removeprefix('Value error, ')} (got scheme {got!r})"
        else:
            problem = f"{err['msg']} (got {err.get('input')!r})"
        issues.append((key, problem))
    return issues


def _keys_at(loc: tuple[Any, ...]) -> list[str]:
    """The settings (names and camelCase aliases) of the section at ``loc``."""
    model: Any = AgentplugConfig
    for part in loc:
        fields = getattr(model, "model_fields", None)
        if fields is None:  # a free-form map such as plugins.entries: skip the key
            model = getattr(model, "__args__", (None, None))[-1]
            continue
        info = next((f for n, f in fields.items() if part in (n, f.alias)), None)
        if info is None:
            return []
        model = info.annotation
    fields = getattr(model, "model_fields", None) or {}
    return [*fields, *(f.alias for f in fields.values() if f.alias)]


class ConfigFileError(ConfigError):
    """The config file itself cannot be read (missing, a directory, not UTF-8/UTF-16,
    not valid JSON/TOML/YAML, too deep, a number too long). One line naming the file."""

    def __init__(self, error: DataFileError) -> None:
        # Not ConfigError.__init__: it formats one line per issue, below a headline.
        Exception.__init__(self, f"invalid agentplug configuration in {error}")
        self.source: str | None = error.source
        self.problem = error.problem
        self.line = error.line
        self.column = error.column
        self.issues = [("<file>", error.problem)]


def load_config(path: str | Path) -> AgentplugConfig:
    """Read and validate a config file: TOML (``.toml``), YAML (``.yaml``/``.yml``, needs
    the ``yaml`` extra) or JSON (any other name).

    Raises :class:`ConfigFileError` (one line naming the file) when the file cannot be
    read as data, and :class:`ConfigError` naming every bad key otherwise.
    """
    p = Path(path)
    try:
        data = read_data_file(p)
    except DataFileError as exc:
        raise ConfigFileError(exc) from None
    if not isinstance(data, dict):
        raise ConfigError([("<root>", "the config must be an object (a table)")], str(p))
    return AgentplugConfig.parse(data, str(p))
