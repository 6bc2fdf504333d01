"""The exec-environment filter applied after ``resolve_exec_env`` (HOOKS.md "Tools").

Plugins contribute variables to ``exec``; this filter drops what could redirect
command resolution, inject code into interpreters or loaders, reroute traffic through
a proxy, or weaken TLS. Every dropped key is reported (never its value).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from agentplug_hookspecs.tools import DroppedEnvKey, ExecEnvOutcome

from agentplug.core.filters import register_outcome_filter

__all__ = ["EnvFilterResult", "ExecEnvPolicy", "exec_env_outcome", "filter_exec_env"]

_VALID_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")

# Families the reference list may not spell out one by one; matched by pattern so a
# new interpreter flag or proxy spelling is caught too.
_EXTRA_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r".*_PROXY\Z|\AALL_PROXY\Z|\ANO_PROXY\Z"), "proxy variable"),
    (re.compile(r"\APYTHON[A-Z0-9_]*\Z"), "interpreter injection (Python)"),
    (re.compile(r"\A(NODE|DENO|BUN)_OPTIONS\Z"), "interpreter injection (JavaScript)"),
    (
        re.compile(
            r".*(CA_BUNDLE|CA_CERTS?|CERT_FILE|CERT_DIR|REJECT_UNAUTHORIZED|SSL_NO_VERIFY)\Z"
        ),
        "TLS override",
    ),
)


@dataclass(frozen=True)
class ExecEnvPolicy:
    """Blocked names and prefixes (upper-case; compared case-insensitively)."""

    blocked_names: frozenset[str]
    blocked_prefixes: tuple[str, ...]

    @classmethod
    @cache
    def default(cls) -> ExecEnvPolicy:
        """The shipped policy (``agentplug/data/exec_env_policy.json``)."""
        raw = json.loads(
            resources.files("agentplug").joinpath("data/exec_env_policy.json").read_text("utf-8")
        )
        return cls(
            blocked_names=frozenset(n.upper() for n in raw["blocked_names"]),
            blocked_prefixes=tuple(p.upper() for p in raw["blocked_prefixes"]),
        )

    def reason_to_drop(self, key: object, value: object) -> str | None:
        """Why ``key=value`` must be dropped, or ``None`` when it may pass."""
        if not isinstance(key, str) or not _VALID_KEY.match(key):
            return "invalid variable name (must match [A-Za-z_][A-Za-z0-9_]*)"
        if not isinstance(value, str):
            return "value must be a string"
        if "\x00" in value:
            return "value contains a NUL byte"
        upper = key.upper()
        if upper == "PATH":
            return "PATH is never taken from plugins (command resolution depends on it)"
        if upper in self.blocked_names:
            return "dangerous variable (host env security policy)"
        for prefix in self.blocked_prefixes:
            if upper.startswith(prefix):
                return f"dangerous variable prefix {prefix}"
        for pattern, label in _EXTRA_PATTERNS:
            if pattern.match(upper):
                return label
        return None


@dataclass(frozen=True)
class EnvFilterResult:
    """Kept variables and ``(key, reason)`` for each dropped one."""

    env: dict[str, str]
    dropped: list[tuple[str, str]]


def filter_exec_env(env: Mapping[Any, Any], policy: ExecEnvPolicy | None = None) -> EnvFilterResult:
    """Filter a merged plugin environment. Values of dropped keys are never reported."""
    pol = policy or ExecEnvPolicy.default()
    kept: dict[str, str] = {}
    dropped: list[tuple[str, str]] = []
    for key, value in env.items():
        reason = pol.reason_to_drop(key, value)
        if reason is None:
            kept[str(key)] = str(value)
        else:
            dropped.append((str(key), reason))
    return EnvFilterResult(kept, dropped)


def exec_env_outcome(env: dict[str, str], contributors: dict[str, str]) -> ExecEnvOutcome:
    """The ``resolve_exec_env`` outcome: the merged environment, filtered.

    Registered (below) as the ``exec_env`` post-filter of the hook's ``DictMerge``
    reduction; ``contributors`` maps each key to the plugin that set it last.
    """
    filtered = filter_exec_env(env)
    return ExecEnvOutcome(
        env=filtered.env,
        dropped=[
            DroppedEnvKey(key=k, reason=why, plugin_id=contributors.get(k))
            for k, why in filtered.dropped
        ],
        contributors={k: contributors[k] for k in filtered.env if k in contributors},
    )


register_outcome_filter("exec_env", exec_env_outcome)
