"""The whole operator config as one model: every section the runtime reads, each typed by
the model its own layer reads it with.

The config layer's :class:`~agentplug.config.model.AgentplugConfig` types the sections
the core reads (``plugins``, ``runtime``, ``state``) and keeps the others as plain data,
because their models live in the layers above it. :class:`OperatorConfig` puts them
together: ``agent`` (:class:`~agentplug.agent.config.AgentConfig`), ``actions`` and
``security`` (:class:`~agentplug.actions.config_check.ActionsSettings`,
:class:`~agentplug.actions.config_check.SecuritySettings`) and ``customActions``
(:class:`~agentplug.actions.custom.models.CustomActionDef`). There is one source per
section: the model the runtime validates it with is the one checked here.

* :func:`config_schema` is ``agentplug config schema``;
* :func:`config_problems` is every problem of a config's data in one pass, each naming
  its key with a did-you-mean (``agentplug doctor``, and every command before it runs);
* :func:`model_problems` checks that ``agent.model`` names a provider that exists.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import Any, TextIO

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel

from agentplug.actions.config_check import (
    ActionsSettings,
    SecuritySettings,
    entry_issues,
    registered_keys,
)
from agentplug.actions.custom.models import CONFIG_KEY, CustomActionDef
from agentplug.agent.config import AgentConfig
from agentplug.config.errors import ConfigError
from agentplug.config.issues import ConfigIssue, validation_issues
from agentplug.config.lookup import ConfigSource
from agentplug.config.model import (
    AgentplugConfig,
    PluginsConfig,
    RuntimeSettings,
    StateSettings,
    config_rule,
)
from agentplug.config.suggest import did_you_mean

__all__ = [
    "CUSTOM_ACTIONS_KEY",
    "OperatorConfig",
    "config_problems",
    "config_schema",
    "model_problems",
    "read_operator_config",
    "section_names",
    "unknown_sections",
]

CUSTOM_ACTIONS_KEY = CONFIG_KEY
"""``customActions``: its entries are checked one by one (a malformed entry is skipped
with a warning at run time; the other sections are refused whole)."""
_TYPO_CUTOFF = 0.75
"""How close an unknown top-level key must be to a section name to count as a typo of
it (other unknown keys belong to the host that shares the file)."""


class OperatorConfig(BaseModel):
    """The operator config: ``plugins``, ``runtime``, ``state``, ``agent``, ``actions``,
    ``security`` and ``customActions``. Other top-level keys are kept (a host may share
    the file); one that looks like a misspelt section is a problem."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="allow",
        frozen=True,
        title="agentplug operator config",
    )

    plugins: PluginsConfig = Field(default_factory=PluginsConfig)
    """Which installed plugins load, and each one's settings."""
    runtime: RuntimeSettings = Field(default_factory=RuntimeSettings)
    """Hook budgets and the state directory."""
    state: StateSettings = Field(default_factory=StateSettings)
    """The state store (``state.url``)."""
    agent: AgentConfig = Field(default_factory=AgentConfig)
    """The turn runner: model, prompt, tools, providers, limits."""
    actions: ActionsSettings = Field(default_factory=ActionsSettings)
    """Built-in actions and their families' settings."""
    security: SecuritySettings = Field(default_factory=SecuritySettings)
    """The install policy and the SSRF policy."""
    custom_actions: list[CustomActionDef] = Field(default_factory=list)
    """Actions the operator defines (``http``, ``shell`` or ``code`` handlers)."""


def section_names() -> list[str]:
    """Every top-level section, as written in files (snake_case and camelCase)."""
    fields = OperatorConfig.model_fields
    return sorted({*fields, *(f.alias for f in fields.values() if f.alias)})


def config_schema() -> dict[str, Any]:
    """The JSON Schema of the whole operator config (camelCase keys, as the seed wrote
    them; snake_case is accepted too)."""
    return OperatorConfig.model_json_schema(by_alias=True)


def _structural(data: Mapping[str, Any]) -> dict[str, Any]:
    """``data`` without the custom actions and without the sections other layers
    registered checks for (those are checked by their own checks)."""
    kept: dict[str, Any] = {}
    for key, value in data.items():
        if key in (CUSTOM_ACTIONS_KEY, "custom_actions"):
            continue
        extra = registered_keys(key)
        if extra and isinstance(value, Mapping):
            value = {k: v for k, v in value.items() if k not in extra}
        kept[key] = value
    return kept


