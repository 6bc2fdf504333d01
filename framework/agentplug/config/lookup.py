"""Where a command's operator config comes from: one lookup for every ``agentplug`` command.

The order, first match wins:

1. ``--config FILE`` on the command line;
2. the ``AGENTPLUG_CONFIG`` environment variable (an empty value counts as unset);
3. ``agentplug.toml``, ``agentplug.yaml`` or ``agentplug.json`` in the current directory
   (in that order; the others are reported as ignored);
4. no file: the defaults.

:func:`locate_config` answers where without reading anything; :func:`resolve_config` also
loads the file and, when asked, says on stderr which file it used (``agentplug -v ...``).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal, TextIO

from agentplug.config.suggest import did_you_mean

if TYPE_CHECKING:  # the config models load when a config is read, not at import
    from agentplug.config.model import AgentplugConfig

__all__ = [
    "CONFIG_ENV",
    "CONFIG_FILE_NAMES",
    "CONFIG_HELP",
    "ConfigSource",
    "locate_config",
    "resolve_config",
    "top_level_typos",
]

CONFIG_ENV = "AGENTPLUG_CONFIG"
"""Environment variable naming the config file when ``--config`` is not given."""
CONFIG_FILE_NAMES = ("agentplug.toml", "agentplug.yaml", "agentplug.json")
"""Files looked up in the current directory, in this order."""

CONFIG_HELP = (
    "operator config file (default: $AGENTPLUG_CONFIG, else ./agentplug.toml, "
    "./agentplug.yaml or ./agentplug.json, else none)"
)
"""The help text of every command's ``--config`` option."""

Origin = Literal["--config", "AGENTPLUG_CONFIG", "current directory", "none"]


@dataclass(frozen=True)
class ConfigSource:
    """Which config file a command uses, and why."""

    path: Path | None
    """The file (``None``: no file, the defaults)."""
    origin: Origin
    """``--config``, ``AGENTPLUG_CONFIG``, ``current directory`` or ``none``."""
    ignored: tuple[Path, ...] = field(default=())
    """Other ``agentplug.*`` files of the current directory that lost to ``path``."""

    def describe(self) -> str:
        """One line for ``-v`` and ``agentplug doctor``: ``config: FILE (from ...)``."""
        if self.path is None:
            names = ", ".join(CONFIG_FILE_NAMES)
            return (
                f"config: none, using the defaults (no --config, no ${CONFIG_ENV}, "
                f"no {names} in the current directory)"
            )
        why = {
            "--config": "from --config",
            "AGENTPLUG_CONFIG": f"from ${CONFIG_ENV}",
            "current directory": "found in the current directory",
        }.get(self.origin, self.origin)
        line = f"config: {self.path} ({why})"
        if self.ignored:
            line += "; ignored: " + ", ".join(str(p) for p in self.ignored)
        return line


def locate_config(
    explicit: str | os.PathLike[str] | None = None,
    *,
    cwd: str | os.PathLike[str] | None = None,
    environ: Mapping[str, str] | None = None,
) -> ConfigSource:
    """Where the config comes from (nothing is read; a named file need not exist)."""
    env = os.environ if environ is None else environ
    if explicit:
        return ConfigSource(Path(explicit), "--config")
    from_env = env.get(CONFIG_ENV, "").strip()
    if from_env:
        return ConfigSource(Path(from_env), "AGENTPLUG_CONFIG")
    here = Path(cwd) if cwd is not None else Path.cwd()
    present = [here / name for name in CONFIG_FILE_NAMES if (here / name).is_file()]
    if present:
        shown = [Path(p.name) for p in present]
        return ConfigSource(shown[0], "current directory", tuple(shown[1:]))
    return ConfigSource(None, "none")


def top_level_typos(config: AgentplugConfig) -> list[str]:
    """Notes for unknown top-level keys that look like a misspelt agentplug setting.

    Unknown top-level keys are kept for the host (a shared file); only near misses of a
    known section (``runtim``, ``plugin``) are worth a word.
    """
    from agentplug.config.model import AgentplugConfig

    known = sorted(
        {name for name in AgentplugConfig.model_fields}
        | {f.alias for f in AgentplugConfig.model_fields.values() if f.alias}
    )
    notes = []
    for key in config.model_extra or {}:
        hint = did_you_mean(key, known, cutoff=0.75)
        if hint:
            notes.append(f"top-level key {key!r} is not an agentplug setting{hint}")
    return notes


def resolve_config(
    explicit: str | os.PathLike[str] | None = None,
    *,
    verbose: bool = False,
    stream: TextIO | None = None,
) -> tuple[AgentplugConfig, ConfigSource]:
    """Locate and load the config; with ``verbose``, say which file on ``stream`` (stderr).

    Near misses of a known top-level section are always noted on ``stream``. Raises
    :class:`~agentplug.config.errors.ConfigError` (naming the file) for a file that is
    missing or invalid.
    """
    from agentplug.config.model import AgentplugConfig, load_config

    out = stream if stream is not None else sys.stderr
    source = locate_config(explicit)
    if verbose:
        print(f"agentplug: {source.describe()}", file=out)
    config = load_config(source.path) if source.path is not None else AgentplugConfig()
    for note in top_level_typos(config):
        print(f"agentplug: note: {source.path}: {note}", file=out)
    return config, source
