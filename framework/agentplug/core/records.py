"""What the host records about plugins and the handlers they registered."""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel, Field

from agentplug.core.markers import HandlerOptions

__all__ = ["HandlerOwner", "PluginRecord"]


class PluginRecord(BaseModel):
    """What the host knows about one registered (or failed) plugin."""

    plugin_id: str
    """The stable key (entry-point name or the id given to ``register``)."""
    bundled: bool
    name: str | None = None
    """Display name: the plugin object's ``name``, else none (show the id)."""
    description: str | None = None
    """The plugin object's ``description``, else its distribution's summary."""
    distribution: str | None = None
    version: str | None = None
    source: str | None = None
    hooks: list[str] = Field(default_factory=list)
    refused_hooks: list[str] = Field(default_factory=list)
    """Hooks refused by a gate (conversation access, prompt injection)."""
    warnings: list[str] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    """What the plugin tells the operator it does beyond its hooks (``api.note``: a file
    it writes, a server it calls); ``agentplug chat``, ``plugins`` and ``doctor`` show them."""
    error: str | None = None


@dataclass(slots=True)
class HandlerOwner:
    """Which plugin owns one pluggy registration, with its options (``api.on``)."""

    plugin_id: str
    seq: int
    options: HandlerOptions | None
    is_async: bool | None = None
