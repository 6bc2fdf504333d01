"""The local control API: ``agentplug serve`` (optional extra ``api``).

The seed drives the host through local HTTP endpoints (``POST /api/terminal/run`` with the
output streamed over a WebSocket, ``POST /api/plugins/install``, custom-action CRUD); this
package serves them for one :class:`~agentplug.core.host.PluginHost`:

* :func:`create_app` (in :mod:`agentplug.api.app`) builds the Starlette application;
* :func:`add_serve_command` (in :mod:`agentplug.api.serve`) adds ``agentplug serve`` to a CLI.

The core package never needs the extra: this module and :mod:`agentplug.api.serve` import
without Starlette, and ``agentplug serve`` says which extra to install when it is missing.
The loopback rules shared by the server (bind address) and the application (``Host`` and
``Origin`` headers) live in :mod:`agentplug.api.loopback`. The same application serves the
control room, a page over the API (:mod:`agentplug.api.page`, its login in
:mod:`agentplug.api.logins`, its live feed in :mod:`agentplug.api.events`; docs/ui.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agentplug.api.extra import API_EXTRA, API_EXTRA_MODULES, missing_api_modules
from agentplug.api.loopback import host_header_is_loopback, is_loopback_name, origin_is_loopback

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


def __getattr__(name: str) -> Any:
    # Lazy: ``create_app`` needs Starlette, which the core package does not depend on.
    if name == "create_app":
        from agentplug.api.app import create_app

        return create_app
    if name == "add_serve_command":
        from agentplug.api.serve import add_serve_command

        return add_serve_command
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
