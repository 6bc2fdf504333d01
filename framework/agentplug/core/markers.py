"""The ``@hookimpl`` marker plugin authors use.

Defined in the contract (:mod:`agentplug_hookspecs._markers`, public as
``agentplug_hookspecs.hookimpl``) so that a plugin needs only ``agentplug-hookspecs`` to
mark its handlers; re-exported here (the same objects) for the runtime and for plugins
that import ``agentplug.hookimpl``.
"""

from __future__ import annotations

from agentplug_hookspecs._markers import (
    MAX_TIMEOUT_MS,
    OPTIONS_ATTR,
    HandlerOptions,
    check_timeout_ms,
    hookimpl,
    options_of,
)

__all__ = [
    "MAX_TIMEOUT_MS",
    "OPTIONS_ATTR",
    "HandlerOptions",
    "check_timeout_ms",
    "hookimpl",
    "options_of",
]
