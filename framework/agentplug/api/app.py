"""The local control API as a Starlette application: :func:`create_app`.

Why Starlette + uvicorn (the ``api`` extra): Starlette is a small, mature, fully typed ASGI
toolkit with first-class WebSockets and a test client, so the terminal stream, the JSON
endpoints and the auth guard stay a few hundred lines of plain code without a framework's
worth of dependencies. uvicorn (with ``websockets``) is the reference ASGI server, binds to
a socket we open ourselves (loopback only) and runs on the gateway's own event loop, so
handlers call the :class:`~agentplug.Gateway` directly.

Endpoints (JSON in and out; errors are ``{"error": "<what went wrong and what to do>"}``):

* ``GET /api/health``: ``{ok: true, version}`` (the only unauthenticated one);
* ``POST /api/terminal/run`` ``{command, cwd?, timeout_s?}``: ``{run_id}`` at once (202);
  ``WS /api/terminal/runs/{id}/stream`` streams ``{type: "output", data, seq}`` chunks and
  ends with ``{type: "exit", exit_code, truncated, timed_out}``;
  ``GET /api/terminal/runs/{id}`` is the run's status and, once finished, its result;
* ``GET /api/plugins``: the loaded plugins (id, display name, description, distribution,
  version, source, hooks; each handler's effective priority and timeout and where the
  timeout came from; warnings and overruns; load errors); ``GET /api/hooks``: the hook
  catalogue (kind, reduction, timeout, failure policy); ``POST /api/plugins/install``
  ``{spec}``: the plugin manager's report (403 when blocked);
* ``GET|POST /api/custom-actions``, ``GET|PUT|DELETE /api/custom-actions/{id}``: the
  config file's ``customActions``, registered live; ``POST /api/custom-actions/{id}/test``
  ``{params}``: ``{ok, output, duration_ms}`` (429 while ``MAX_ACTIVE_CODE_TESTS`` ``code``
  tests are running);
* ``GET /api/approvals``, ``POST /api/approvals/{id}`` ``{decision}``,
  ``GET /api/approvals/history``, ``GET /api/approvals/grants``,
  ``DELETE /api/approvals/grants/{id}``;
* ``GET /api/events``: server-sent events: ``approvals`` (the inbox, at once and after
  every change on any gateway sharing the store), ``turn_started``, ``turn_ended``
  (:mod:`agentplug.api.events`);
* ``GET /api/turns`` ``?session=&limit=``, ``GET /api/turns/{run_id}``: the latest turns
  with their traces;
* ``POST /api/sessions/{key}/messages`` ``{content, sender_id?, channel?}``: one turn
  through the gateway's runner (the inbound path of any channel); the ``TurnResult``;
  ``POST /api/sessions/{key}/messages/stream``: the same turn as server-sent events
  (:mod:`agentplug.api.routes.chat`);
* ``GET /api/sessions`` (rows with ``plugin_extensions`` and message counts),
  ``GET /api/sessions/{key}``, ``GET /api/sessions/{key}/transcript``,
  ``POST /api/sessions/{key}/reset``, ``PATCH /api/sessions/{key}/plugins/{plugin_id}``:
  a JSON merge patch ``{"<extension>": <patch>}`` of that plugin's extensions (403 for
  another plugin's extension, 404 for an unknown one, 413 past the size limits);
* ``POST /api/ui/login`` ``{token}``, ``POST /api/ui/logout``, ``GET /api/ui/session``:
  the control room's login cookie (:mod:`agentplug.api.logins`);
* ``GET /ui/``: the control room, a page over these endpoints (:mod:`agentplug.api.page`).

Every request must carry ``Authorization: Bearer <token>`` (WebSockets may pass
``?token=`` instead, since browsers cannot set headers on them) or the control room's
login cookie, which is honoured only on requests from the page's own origin; the token is
compared in constant time. Requests whose ``Host`` is not a loopback name are refused (DNS
rebinding), and so are browser requests from a non-loopback ``Origin``.

The terminal is the host's: every run goes through the host's
:class:`~agentplug.actions.builtins.comms.runs.TerminalRuns`, shared with ``SHELL_COMMAND``
and custom shell actions (the runtime service ``terminal`` when a host registered one, else
a local one rooted at ``actions.shell.cwd``, else the state directory); its output goes
through the ``terminal_output`` hub, and a ``SHELL_COMMAND`` run streams on the same
WebSocket as an API run. Nothing runs unless the operator set ``actions.shell.enabled:
true``; the allow-list, time limit, output bound and cap on active runs come from
``actions.shell``.

The guard lives in :mod:`agentplug.api.guard`, the handlers in :mod:`agentplug.api.routes`
(one mixin of :class:`ControlApi` per resource).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route, WebSocketRoute

from agentplug.actions.builtins.comms.runs import terminal_runs
from agentplug.actions.terminal import TerminalService
from agentplug.api.events import EventHub
from agentplug.api.guard import Guard
from agentplug.api.logins import Logins
from agentplug.api.page import Page
from agentplug.api.responses import error_response
from agentplug.api.routes.approvals import ApprovalRoutes
from agentplug.api.routes.base import MAX_BODY_BYTES as MAX_BODY_BYTES
from agentplug.api.routes.chat import ChatRoutes
from agentplug.api.routes.custom_actions import CUSTOM_ACTIONS_OWNER as CUSTOM_ACTIONS_OWNER
from agentplug.api.routes.custom_actions import MAX_ACTIVE_CODE_TESTS as MAX_ACTIVE_CODE_TESTS
from agentplug.api.routes.custom_actions import CustomActionRoutes
from agentplug.api.routes.plugins import PluginRoutes
from agentplug.api.routes.sessions import MAX_PATCH_BODY_BYTES as MAX_PATCH_BODY_BYTES
from agentplug.api.routes.terminal import MAX_ACTIVE_RUNS as MAX_ACTIVE_RUNS
from agentplug.api.routes.terminal import MAX_KEPT_RUNS as MAX_KEPT_RUNS
from agentplug.api.routes.terminal import MAX_TIMEOUT_S as MAX_TIMEOUT_S
from agentplug.api.routes.terminal import TERMINAL_SERVICE as TERMINAL_SERVICE
from agentplug.api.routes.terminal import HostTerminal, TerminalRoutes
from agentplug.api.routes.turns import TurnRoutes
from agentplug.core.redaction import register_secret

if TYPE_CHECKING:
    from agentplug.gateway import Gateway

__all__ = ["ControlApi", "HostTerminal", "create_app"]

log = logging.getLogger("agentplug.api")


class ControlApi(
    TerminalRoutes, PluginRoutes, CustomActionRoutes, ApprovalRoutes, ChatRoutes, TurnRoutes
):
    """State and handlers of the control API for one gateway (``app.state.api``)."""

    def __init__(
        self,
        gateway: Gateway,
        *,
        state_dir: Path,
        config_path: Path | None,
        terminal: TerminalService | None,
        plugin_manager: Any,
    ) -> None:
        self.gateway = gateway
        self.host = gateway.host
        self.state_dir = state_dir
        self.config_path = config_path
        self.terminal_runs = terminal_runs(
            gateway.actions, default_cwd=state_dir, terminal=terminal
        )
        if terminal is not None:
            self.terminal_runs.terminal = terminal
        self.terminal: TerminalService = self.terminal_runs.terminal
        self._plugin_manager = plugin_manager
        self._config_lock = asyncio.Lock()
        self._chat_tasks = set()
        self.events = EventHub(gateway)
        """The live feed (``GET /api/events``)."""

    # -- health ------------------------------------------------------------------------

    async def health(self, request: Request) -> Response:
        from agentplug import __version__

        return JSONResponse({"ok": True, "version": __version__})

    async def aclose(self) -> None:
        """End the event streams and streamed turns, then the terminal runs."""
        await self.events.aclose()
        await self.aclose_chats()
        await super().aclose()


# ---------------------------------------------------------------------------
# The application


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    response = error_response(exc.status_code, str(exc.detail))
    response.headers.update(exc.headers or {})
    return response


async def _server_error(request: Request, exc: Exception) -> Response:
    log.exception("API request %s %s failed", request.method, request.url.path)
    return error_response(500, f"internal error ({type(exc).__name__}); see the server log")


def create_app(
    gateway: Gateway,
    *,
    token: str,
    state_dir: str | os.PathLike[str] | None = None,
    config_path: str | os.PathLike[str] | None = None,
    terminal: TerminalService | None = None,
    plugin_manager: Any = None,
    approvals_by: str = "api",
) -> Starlette:
    """The control API for ``gateway`` (see the module docstring for the endpoints).

    ``token`` is the bearer token every request but ``/api/health`` must present.
    ``state_dir`` (default: the gateway's, else ``.agentplug-state``) roots the default
    terminal unless ``actions.shell.cwd`` is set. ``config_path`` is the JSON config whose
    ``customActions`` the CRUD endpoints edit (without it they only list the gateway's
    config). ``terminal`` replaces the terminal lookup (default: runtime service
    ``terminal``, else a local one); ``plugin_manager`` replaces the gateway's. Approvals
    are resolved through the gateway's :class:`ApprovalBroker` (its resolver must be a
    :class:`~agentplug.services.approvals.ProgrammaticResolver`) and recorded as decided
    by ``approvals_by`` (``api``; ``agentplug mcp-proxy`` says ``mcp``).
    """
    if not isinstance(token, str) or len(token) < 16:
        raise ValueError("the API token must be a string of at least 16 characters")
    register_secret(token)
    root = state_dir if state_dir is not None else gateway.state_dir or ".agentplug-state"
    api = ControlApi(
        gateway,
        state_dir=Path(root),
        config_path=Path(config_path) if config_path is not None else None,
        terminal=terminal,
        plugin_manager=plugin_manager,
    )
    api.approvals_by = approvals_by
    logins = Logins(token)
    page = Page()

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await api.aclose()

    routes = [
        Route("/api/health", api.health, methods=["GET"]),
        Route("/api/terminal/run", api.terminal_run, methods=["POST"]),
        Route("/api/terminal/runs/{run_id}", api.terminal_status, methods=["GET"]),
        WebSocketRoute("/api/terminal/runs/{run_id}/stream", api.terminal_stream),
        Route("/api/plugins", api.plugins_list, methods=["GET"]),
        Route("/api/plugins/install", api.plugins_install, methods=["POST"]),
        Route("/api/custom-actions", api.actions_list, methods=["GET"]),
        Route("/api/custom-actions", api.actions_create, methods=["POST"]),
        Route("/api/custom-actions/{action_id}", api.actions_get, methods=["GET"]),
        Route("/api/custom-actions/{action_id}", api.actions_update, methods=["PUT"]),
        Route("/api/custom-actions/{action_id}", api.actions_delete, methods=["DELETE"]),
        Route("/api/custom-actions/{action_id}/test", api.actions_test, methods=["POST"]),
        Route("/api/hooks", api.hooks_list, methods=["GET"]),
        Route("/api/events", api.events.stream, methods=["GET"]),
        Route("/api/turns", api.turns_list, methods=["GET"]),
        Route("/api/turns/{run_id}", api.turns_get, methods=["GET"]),
        Route("/api/approvals", api.approvals_list, methods=["GET"]),
        Route("/api/approvals/history", api.approvals_history, methods=["GET"]),
        Route("/api/approvals/grants", api.grants_list, methods=["GET"]),
        Route("/api/approvals/grants/{grant_id}", api.grants_revoke, methods=["DELETE"]),
        Route("/api/approvals/{approval_id}", api.approvals_resolve, methods=["POST"]),
        Route("/api/sessions", api.sessions_list, methods=["GET"]),
        Route(
            "/api/sessions/{session_key:path}/plugins/{plugin_id}",
            api.sessions_patch_plugin,
            methods=["PATCH"],
        ),
        Route(
            "/api/sessions/{session_key:path}/messages/stream",
            api.sessions_stream_message,
            methods=["POST"],
        ),
        Route(
            "/api/sessions/{session_key:path}/messages",
            api.sessions_post_message,
            methods=["POST"],
        ),
        Route(
            "/api/sessions/{session_key:path}/transcript",
            api.sessions_transcript,
            methods=["GET"],
        ),
        Route("/api/sessions/{session_key:path}/reset", api.sessions_reset, methods=["POST"]),
        Route("/api/sessions/{session_key:path}", api.sessions_get, methods=["GET"]),
        Route("/api/ui/login", logins.login, methods=["POST"]),
        Route("/api/ui/logout", logins.logout, methods=["POST"]),
        Route("/api/ui/session", logins.whoami, methods=["GET"]),
        Route("/ui", page.redirect, methods=["GET"]),
        Route("/ui/", page.file, methods=["GET"]),
        Route("/ui/{name}", page.file, methods=["GET"]),
    ]
    app = Starlette(
        routes=routes,
        exception_handlers={HTTPException: _http_error, Exception: _server_error},
        lifespan=lifespan,
    )
    app.add_middleware(Guard, token=token, logins=logins)
    app.state.api = api
    return app
