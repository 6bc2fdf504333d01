"""Install decisions: the operator's ``security.install_policy``, then ``before_install``.

Policy shape (``security.install_policy``, camelCase ``installPolicy`` accepted)::

    {"enabled": true,
     "rules": [{"action": "block", "name": "evil-*"},
               {"action": "allow", "name": "agentplug-*", "version": ">=1.0,<2",
                "source": "https://pypi.org/*"}],
     "default": "block"}

Rules are evaluated in order; the first rule whose ``name`` glob (and, when given, the
``version`` specifier and ``source`` glob) matches decides; otherwise ``default``.
Names compare case-insensitively with ``-``/``_``/``.`` treated alike (PEP 503).

Fail closed: an *enabled* policy that cannot be evaluated blocks the install: invalid
rules, a rule needing a version or source the request does not carry, a version that
is not PEP 440, or any evaluation error. A policy whose ``enabled`` cannot even be read
counts as enabled.
"""

from __future__ import annotations

import fnmatch
import logging
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

from agentplug_hookspecs.lifecycle import (
    BuiltinScan,
    InstallContext,
    InstallEvent,
    InstallFinding,
    InstallOutcome,
)
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic.alias_generators import to_camel

from agentplug.core.results import HandlerReport

if TYPE_CHECKING:
    from agentplug.core.host import PluginHost

__all__ = [
    "InstallDecision",
    "InstallPolicy",
    "InstallRule",
    "PolicyDecision",
    "check_install",
    "evaluate_policy",
    "policy_from_config",
]

log = logging.getLogger("agentplug.install")

POLICY_KEYS = ("install_policy", "installPolicy")


class _Strict(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True
    )


