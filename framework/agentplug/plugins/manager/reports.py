"""The manager's error and the reports its operations return."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from agentplug.core.errors import AgentplugError


class PluginManagerError(AgentplugError):
    """An operation cannot be done; the message says why and what to do."""


class UnknownPluginError(PluginManagerError):
    """No installed plugin has the id an operation was given."""


class InspectedDistribution(BaseModel):
    """One downloaded distribution and the decision of its install checks."""

    name: str
    version: str | None = None
    file: str
    requested: bool = False
    """The distribution asked for (``False``: a dependency)."""
    allowed: bool
    blocked_by: str | None = None
    reason: str | None = None
    findings: list[dict[str, Any]] = Field(default_factory=list)


class InstallReport(BaseModel):
    """What :meth:`PluginManager.install` did."""

    installed: bool
    name: str | None = None
    version: str | None = None
    file: str | None = None
    blocked_by: str | None = None
    reason: str | None = None
    findings: list[dict[str, Any]] = Field(default_factory=list)
    restart_required: bool = False
    blocked_distribution: str | None = None
    """Name of the distribution whose check blocked the install (the requested package or
    one of its dependencies)."""
    inspected: list[InspectedDistribution] = Field(default_factory=list)
    """Every distribution to be installed, checked in order (the requested package first,
    then its dependencies by name); a blocked install stops at the blocked one."""


class EjectReport(BaseModel):
    """What :meth:`PluginManager.eject` (or ``eject_core``) did."""

    plugin_id: str
    distribution: str
    version: str | None
    path: str
    branch: str
    source_kind: str
    url: str | None = None
    commit: str | None = None
    restart_required: bool = True


class SyncReport(BaseModel):
    """What :meth:`PluginManager.sync` did: commits merged, or the conflicting files."""

    plugin_id: str
    path: str
    merged: bool
    upstream_commits: int = 0
    """Upstream commits merged into the local branch (0: already up to date)."""
    conflicts: list[str] = Field(default_factory=list)
    committed_local_changes: bool = False
    """Uncommitted local edits were committed on the local branch before merging."""
    upstream_commit: str | None = None
    head: str | None = None
    message: str = ""


class ReinjectReport(BaseModel):
    """What :meth:`PluginManager.reinject` did."""

    plugin_id: str
    path: str
    removed: bool
    restart_required: bool = True


class EjectedPlugin(BaseModel):
    """One ejected working copy."""

    name: str
    branch: str | None
    path: str
    distribution: str | None = None
    version: str | None = None
    source_kind: str | None = None
    url: str | None = None
    head: str | None = None
    dirty: bool = False


class CoreStatus(BaseModel):
    """Where agentplug itself runs from."""

    distribution: str
    running_from: Literal["installed", "ejected"]
    version: str | None = None
    commit: str | None = None
    location: str | None = None
    """Folder of the imported package."""
    installed_version: str | None = None
    installed_commit: str | None = None
    ejected_path: str | None = None
    ejected_commit: str | None = None
    ejected_branch: str | None = None
    restart_required: bool = False
    """An ejected source exists but the running code is the installed package (or vice
    versa): restart the agent to switch."""
