"""Where plugin sources live: settings, ejected copies and the install target.

Kept apart from :mod:`agentplug.plugins.manager` (pip, git, archives) because the loader
needs it at every start-up: it must stay cheap to import, and cheap to call when nothing
is ejected.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
import re
import sys
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from agentplug.core.errors import ConfigError

if TYPE_CHECKING:
    from agentplug.core.host import PluginHost

__all__ = [
    "CORE_DISTRIBUTION",
    "DEFAULT_STATE_DIR",
    "LOCAL_BRANCH",
    "PLUGIN_ID_PATTERN",
    "RECORD_FILE",
    "STATE_DIR_ENV",
    "UPSTREAM_BRANCH",
    "PluginSettings",
    "PluginSources",
    "UpstreamRecord",
    "activate_ejected_source",
    "activate_install_target",
    "core_root",
    "ejected_import_roots",
    "ejected_preference",
    "ejected_source",
    "import_roots_of",
    "plugin_settings",
    "plugins_root",
    "prefer_ejected_copy",
    "read_record",
    "resolve_state_dir",
]

log = logging.getLogger("agentplug.plugins")

RECORD_FILE = ".agentplug-upstream.json"
"""Upstream record at the root of every ejected working copy."""
DEFAULT_STATE_DIR = ".agentplug-state"
STATE_DIR_ENV = "AGENTPLUG_STATE_DIR"
LOCAL_BRANCH = "main"
UPSTREAM_BRANCH = "upstream"
CORE_DISTRIBUTION = "agentplug"

PLUGIN_ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
"""A plugin id that may name a folder under ``<state_dir>/plugins`` (no path separators)."""


class PluginSettings(BaseModel):
    """``actions.plugins``: where packages come from and where they go."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)

    index_url: str | None = Field(default=None, alias="indexUrl")
    """Package index (``pip --index-url``); pip's default when unset."""
    find_links: list[str] = Field(default_factory=list, alias="findLinks")
    """Folders or pages of wheels/sdists (``pip --find-links``)."""
    no_index: bool = Field(default=False, alias="noIndex")
    """Use only ``find_links`` (``pip --no-index``)."""
    target: str | None = None
    """Install into this folder (``pip install --target``) instead of the environment."""
    python: str | None = None
    """Interpreter whose pip runs (default: the running one)."""
    build_isolation: bool = Field(default=True, alias="buildIsolation")
    """``false`` passes ``--no-build-isolation`` (offline sdist builds)."""
    install_dependencies: bool = Field(default=True, alias="installDependencies")
    state_dir: str | None = Field(default=None, alias="stateDir")
    """Folder of ejected sources and locks (default: ``runtime.state_dir``)."""
    restart: bool = True
    """Restart the agent after install/eject/reinject (actions only)."""
    timeout_s: float = Field(default=600.0, gt=0, alias="timeoutS")
    """Budget of each pip/git command."""

    @field_validator("find_links", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value

    def pip_index_args(self) -> list[str]:
        """``--index-url``/``--find-links``/``--no-index`` arguments."""
        args: list[str] = []
        if self.no_index:
            args.append("--no-index")
        elif self.index_url:
            args += ["--index-url", self.index_url]
        for link in self.find_links:
            args += ["--find-links", link]
        return args

    @property
    def source_label(self) -> str:
        """What an install request says its source is."""
        if self.no_index and self.find_links:
            return self.find_links[0]
        return self.index_url or (self.find_links[0] if self.find_links else "pypi")


def plugin_settings(actions: Mapping[str, Any] | None) -> PluginSettings:
    """Validate ``actions.plugins``; raise :class:`ConfigError` naming ``actions.plugins.*``."""
    raw = (actions or {}).get("plugins") or {}
    try:
        return PluginSettings.model_validate(raw)
    except ValidationError as exc:
        issues = []
        for err in exc.errors():
            where = ".".join(str(p) for p in err["loc"])
            key = "actions.plugins" + (f".{where}" if where else "")
            problem = (
                "unknown setting; known: index_url, find_links, no_index, target, python, "
                "build_isolation, install_dependencies, state_dir, restart, timeout_s"
                if err["type"] == "extra_forbidden"
                else f"{err['msg']} (got {err.get('input')!r})"
            )
            issues.append((key, problem))
        raise ConfigError(issues) from None


def resolve_state_dir(host: PluginHost | None = None, explicit: str | Path | None = None) -> Path:
    """The plugin manager's folder: ``explicit``, ``actions.plugins.state_dir``, else the
    state folder by the rule every command follows
    (:func:`~agentplug.store.location.state_location`: ``$AGENTPLUG_STATE_DIR``,
    ``runtime.state_dir``, else ``.agentplug-state``)."""
    from agentplug.store.location import state_location

    if explicit is not None:
        return Path(explicit)
    config = host.config if host is not None else None
    if config is not None:
        configured = plugin_settings(config.actions).state_dir
        if configured:
            return Path(configured)
    folder = state_location(config, default_dir=DEFAULT_STATE_DIR).state_dir
    return folder if folder is not None else Path(DEFAULT_STATE_DIR)


class UpstreamRecord(BaseModel):
    """``.agentplug-upstream.json``: where an ejected copy came from."""

    plugin_id: str
    distribution: str
    version: str | None = None
    source_kind: Literal["git", "sdist"]
    url: str | None = None
    """Git URL or path (``git``), or the index/find-links the sdist came from (``sdist``)."""
    commit: str | None = None
    """Upstream commit at eject time (``git``), or the ``upstream`` import commit."""
    ref: str | None = None
    """Upstream branch followed by sync (``git``; ``None``: the remote's ``HEAD``)."""
    top_level: list[str] = Field(default_factory=list)
    import_roots: list[str] = Field(default_factory=lambda: ["."])
    """Folders (relative) to put on ``sys.path`` so the ejected copy is imported."""
    branch: str = LOCAL_BRANCH
    upstream_branch: str = UPSTREAM_BRANCH
    core: bool = False
    ejected_at: str = Field(default_factory=lambda: datetime.now(UTC).isoformat())
    last_sync: str | None = None


def plugins_root(state_dir: Path) -> Path:
    """``<state_dir>/plugins``: one ejected working copy per plugin id."""
    return Path(state_dir) / "plugins"


def core_root(state_dir: Path) -> Path:
    """``<state_dir>/core``: the ejected agentplug core, one folder per distribution."""
    return Path(state_dir) / "core"


def read_record(folder: Path) -> UpstreamRecord | None:
    """The upstream record of the working copy ``folder`` (``None``: none, or unreadable)."""
    try:
        return UpstreamRecord.model_validate_json((folder / RECORD_FILE).read_text("utf-8"))
    except (OSError, ValidationError):
        return None


def import_roots_of(folder: Path) -> list[Path]:
    """The import roots its record lists for the working copy ``folder`` (only folders
    inside it; ``[]`` when it has no record)."""
    record = read_record(folder)
    if record is None:
        return []
    roots = []
    for rel in record.import_roots or ["."]:
        path = (folder / rel).resolve()
        if path.is_dir() and path.is_relative_to(folder.resolve()):
            roots.append(path)
    return roots


def ejected_import_roots(state_dir: str | Path, plugin_id: str) -> list[Path]:
    """Folders to prepend to ``sys.path`` so ``plugin_id``'s ejected copy is imported
    (empty when it is not ejected)."""
    if not PLUGIN_ID_PATTERN.match(plugin_id):
        return []
    return import_roots_of(plugins_root(Path(state_dir)) / plugin_id)


def ejected_source(state_dir: str | Path, plugin_id: str) -> Path | None:
    """The import root of ``plugin_id``'s ejected copy (``P`` or ``P/src``), or ``None``."""
    roots = ejected_import_roots(state_dir, plugin_id)
    return roots[0] if roots else None


def activate_ejected_source(state_dir: str | Path, plugin_id: str) -> list[Path]:
    """Make the next import of ``plugin_id`` use its ejected copy, if any.

    Removes ``sys.path`` entries of an earlier activation of this plugin (a reinjected
    copy stops shadowing the installed package), prepends the current import roots, and
    invalidates the import caches. Idempotent and cheap when nothing is ejected. Returns
    the roots now on ``sys.path``. Call it before importing the plugin's entry point;
    modules already imported are not reloaded (see
    :func:`agentplug.actions.builtins.lifecycle.reload_changed_plugins`).
    """
    if not PLUGIN_ID_PATTERN.match(plugin_id):
        return []
    folder = plugins_root(Path(state_dir)) / plugin_id
    base = str(folder.resolve())
    stale = [p for p in sys.path if p == base or p.startswith(base + os.sep)]
    if not stale and not folder.is_dir():
        return []
    sys.path[:] = [p for p in sys.path if p not in stale]
    roots = ejected_import_roots(state_dir, plugin_id)
    for root in reversed(roots):
        sys.path.insert(0, str(root))
    importlib.invalidate_caches()
    return roots


def prefer_ejected_copy(host: PluginHost, plugin_id: str) -> list[Path]:
    """:func:`activate_ejected_source` for ``host``'s state folder; never raises (a bad
    ``actions.plugins`` config or an unreadable folder is logged and ignored)."""
    try:
        return activate_ejected_source(resolve_state_dir(host), plugin_id)
    except Exception as exc:
        log.warning("ejected copy of %s not considered: %s", plugin_id, exc)
        return []


def activate_install_target(host: PluginHost) -> Path | None:
    """Put ``actions.plugins.target`` (if set) on ``sys.path`` so plugins installed there
    are discovered; return it. Idempotent. Raises :class:`ConfigError` on a bad config."""
    target = plugin_settings(host.config.actions).target
    if not target:
        return None
    path = Path(target).resolve()
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))
        importlib.invalidate_caches()
    return path


