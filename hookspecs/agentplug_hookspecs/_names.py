"""Names shared by the contract and the runtime (importing this module loads nothing else)."""

from __future__ import annotations

__all__ = ["PROJECT_NAME"]

PROJECT_NAME = "agentplug"
"""The pluggy project name: markers, entry-point group and attribute prefix."""