def _misspelt_sections(data: Mapping[str, Any]) -> list[ConfigIssue]:
    known = section_names()
    issues = []
    for key in data:
        if key in known:
            continue
        hint = did_you_mean(str(key), known, lead="", cutoff=_TYPO_CUTOFF)
        if hint:
            issues.append((str(key), f"unknown section; {hint} (its settings are ignored)"))
    return issues


def unknown_sections(data: Mapping[str, Any]) -> list[str]:
    """Top-level keys that are no section and no typo of one (kept for the host)."""
    known = section_names()
    typos = {key for key, _ in _misspelt_sections(data)}
    return [str(k) for k in data if k not in known and k not in typos]


def _sections_parsed(data: Mapping[str, Any]) -> AgentplugConfig | None:
    """The config with only the sections that are plain data at the config layer (for the
    custom-action entries and the registered checks)."""
    keys = ("actions", "security", CUSTOM_ACTIONS_KEY, "custom_actions")
    try:
        return AgentplugConfig.model_validate({k: data[k] for k in keys if k in data})
    except ValidationError:
        return None  # a section of the wrong type: the model's problems say so


def config_problems(data: Mapping[str, Any]) -> list[ConfigIssue]:
    """Every problem of a config's data, in one pass: each section with its model, every
    ``customActions`` entry, the registered section checks and misspelt sections. Empty
    when the runtime accepts the config."""
    issues: list[ConfigIssue] = []
    try:
        OperatorConfig.model_validate(_structural(data))
    except ValidationError as exc:
        issues += validation_issues(exc, OperatorConfig, rule=config_rule)
    parsed = _sections_parsed(data)
    if parsed is not None:
        issues += entry_issues(parsed)
    issues += _misspelt_sections(data)
    return issues


def model_problems(data: Mapping[str, Any]) -> list[ConfigIssue]:
    """A problem when ``agent.model`` of a config's data names a provider that is neither
    shipped nor installed (entry point)."""
    from agentplug.agent.config import DEFAULT_MODEL
    from agentplug.agent.providers import ProviderRegistry

    agent = data.get("agent")
    model = agent.get("model", DEFAULT_MODEL) if isinstance(agent, Mapping) else DEFAULT_MODEL
    if not isinstance(model, str):
        return []  # the agent section's model says what is wrong with it
    provider, sep, _ = model.partition("/")
    if not sep:
        return []  # a bare model name is the agent section's own rule
    names = ProviderRegistry().names()
    if provider in names:
        return []
    hint = did_you_mean(provider, names, lead="")
    hint = f"{hint} " if hint else ""
    return [
        (
            "agent.model",
            f"unknown model provider {provider!r}; {hint}write '<provider>/<model>' with one "
            f"of: {', '.join(names)} (or install the package that provides it)",
        )
    ]


def read_operator_config(
    explicit: str | os.PathLike[str] | None = None,
    *,
    verbose: bool = False,
    stream: TextIO | None = None,
) -> tuple[AgentplugConfig, ConfigSource]:
    """The config a command runs on, checked whole before anything starts.

    Found by the one lookup (:func:`~agentplug.config.lookup.locate_config`; with
    ``verbose`` it says which file on ``stream``, stderr by default). Raises
    :class:`~agentplug.core.errors.ConfigError` naming the file and listing every problem
    of every section; a malformed ``customActions`` entry is not one of them (the runtime
    skips it with a warning, and ``agentplug doctor`` reports it).
    """
    from agentplug.config.datafiles import DataFileError, read_data_file
    from agentplug.config.lookup import locate_config
    from agentplug.config.model import ConfigFileError

    source = locate_config(explicit)
    if verbose:
        print(f"agentplug: {source.describe()}", file=stream or sys.stderr)
    if source.path is None:
        return AgentplugConfig(), source
    where = str(source.path)
    try:
        data = read_data_file(source.path)
    except DataFileError as exc:
        raise ConfigFileError(exc) from None
    if not isinstance(data, Mapping):
        raise ConfigError([("<root>", "the config must be an object (a table)")], where)
    fatal = [
        issue
        for issue in config_problems(data)
        if not issue[0].startswith((CUSTOM_ACTIONS_KEY, "custom_actions"))
    ]
    if fatal:
        raise ConfigError(fatal, where)
    return AgentplugConfig.parse(data, where), source
