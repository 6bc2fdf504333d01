"""Checking every section of an operator config with the models the runtime uses.

``agentplug doctor`` used to validate ``plugins`` and ``runtime`` only, so a config that
the runtime later refused (``actions.shell.enabled: "sure"``, a ``customActions`` entry
without an id, ``security.ssrf.allowHosts`` given as a string) passed as OK.
:func:`check_config` runs one check per section, each with the same model or function
the runtime applies when it reads that section, and returns every problem as a
``(key path, problem)`` pair: ``("actions.shell.enabled", "Input should be a valid
boolean ...")``, ``("customActions[0].name", ...)``.

Keys under ``security`` and ``actions`` that no check owns are reported as unknown, with a
did-you-mean hint, so no section goes unchecked. A layer that adds a section registers its
check with :func:`register_section_check` (the key is the section's path, e.g.
``"actions.shell"``).
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping
from typing import Any

from pydantic import BaseModel, ValidationError

from agentplug.actions.builtins._shared import load_settings
from agentplug.actions.builtins.comms.shell import ShellSettings
from agentplug.actions.builtins.lifecycle import restart_settings
from agentplug.actions.builtins.media.settings import AvatarSettings, EmoteSettings, MediaSettings
from agentplug.actions.custom.loading import CustomActionConfigError, read_custom_action_defs
from agentplug.actions.custom.models import CONFIG_KEY
from agentplug.actions.runtime import operator_ssrf_policy
from agentplug.config.model import AgentplugConfig
from agentplug.core.errors import ConfigError
from agentplug.plugins.ejected import plugin_settings
from agentplug.services.install import POLICY_KEYS, InstallPolicy

__all__ = [
    "ConfigIssue",
    "SectionCheck",
    "check_config",
    "checked_sections",
    "register_section_check",
]

ConfigIssue = tuple[str, str]
"""``(key path, problem)``."""
SectionCheck = Callable[[AgentplugConfig], list[ConfigIssue]]
"""Checks one section; returns its problems (or raises :class:`ConfigError`)."""

_CHECKS: dict[str, SectionCheck] = {}
_ALIASES: dict[str, tuple[str, ...]] = {}
_CONTAINERS = ("security", "actions")


def register_section_check(key: str, check: SectionCheck, *, aliases: tuple[str, ...] = ()) -> None:
    """Check the section ``key`` (``"actions.shell"``, ``"agent"``) with ``check``.

    ``aliases`` are other spellings of the last part of the key (``installPolicy``).
    A second registration for the same key replaces the first.
    """
    _CHECKS[key] = check
    _ALIASES[key] = aliases


def checked_sections() -> list[str]:
    """The section keys that have a check, in registration order."""
    return list(_CHECKS)


def _model_issues(prefix: str, model: type[BaseModel], raw: Any) -> list[ConfigIssue]:
    try:
        model.model_validate(raw if raw is not None else {})
    except ValidationError as exc:
        issues = []
        for err in exc.errors():
            where = ".".join(str(p) for p in err["loc"])
            problem = (
                "unknown setting; check the spelling"
                if err["type"] == "extra_forbidden"
                else f"{err['msg']} (got {err.get('input')!r})"
            )
            issues.append((f"{prefix}.{where}" if where else prefix, problem))
        return issues
    return []


def _raising(check: Callable[[AgentplugConfig], object]) -> SectionCheck:
    """A check from a runtime reader that raises :class:`ConfigError` on a bad section."""

    def run(config: AgentplugConfig) -> list[ConfigIssue]:
        try:
            check(config)
        except ConfigError as exc:
            return list(exc.issues)
        return []

    return run


def _install_policy(config: AgentplugConfig) -> list[ConfigIssue]:
    for key in POLICY_KEYS:
        if key in config.security:
            return _model_issues(f"security.{key}", InstallPolicy, config.security[key])
    return []


def _actions_section(name: str, model: type[BaseModel]) -> SectionCheck:
    return _raising(lambda config: load_settings(config.actions, name, model))


def _disabled(config: AgentplugConfig) -> list[ConfigIssue]:
    raw = config.actions.get("disabled", [])
    if not isinstance(raw, list) or not all(isinstance(n, str) for n in raw):
        return [("actions.disabled", f"must be a list of action names, got {raw!r}")]
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


register_section_check("security.install_policy", _install_policy, aliases=("installPolicy",))
register_section_check(
    "security.ssrf", _raising(lambda config: operator_ssrf_policy(config.security))
)
register_section_check("actions.disabled", _disabled)
register_section_check("actions.shell", _actions_section("shell", ShellSettings))
register_section_check("actions.media", _actions_section("media", MediaSettings))
register_section_check("actions.avatar", _actions_section("avatar", AvatarSettings))
register_section_check("actions.emotes", _actions_section("emotes", EmoteSettings))
register_section_check("actions.restart", _raising(lambda c: restart_settings(c.actions)))
register_section_check("actions.plugins", _raising(lambda c: plugin_settings(c.actions)))
register_section_check(CONFIG_KEY, _custom_actions)


def _unknown_keys(config: AgentplugConfig) -> list[ConfigIssue]:
    issues = []
    for container in _CONTAINERS:
        section: Mapping[str, Any] = getattr(config, container)
        known: set[str] = set()
        for key, aliases in _ALIASES.items():
            head, _, rest = key.partition(".")
            if head == container and rest:
                known.add(rest)
                known.update(aliases)
        for key in section:
            if key in known:
                continue
            close = difflib.get_close_matches(key, sorted(known), n=1)
            hint = f"did you mean {close[0]!r}?" if close else f"known: {', '.join(sorted(known))}"
            issues.append((f"{container}.{key}", f"unknown section; {hint}"))
    return issues


def check_config(config: AgentplugConfig) -> list[ConfigIssue]:
    """Every problem of every section of ``config`` (empty when the runtime accepts it)."""
    issues: list[ConfigIssue] = []
    for key, check in _CHECKS.items():
        try:
            issues.extend(check(config))
        except ConfigError as exc:
            issues.extend(exc.issues)
        except Exception as exc:  # a faulty check names its section instead of crashing
            issues.append((key, f"could not be checked: {type(exc).__name__}: {exc}"))
    issues.extend(_unknown_keys(config))
    return issues
