"""message-redactor: scrub secrets from outbound messages, or stop them.

One ``@hookimpl`` on ``message_sending`` (a pipeline: lower-priority handlers see the
content this plugin returns). It runs at priority 100 so that every later handler, and the
channel, only ever sees the redacted text.

- Content containing a phrase from ``forbidden`` is cancelled (``cancel: true``) with a
  bounded ``cancel_reason`` and ``metadata`` that never repeat the phrase or the message.
- Otherwise API-key-like tokens, e-mail addresses and the operator's ``patterns`` are
  replaced with ``[REDACTED:<rule>]``. A pattern with a named group ``secret`` redacts only
  that group (``token=(?P<secret>\\S+)`` keeps ``token=``).

A redactor that fails open leaks: when its config is invalid the message is cancelled with
a reason naming the bad key, instead of being delivered unredacted.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from agentplug import hookimpl
from agentplug_hookspecs import thaw
from agentplug_hookspecs.messages import MessageSendingEvent, MessageSendingResult

__all__ = [
    "BUILTIN_RULES",
    "PLUGIN_ID",
    "PRIORITY",
    "Redaction",
    "Rule",
    "message_sending",
    "redact",
]

PLUGIN_ID = "message-redactor"
PRIORITY = 100
"""High: redact before other handlers (and audit trails) see the content."""


@dataclass(frozen=True, slots=True)
class Rule:
    """A named pattern; the match (or its ``secret`` group) is replaced."""

    name: str
    pattern: re.Pattern[str]


def _rule(name: str, pattern: str, flags: int = 0) -> Rule:
    return Rule(name, re.compile(pattern, flags))


API_KEY_RULES: tuple[Rule, ...] = (
    # Provider-prefixed tokens: OpenAI/Anthropic, GitHub, AWS, Slack, Google, Stripe.
    _rule("api_key", r"\bsk-[A-Za-z0-9_-]{16,}"),
    _rule("api_key", r"\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})"),
    _rule("api_key", r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
    _rule("api_key", r"\bxox[abposr]-[A-Za-z0-9-]{10,}"),
    _rule("api_key", r"\bAIza[0-9A-Za-z_-]{35}"),
    _rule("api_key", r"\b[rs]k_(?:live|test)_[0-9A-Za-z]{16,}"),
    # Credentials announced by their name: keep the name, drop the value.
    _rule(
        "api_key",
        r"\b(?:api[_-]?key|secret|token|password|passwd)\s*[:=]\s*[\"']?(?P<secret>[^\s\"']{6,})",
        re.IGNORECASE,
    ),
    _rule("api_key", r"\bBearer\s+(?P<secret>[A-Za-z0-9._~+/-]{16,}=*)", re.IGNORECASE),
)
EMAIL_RULE = _rule(
    "email", r"\b[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}\b"
)
BUILTIN_RULES: tuple[Rule, ...] = (*API_KEY_RULES, EMAIL_RULE)


class ConfigurationError(ValueError):
    """The plugin config is invalid; the message names the key."""


@dataclass(frozen=True, slots=True)
class Settings:
    """The validated plugin config."""

    rules: tuple[Rule, ...]
    forbidden: tuple[str, ...]
    """Casefolded phrases."""


@dataclass(frozen=True, slots=True)
class Redaction:
    """Redacted text and how many matches each rule replaced."""

    text: str
    counts: Mapping[str, int]


def redact(text: str, rules: Sequence[Rule] = BUILTIN_RULES) -> Redaction:
    """Replace every match of ``rules`` in ``text`` with ``[REDACTED:<rule name>]``."""
    counts: dict[str, int] = {}
    for rule in rules:
        marker = f"[REDACTED:{rule.name}]"

        def replace(match: re.Match[str], marker: str = marker) -> str:
            if "secret" in match.re.groupindex and match.group("secret") is not None:
                start, end = match.span("secret")
                offset = match.start()
                whole = match.group(0)
                return whole[: start - offset] + marker + whole[end - offset :]
            return marker

        text, replaced = rule.pattern.subn(replace, text)
        if replaced:
            counts[rule.name] = counts.get(rule.name, 0) + replaced
    return Redaction(text, counts)


def _string_list(config: Mapping[str, Any], key: str) -> list[str]:
    raw = config.get(key, [])
    if isinstance(raw, str) or not isinstance(raw, list):
        raise ConfigurationError(f"{key} must be a list of strings")
    for index, item in enumerate(raw):
        if not isinstance(item, str) or not item:
            raise ConfigurationError(f"{key}[{index}] must be a non-empty string")
    return list(raw)


def _custom_rules(config: Mapping[str, Any]) -> list[Rule]:
    raw = config.get("patterns", [])
    named: list[tuple[str, str, str]]  # (config key, rule name, regex)
    if isinstance(raw, Mapping):
        named = [(f"patterns.{name}", str(name), regex) for name, regex in raw.items()]
    else:
        named = [
            (f"patterns[{i}]", "pattern", regex)
            for i, regex in enumerate(_string_list(config, "patterns"))
        ]
    rules = []
    for key, name, regex in named:
        if not isinstance(regex, str) or not regex:
            raise ConfigurationError(f"{key} must be a non-empty regular expression")
        try:
            rules.append(Rule(name, re.compile(regex)))
        except re.error as exc:
            raise ConfigurationError(f"{key} is not a valid regular expression ({exc})") from None
        if rules[-1].pattern.match(""):
            raise ConfigurationError(f"{key} matches the empty string")
    return rules


@lru_cache(maxsize=32)
def _settings(config_json: str) -> Settings:
    config: dict[str, Any] = json.loads(config_json)
    rules: list[Rule] = []
    if config.get("redact_api_keys", True) is not False:
        rules.extend(API_KEY_RULES)
    if config.get("redact_emails", True) is not False:
        rules.append(EMAIL_RULE)
    rules.extend(_custom_rules(config))
    forbidden = tuple(phrase.casefold() for phrase in _string_list(config, "forbidden"))
    return Settings(tuple(rules), forbidden)


def _cancel(reason: str, **metadata: Any) -> MessageSendingResult:
    return MessageSendingResult(
        cancel=True, cancel_reason=reason, metadata={"plugin": PLUGIN_ID, **metadata}
    )


@hookimpl(priority=PRIORITY)
def message_sending(event: MessageSendingEvent) -> MessageSendingResult | None:
    """Cancel messages with a forbidden phrase; redact secrets from the others."""
    config = event.context.plugin_config
    try:
        settings = _settings(json.dumps(thaw(config), sort_keys=True, default=str))
    except ConfigurationError as exc:
        return _cancel(
            f"{PLUGIN_ID} is misconfigured (plugins.entries.{PLUGIN_ID}.config.{exc}); "
            "message withheld",
            rule="config_error",
        )
    folded = event.content.casefold()
    for index, phrase in enumerate(settings.forbidden):
        if phrase in folded:
            # Neither the phrase nor the content goes into the reason: both may be sensitive.
            return _cancel(
                "message contains a phrase the operator forbids in outbound messages",
                rule="forbidden",
                phrase_index=index,
            )
    redaction = redact(event.content, settings.rules)
    if not redaction.counts:
        return None
    return MessageSendingResult(content=redaction.text)
