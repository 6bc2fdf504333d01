"""The local control API: ``agentplug serve`` (optional extra ``api``).

The seed drives the host through local HTTP endpoints (``POST /api/terminal/run`` with the
output streamed over a WebSocket, ``POST /api/plugins/install``, custom-action CRUD); this
package serves them for one :class:`~agentplug.core.host.PluginHost`:

* :func:`create_app` (in :mod:`agentplug.api.app`) builds the Starlette application;
* :func:`add_serve_command` (in :mod:`agentplug.api.serve`) adds ``agentplug serve`` to a CLI.

The core package never needs the extra: this module and :mod:`agentplug.api.serve` import
without Starlette, and ``agentplug serve`` says which extra to install when it is missing.
The loopback rules shared by the server (bind address) and the application (``Host`` and
``Origin`` headers) live here.
"""

from __future__ import annotations

import ipaddress
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from agentplug.api.app import create_app
    from agentplug.api.serve import add_serve_command

__all__ = [
    "API_EXTRA",
    "API_EXTRA_MODULES",
    "add_serve_command",
    "create_app",
    "host_header_is_loopback",
    "is_loopback_name",
    "missing_api_modules",
    "origin_is_loopback",
]

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


def is_loopback_name(name: str) -> bool:
    """Whether ``name`` (no port, no brackets) is ``localhost`` or a loopback address."""
    name = name.strip().rstrip(".").lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def host_header_is_loopback(value: str | None) -> bool:
    """Whether an HTTP ``Host`` header names the loopback interface.

    Accepts ``localhost``, ``127.x.y.z`` and ``[::1]``, each with an optional port. Any
    other name is refused: a DNS name an attacker controls can be rebound to 127.0.0.1,
    but the browser still sends that name in ``Host`` (DNS-rebinding protection).
    """
    if not value:
        return False
    value = value.strip()
    if value.startswith("["):
        end = value.find("]")
        if end < 0:
            return False
        name, rest = value[1:end], value[end + 1 :]
        if rest and not (rest.startswith(":") and rest[1:].isdigit()):
            return False
        return ":" in name and is_loopback_name(name)
    name, _, port = value.partition(":")
    if port and not port.isdigit():
        return False
    return is_loopback_name(name)


def origin_is_loopback(value: str) -> bool:
    """Whether a browser ``Origin`` header is a page served from the loopback interface."""
    try:
        parts = urlsplit(value.strip())
    except ValueError:
        return False
    return parts.scheme in {"http", "https"} and is_loopback_name(parts.hostname or "")


def __getattr__(name: str) -> Any:
    # Lazy: ``create_app`` needs Starlette, which the core package does not depend on.
    if name == "create_app":
        from agentplug.api.app import create_app

        return create_app
    if name == "add_serve_command":
        from agentplug.api.serve import add_serve_command

        return add_serve_command
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
