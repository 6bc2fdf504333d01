"""Exceptions raised by the runtime. Each message names what, where, and what to do."""

from __future__ import annotations

__all__ = [
    "AgentplugError",
    "ConfigError",
    "DuplicatePluginError",
    "HookSignatureError",
    "PluginLoadError",
    "UnknownHookError",
    "one_line",
    "printable",
]


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


class PluginLoadError(AgentplugError):
    """A plugin could not be loaded or registered."""

    def __init__(self, plugin_id: str, cause: str) -> None:
        self.plugin_id = plugin_id
        self.cause = cause
        super().__init__(f"plugin {plugin_id!r}: {cause}")


class UnknownHookError(PluginLoadError):
    """A plugin implements a hook that no hookspec declares."""


class HookSignatureError(PluginLoadError):
    """A hook implementation's arguments do not match its hookspec."""


class DuplicatePluginError(PluginLoadError):
    """Two plugins were registered under the same plugin id."""


def one_line(exc: BaseException) -> str:
    """The error as one line (for command-line tools): a report with ``issues`` (a config
    or scenario error) as its headline followed by every ``key: problem``, joined by ``;``."""
    issues = getattr(exc, "issues", None)
    if isinstance(issues, list) and "\n" in str(exc):  # else the message is one line already
        headline = (str(exc).splitlines() or [type(exc).__name__])[0].rstrip(":")
        parts = [f"{key}: {problem}" for key, problem in issues]
        return " ".join(f"{headline}: {'; '.join(parts)}".split()) if parts else headline
    return " ".join(str(exc).split()) or type(exc).__name__
