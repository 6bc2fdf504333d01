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

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

from agentplug_hookspecs._markers import MAX_TIMEOUT_MS
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic.alias_generators import to_camel

from agentplug.config.datafiles import DataFileError, read_data_file
from agentplug.config.errors import ConfigError
from agentplug.config.issues import ConfigIssue, shown, validation_issues

__all__ = [
    "AgentplugConfig",
    "ConfigFileError",
    "Contracts",
    "HookSettings",
    "PluginEntry",
    "PluginsConfig",
    "RuntimeSettings",
    "StateSettings",
    "config_rule",
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


def config_rule(key: str, err: Mapping[str, Any]) -> str | None:
    """The base sections' own wording: timeouts say their unit and bound; ``state.url``
    shows its scheme only (the URL may hold a password)."""
    if key.lower().endswith(("timeout_ms", "timeoutms")) or ".timeouts." in key:
        return (
            f"must be a positive integer of at most {MAX_TIMEOUT_MS} (milliseconds); "
            f"got {shown(err.get('input'))}"
        )
    if key == "state.url" and err["type"] != "extra_forbidden":
        got = str(err.get("input")).split("://")[0].split(":")[0]
        return f"{str(err['msg']).removeprefix('Value error, ')} (got scheme {got!r})"
    return None


def _issues(exc: ValidationError) -> list[ConfigIssue]:
    return validation_issues(exc, AgentplugConfig, rule=config_rule)


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
