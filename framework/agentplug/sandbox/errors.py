"""The error the sandbox raises when it cannot run code at all."""

from __future__ import annotations


class SandboxUnavailableError(RuntimeError):
    """The sandbox cannot run code (worker failed to start, missing runtime, strict mode)."""
