"""Parameter extraction: reading raw parameter values from a message."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

from agentplug.actions.model import Action, Message, State

__all__ = ["ParameterExtractor", "StructuredParameterExtractor", "first_json_object"]


@runtime_checkable
class ParameterExtractor(Protocol):
    """Reads raw values for an action's declared parameters from the conversation."""

    async def extract(
        self, action: Action, message: Message, state: State | None
    ) -> Mapping[str, Any]:
        """Return raw values by parameter name (unvalidated; strings are fine)."""
        ...


_KEY_VALUE = re.compile(
    r"""(?<!\S)(?P<key>[A-Za-z_][A-Za-z0-9_.-]*)=
        (?P<value>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|\S*)""",
    re.VERBOSE,
)


def _unquote(raw: str) -> str:
    if len(raw) >= 2 and raw[0] == raw[-1] == '"':
        try:
            value = json.loads(raw)
        except json.JSONDecodeError:
            return raw[1:-1]
        return value if isinstance(value, str) else raw[1:-1]
    if len(raw) >= 2 and raw[0] == raw[-1] == "'":
        return re.sub(r"\\(.)", r"\1", raw[1:-1])
    return raw


def first_json_object(text: str) -> tuple[dict[str, Any], int, int] | None:
    """The first JSON object embedded in ``text`` with its span, or ``None``."""
    decoder = json.JSONDecoder()
    start = text.find("{")
    while start != -1:
        try:
            value, end = decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            start = text.find("{", start + 1)
            continue
        if isinstance(value, dict):
            return value, start, end
        start = text.find("{", end)
    return None


class StructuredParameterExtractor:
    """Default extractor: structured input only, no guessing from prose.

    Sources, first one that has a parameter wins:

    1. ``message.content["parameters"]`` (or ``["params"]``) when it is an object; otherwise
       the top-level keys of ``message.content`` (except ``action``).
    2. The first JSON object embedded in the message text.
    3. ``key=value`` pairs in the rest of the text; values may be quoted with ``"..."``
       (JSON escapes) or ``'...'`` (backslash escapes) to contain spaces.

    Only declared parameter names are returned: a handler never sees undeclared input.
    """

    async def extract(
        self, action: Action, message: Message, state: State | None
    ) -> dict[str, Any]:
        """Return raw values for ``action``'s declared parameters found in ``message``."""
        return self.extract_sync(action, message)

    def extract_sync(self, action: Action, message: Message) -> dict[str, Any]:
        """Synchronous extraction used by :meth:`extract`."""
        sources: list[Mapping[str, Any]] = []
        content = message.content or {}
        nested = content.get("parameters", content.get("params"))
        if isinstance(nested, Mapping):
            sources.append(nested)
        else:
            sources.append({k: v for k, v in content.items() if k != "action"})
        text = message.text
        found = first_json_object(text)
        if found is not None:
            obj, start, end = found
            sources.append(obj)
            # Pairs inside the JSON object's strings are not key=value input.
            text = text[:start] + " " + text[end:]
        pairs: dict[str, str] = {}
        for match in _KEY_VALUE.finditer(text):
            pairs.setdefault(match.group("key"), _unquote(match.group("value")))
        sources.append(pairs)
        values: dict[str, Any] = {}
        for param in action.parameters:
            for source in sources:
                if param.name in source:
                    values[param.name] = source[param.name]
                    break
        return values
