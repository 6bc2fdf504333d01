"""The base of agentplug's error family and the configuration error.

They live in the lowest layer so that reading a config or a data file (this package) can
raise them without importing the hook runtime; :mod:`agentplug.core.errors` re-exports
them (the same classes) beside the plugin-loading errors.
"""

from __future__ import annotations

__all__ = ["AgentplugError", "ConfigError", "printable"]


class AgentplugError(Exception):
    """Base of every agentplug error."""


def printable(text: str) -> str:
    """``text`` with line breaks and other control characters escaped (``\\n``,
    ``\\x85``), so that a key or a value taken from a file cannot break an error message
    into lines of its own."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else ch.encode("unicode_escape").decode() for ch in text)


class ConfigError(AgentplugError):
    """Operator configuration is invalid. ``issues`` lists ``(key, problem)`` pairs."""

    def __init__(self, issues: list[tuple[str, str]], source: str | None = None) -> None:
        self.issues = issues
        self.source = source
        where = f" in {printable(source)}" if source else ""
        lines = [f"invalid agentplug configuration{where}:"]
        lines += [f"  {printable(key)}: {printable(problem)}" for key, problem in issues]
        super().__init__("\n".join(lines))
