"""Plugins and hooks (:class:`PluginRoutes`).

``GET /api/plugins``: the loaded plugins (id, display name, description, distribution,
version, source, hooks) and the ones that failed to load (their error); each row's
``handlers`` give every handler's effective priority, timeout, where that timeout came
from (``default``, ``plugin``, ``config``...) and the gate that refused it, if any; its
``warnings`` include handler overruns. ``GET /api/hooks``: the hook catalogue (each
declared hook's group, kind, reduction, default timeout and failure policy, as
``agentplug hooks --json``). ``POST /api/plugins/install``: the plugin manager's report.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from agentplug.api.responses import error_response, jsonable
from agentplug.api.routes.base import ApiBase
from agentplug.core.catalogue import hook_summary, plugin_rows
from agentplug.core.errors import AgentplugError


class PluginRoutes(ApiBase):
    """The plugin endpoints of :class:`~agentplug.api.app.ControlApi`."""

    _plugin_manager: Any

    def _manager(self) -> Any:
        """The gateway's plugin manager (the one ``INSTALL_PLUGIN`` uses), unless the API
        was given another."""
        if self._plugin_manager is None:
            self._plugin_manager = self.gateway.plugin_manager
        return self._plugin_manager

    async def plugins_list(self, request: Request) -> Response:
        """Every registered plugin, then every plugin that failed to load; the id is the
        stable key, ``name``/``description`` are for display (``null`` when not given)."""
        registered = plugin_rows(self.host)[: len(self.host.plugins)]
        detail = {row["plugin_id"]: row for row in registered}
        rows = []
        for record in [*self.host.plugins, *self.host.failed_plugins]:
            found = detail.get(record.plugin_id, {})
            rows.append(
                {
                    "plugin_id": record.plugin_id,
                    "name": record.name,
                    "description": record.description,
                    "bundled": record.bundled,
                    "distribution": record.distribution,
                    "version": record.version,
                    "source": record.source,
                    "hooks": list(record.hooks),
                    "refused_hooks": list(record.refused_hooks),
                    "handlers": found.get("hooks", []) if not record.error else [],
                    "warnings": found.get("warnings", list(record.warnings)),
                    "error": record.error,
                }
            )
        return JSONResponse({"plugins": rows})

    async def hooks_list(self, request: Request) -> Response:
        """The hook catalogue (``agentplug hooks --json``)."""
        return JSONResponse({"hooks": [hook_summary(d) for d in self.host.declarations.values()]})

    async def plugins_install(self, request: Request) -> Response:
        body = await self._body(request)
        spec = body.get("spec")
        if not isinstance(spec, str) or not spec.strip():
            return error_response(
                400, "'spec' must be a non-empty requirement, e.g. 'my-plugin>=1'"
            )
        try:
            result = await self._manager().install(spec.strip(), requested_by="api")
        except AgentplugError as exc:  # bad spec, settings, download or pip failure
            return error_response(400, f"cannot install {spec.strip()!r}: {exc}")
        payload = jsonable(result)
        reason = _blocked_reason(result)
        if reason is not None:
            return error_response(403, reason, result=payload)
        return JSONResponse(payload)


def _blocked_reason(result: Any) -> str | None:
    """The block reason of an install report, or ``None`` when the install was not blocked."""
    blocked_by = getattr(result, "blocked_by", None)
    if blocked_by is None and isinstance(result, Mapping):
        blocked_by = result.get("blocked_by")
    if not blocked_by:
        return None
    reason = getattr(result, "reason", None)
    if reason is None and isinstance(result, Mapping):
        reason = result.get("reason")
    return f"install blocked by {blocked_by}: {reason or 'no reason given'}"