class InstallRule(_Strict):
    """One ordered allow/block rule."""

    action: Literal["allow", "block"]
    name: str = Field(min_length=1)
    """Glob over the normalised package name (``agentplug-*``)."""
    version: str | None = None
    """PEP 440 specifier set (``>=1.0,<2``); the request must carry a version."""
    source: str | None = None
    """Glob over the source (index URL, path, VCS URL); the request must carry one."""

    @field_validator("version")
    @classmethod
    def _valid_specifier(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                SpecifierSet(value)
            except InvalidSpecifier:
                raise ValueError(f"not a PEP 440 version specifier: {value!r}") from None
        return value


class InstallPolicy(_Strict):
    """``security.install_policy``."""

    enabled: bool = False
    rules: list[InstallRule] = Field(default_factory=list)
    default: Literal["allow", "block"] = "allow"


class PolicyDecision(BaseModel):
    """Outcome of evaluating the install policy for one request."""

    allowed: bool
    reason: str
    rule: int | None = None
    """Index of the deciding rule (``None``: default, disabled or not evaluable)."""
    evaluable: bool = True


class InstallDecision(BaseModel):
    """The install decision: policy first, then ``before_install``."""

    allowed: bool
    blocked_by: str | None = None
    """``"security.install_policy"`` or the id of the blocking plugin."""
    reason: str | None = None
    policy: PolicyDecision
    findings: list[InstallFinding] = Field(default_factory=list)
    handlers: list[HandlerReport] = Field(default_factory=list)


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def policy_from_config(security: Mapping[str, Any] | None) -> InstallPolicy | str:
    """The validated policy, or the reason it cannot be evaluated (a string).

    An absent policy is a disabled one. An invalid one whose ``enabled`` is readable
    as ``false`` is disabled too; any other invalid policy cannot be evaluated.
    """
    raw: Any = None
    for key in POLICY_KEYS:
        if security and key in security:
            raw = security[key]
            break
    else:
        return InstallPolicy()
    try:
        return InstallPolicy.model_validate(raw)
    except ValidationError as exc:
        if isinstance(raw, Mapping) and raw.get("enabled") is False:
            return InstallPolicy()
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "<policy>"
        return f"security.install_policy.{where}: {err['msg']}"


def evaluate_policy(
    policy: InstallPolicy | str, name: str | None, version: str | None, source: str | None
) -> PolicyDecision:
    """Apply ``policy`` to one request (see the module docstring for the rules)."""
    if isinstance(policy, str):
        return PolicyDecision(
            allowed=False, reason=f"install policy cannot be evaluated: {policy}", evaluable=False
        )
    if not policy.enabled:
        return PolicyDecision(allowed=True, reason="install policy disabled")
    try:
        if not name:
            raise _NotEvaluable("the request carries no package name")
        package = _normalise(name)
        parsed: Version | None = None
        for index, rule in enumerate(policy.rules):
            if not fnmatch.fnmatchcase(package, _normalise(rule.name)):
                continue
            if rule.version is not None:
                if not version:
                    raise _NotEvaluable(f"rule {index} needs a version; the request has none")
                if parsed is None:
                    try:
                        parsed = Version(version)
                    except InvalidVersion:
                        raise _NotEvaluable(f"version {version!r} is not PEP 440") from None
                if not SpecifierSet(rule.version).contains(parsed, prereleases=True):
                    continue
            if rule.source is not None:
                if not source:
                    raise _NotEvaluable(f"rule {index} needs a source; the request has none")
                if not fnmatch.fnmatchcase(source, rule.source):
                    continue
            return PolicyDecision(
                allowed=rule.action == "allow",
                reason=f"install policy rule {index} ({rule.action} {rule.name})",
                rule=index,
            )
        return PolicyDecision(
            allowed=policy.default == "allow",
            reason=f"install policy default ({policy.default})",
        )
    except _NotEvaluable as exc:
        return PolicyDecision(
            allowed=False, reason=f"install policy cannot be evaluated: {exc}", evaluable=False
        )
    except Exception as exc:
        return PolicyDecision(
            allowed=False,
            reason=f"install policy cannot be evaluated: {type(exc).__name__}",
            evaluable=False,
        )


class _NotEvaluable(Exception):
    pass


async def check_install(
    host: PluginHost,
    event: InstallEvent | Mapping[str, Any],
    ctx: InstallContext | Mapping[str, Any] | None = None,
) -> InstallDecision:
    """Decide one install or update: ``security.install_policy``, then ``before_install``.

    A policy block is final (the hook does not run). ``before_install`` handlers then
    add findings or block; a failing handler blocks (fail closed). ``builtin_scan`` is
    always the empty ``ok`` result: the runtime runs no built-in scan.
    """
    data = dict(event.model_dump() if isinstance(event, InstallEvent) else event)
    data.pop("builtinScan", None)
    data["builtin_scan"] = BuiltinScan()
    policy = policy_from_config(host.config.security)
    decision = evaluate_policy(
        policy, _str(data.get("name")), _str(data.get("version")), _str(data.get("source"))
    )
    if not decision.allowed:
        log.warning("install of %r blocked: %s", data.get("name"), decision.reason)
        return InstallDecision(
            allowed=False,
            blocked_by="security.install_policy",
            reason=decision.reason,
            policy=decision,
        )
    try:
        install_event = InstallEvent.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "<event>"
        return InstallDecision(
            allowed=False,
            blocked_by="agentplug",
            reason=f"invalid install request: {where}: {err['msg']}",
            policy=decision,
        )
    result = await host.hooks.before_install(install_event, ctx)
    outcome: InstallOutcome = result.outcome
    if outcome.blocked:
        return InstallDecision(
            allowed=False,
            blocked_by=outcome.blocked_by,
            reason=outcome.block_reason or f"blocked by plugin {outcome.blocked_by!r}",
            policy=decision,
            findings=outcome.findings,
            handlers=result.handlers,
        )
    return InstallDecision(
        allowed=True, policy=decision, findings=outcome.findings, handlers=result.handlers
    )


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None