def ejected_preference(host: PluginHost) -> Callable[[str], None]:
    """A per-plugin hook for the loader: prefer ejected copies, resolved once.

    Returns a no-op when the host's state folder has no ejected plugin and no earlier
    activation is on ``sys.path`` (the common start-up), so nothing is stat'ed per plugin.
    """
    try:
        state_dir = resolve_state_dir(host)
    except ConfigError as exc:
        log.warning("ejected copies not considered: %s", exc)
        return lambda plugin_id: None
    root = plugins_root(state_dir)
    base = str(root.resolve())
    if not root.is_dir() and not any(p.startswith(base + os.sep) for p in sys.path):
        return lambda plugin_id: None

    def prefer(plugin_id: str) -> None:
        try:
            activate_ejected_source(state_dir, plugin_id)
        except Exception as exc:
            log.warning("ejected copy of %s not considered: %s", plugin_id, exc)

    return prefer


class PluginSources:
    """Where the loader finds plugin code besides the environment (service ``plugin_sources``).

    ``prepare()`` runs before discovery: it puts ``actions.plugins.target`` on ``sys.path``
    and returns the per-plugin preference for ejected copies (see
    :func:`ejected_preference`).
    """

    def __init__(self, host: PluginHost) -> None:
        self.host = host

    def prepare(self) -> Callable[[str], None]:
        """Activate the install target; return the ejected-copy preference."""
        with contextlib.suppress(ConfigError):
            activate_install_target(self.host)
        return ejected_preference(self.host)
