"""Checking every section of an operator config with the models the runtime uses.

``agentplug doctor`` used to validate ``plugins`` and ``runtime`` only, so a config that
the runtime later refused (``actions.shell.enabled: "sure"``, a ``customActions`` entry
without an id, ``security.ssrf.allowHosts`` given as a string) passed as OK.
:func:`check_config` runs one check per section, each with the same model or function
the runtime applies when it reads that section, and returns every problem as a
``(key path, problem)`` pair: ``("actions.shell.enabled", "Input should be a valid
boolean ...")``, ``("customActions[0].name", ...)``.

The ``security`` and ``actions`` sections are each one model (:class:`SecuritySettings`,
:class:`ActionsSettings`) made of the models their services read them with, so a key
that nothing reads is reported as unknown, with a did-you-mean. A layer that adds a
section outside these models registers its check with :func:`register_section_check`
(the key is the section's path, e.g. ``"actions.my_family"``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel

from agentplug.actions.builtins.comms.settings import ShellSettings
from agentplug.actions.builtins.lifecycle import RestartSettings
from agentplug.actions.builtins.media.settings import AvatarSettings, EmoteSettings, MediaSettings
from agentplug.actions.code_handler import CodeSettings
from agentplug.actions.custom.loading import CustomActionConfigError, read_custom_action_defs
from agentplug.actions.custom.models import CONFIG_KEY
from agentplug.config.issues import ConfigIssue, validation_issues
from agentplug.config.model import AgentplugConfig
from agentplug.core.errors import ConfigError
from agentplug.plugins.ejected import PluginSettings
from agentplug.security.ssrf import SSRFPolicy
from agentplug.services.install import InstallPolicy

__all__ = [
    "ActionsSettings",
    "ConfigIssue",
    "SectionCheck",
    "SecuritySettings",
    "check_config",
    "checked_sections",
    "entry_issues",
    "register_section_check",
    "registered_keys",
]

SectionCheck = Callable[[AgentplugConfig], list[ConfigIssue]]
"""Checks one section; returns its problems (or raises :class:`ConfigError`)."""


class _Sections(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True
    )


class SecuritySettings(_Sections):
    """``security``: every setting under it, each read with its service's own model."""

    install_policy: InstallPolicy | None = None
    """Which plugin packages may be installed (``installPolicy`` too)."""
    ssrf: SSRFPolicy | None = None
    """Outbound requests of actions (``allowHosts``, ``allowCidrs``, timeouts, sizes)."""


class ActionsSettings(_Sections):
    """``actions``: built-in actions turned off and the settings of each action family."""

    disabled: list[str] = Field(default_factory=list)
    """Names of built-in actions that are not registered."""
    shell: ShellSettings | None = None
    """``SHELL_COMMAND`` and custom ``shell`` actions (off by default)."""
    code: CodeSettings | None = None
    """The sandbox pool of custom ``code`` actions."""
    media: MediaSettings | None = None
    """``GENERATE_MEDIA``."""
    avatar: AvatarSettings | None = None
    """The host's avatar API (``PLAY_EMOTE``)."""
    emotes: EmoteSettings | None = None
    """The emote catalogue."""
    restart: RestartSettings | None = None
    """``RESTART_AGENT``."""
    plugins: PluginSettings | None = None
    """Plugin installs: package index, target folder, restart."""


_SECTIONS: dict[str, type[BaseModel]] = {"security": SecuritySettings, "actions": ActionsSettings}
_CHECKS: dict[str, SectionCheck] = {}


def register_section_check(key: str, check: SectionCheck, *, aliases: tuple[str, ...] = ()) -> None:
    """Check a section that :class:`ActionsSettings` and :class:`SecuritySettings` do not
    hold (``"actions.my_family"``) with ``check``; the key is then a known one.

    ``aliases`` are other spellings of the last part of the key. A second registration
    for the same key replaces the first.
    """
    _CHECKS[key] = check
    head, _, rest = key.partition(".")
    _EXTRA_KEYS[key] = (head, (rest, *aliases) if rest else aliases)


_EXTRA_KEYS: dict[str, tuple[str, tuple[str, ...]]] = {}


def checked_sections() -> list[str]:
    """The section keys that are checked: every part of ``actions`` and ``security``
    (their models), ``customActions``, then the registered ones."""
    found = [f"{name}.{field}" for name, model in _SECTIONS.items() for field in model.model_fields]
    return [*found, CONFIG_KEY, *_CHECKS]


def registered_keys(section: str) -> set[str]:
    """The keys of ``section`` (``"actions"``) that a registered check owns."""
    return {key for head, keys in _EXTRA_KEYS.values() if head == section for key in keys}


def _section_issues(config: AgentplugConfig, name: str) -> list[ConfigIssue]:
    raw: Mapping[str, Any] = getattr(config, name)
    registered = registered_keys(name)
    try:
        _SECTIONS[name].model_validate({k: v for k, v in raw.items() if k not in registered})
    except ValidationError as exc:
        return validation_issues(exc, _SECTIONS[name], name)
    return []


def _custom_actions(config: AgentplugConfig) -> list[ConfigIssue]:
    try:
        _, errors = read_custom_action_defs({CONFIG_KEY: list(config.custom_actions)})
    except CustomActionConfigError as exc:
        return [(CONFIG_KEY, str(exc))]
    issues = []
    for error in errors:
        field = "" if error.field == "(entry)" else error.field
        joiner = "" if not field or field.startswith("[") else "."
        issues.append((f"{CONFIG_KEY}[{error.index}]{joiner}{field}", error.message))
    return issues


def check_config(config: AgentplugConfig) -> list[ConfigIssue]:
    """Every problem of the ``actions``, ``security`` and ``customActions`` sections of
    ``config`` (empty when the runtime accepts them)."""
    issues = _section_issues(config, "security") + _section_issues(config, "actions")
    return issues + entry_issues(config)


def entry_issues(config: AgentplugConfig) -> list[ConfigIssue]:
    """The problems that the section models do not see: each ``customActions`` entry
    (one by one, duplicates included) and the registered section checks."""
    issues = _custom_actions(config)
    for key, check in _CHECKS.items():
        try:
            issues.extend(check(config))
        except ConfigError as exc:
            issues.extend(exc.issues)
        except Exception as exc:  # a faulty check names its section instead of crashing
            issues.append((key, f"could not be checked: {type(exc).__name__}: {exc}"))
    return issues
