"""exec-env: contribute operator-configured environment variables to ``exec`` calls.

``resolve_exec_env`` returns ``plugins.entries.exec-env.config.env`` (optionally only for the
``hosts`` listed). The plugin passes every key through on purpose: it is the *runtime's*
filter, applied after all plugins' contributions are merged, that drops ``PATH``, loader and
interpreter injection (``LD_*``, ``PYTHONPATH``...), proxy and TLS-override variables and
reports each one in ``outcome.dropped``. A plugin cannot opt out of that filter.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from agentplug import hookimpl
from agentplug_hookspecs.tools import ExecEnvEvent, ExecEnvResult

__all__ = ["EXEC_HOSTS", "PLUGIN_ID", "resolve_exec_env"]

PLUGIN_ID = "exec-env"
EXEC_HOSTS = frozenset({"gateway", "sandbox", "node"})
"""Where an ``exec`` call may run (``event.host``)."""

log = logging.getLogger(f"agentplug.plugin.{PLUGIN_ID}")


def _as_env_value(value: object) -> str | None:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | int | float):
        return str(value)
    return None


def _applies_to(config: Mapping[str, Any], host: str) -> bool:
    hosts = config.get("hosts")
    if hosts is None:
        return True
    if isinstance(hosts, str) or not isinstance(hosts, list):
        log.warning("config.hosts must be a list of %s; contributing nothing", sorted(EXEC_HOSTS))
        return False
    return host in hosts


@hookimpl
def resolve_exec_env(event: ExecEnvEvent) -> ExecEnvResult | None:
    """Contribute ``config.env`` (strings; numbers and booleans are converted)."""
    config = event.context.plugin_config
    raw = config.get("env", {})
    if not isinstance(raw, Mapping):
        log.warning("config.env must be an object of NAME: value; contributing nothing")
        return None
    if not raw or not _applies_to(config, event.host):
        return None
    env: dict[str, str] = {}
    for key, value in raw.items():
        text = _as_env_value(value)
        if text is None:
            # Name only: the value may be a secret.
            log.warning("config.env.%s is not a string, number or boolean; skipped", key)
            continue
        env[str(key)] = text
    return ExecEnvResult(env=env) if env else None
