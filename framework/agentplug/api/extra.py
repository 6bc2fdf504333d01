"""The optional ``api`` extra: what it installs and how to tell whether it is there."""

from __future__ import annotations

__all__ = ["API_EXTRA", "API_EXTRA_MODULES", "missing_api_modules"]

API_EXTRA = "api"
"""The pyproject extra that installs the API stack: ``pip install 'agentplug[api]'``."""

API_EXTRA_MODULES = ("starlette", "uvicorn", "websockets")
"""Modules the extra provides (``websockets`` is uvicorn's WebSocket implementation)."""


def missing_api_modules() -> list[str]:
    """The modules of the ``api`` extra that cannot be imported (empty when installed)."""
    import importlib.util

    missing = []
    for name in API_EXTRA_MODULES:
        try:
            found = importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):  # a blocked or half-initialised module
            found = False
        if not found:
            missing.append(name)
    return missing
