"""Exceptions raised by the runtime. Each message names what, where, and what to do.

The base class, :class:`AgentplugError`, and :class:`ConfigError` are defined in the
config layer (:mod:`agentplug.config.errors`, below the core) and re-exported here.
"""

from __future__ import annotations

from agentplug.config.errors import AgentplugError, ConfigError, printable

__all__ = [
    "AgentplugError",
    "ConfigError",
    "DuplicatePluginError",
    "HookSignatureError",
    "PluginLoadError",
    "UnknownHookError",
    "load_error_line",
    "one_line",
    "printable",
]


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
        # ``<file>`` stands for the file itself, which the headline names already.
        parts = [problem if key == "<file>" else f"{key}: {problem}" for key, problem in issues]
        return " ".join(f"{headline}: {'; '.join(parts)}".split()) if parts else headline
    return " ".join(str(exc).split()) or type(exc).__name__


def _loader_folders() -> tuple[str, ...]:
    """Folders whose frames are the machinery that loaded a plugin, not its own code."""
    import importlib
    import os

    import pluggy

    folders = [os.path.dirname(os.path.dirname(os.path.abspath(__file__)))]  # agentplug
    folders += [os.path.dirname(os.path.abspath(m.__file__ or "")) for m in (pluggy, importlib)]
    return tuple(folder + os.sep for folder in folders)


def load_error_line(error: PluginLoadError) -> str:
    """A plugin load error as one line that says where: ``plugin 'x': import failed:
    NameError(...) (at /path/plugin.py:12)``, the place in the plugin's own code that
    raised (the file and line of a syntax error); no place when none is known."""
    cause = error.__cause__
    where = None
    if isinstance(cause, SyntaxError) and cause.filename:
        where = f"{cause.filename}:{cause.lineno}"
    elif cause is not None and cause.__traceback__ is not None:
        import traceback

        machinery = _loader_folders()
        frames = [
            frame
            for frame in traceback.extract_tb(cause.__traceback__)
            if not frame.filename.startswith(machinery) and not frame.filename.startswith("<")
        ]
        if frames:
            where = f"{frames[-1].filename}:{frames[-1].lineno}"
    line = one_line(error)
    return f"{line} (at {where})" if where else line
