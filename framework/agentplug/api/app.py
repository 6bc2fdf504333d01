"""The local control API as a Starlette application: :func:`create_app`.

Why Starlette + uvicorn (the ``api`` extra): Starlette is a small, mature, fully typed ASGI
toolkit with first-class WebSockets and a test client, so the terminal stream, the JSON
endpoints and the auth guard stay a few hundred lines of plain code without a framework's
worth of dependencies. uvicorn (with ``websockets``) is the reference ASGI server, binds to
a socket we open ourselves (loopback only) and runs on the host's own event loop, so
handlers call the :class:`~agentplug.core.host.PluginHost` directly.

Endpoints (JSON in and out; errors are ``{"error": "<what went wrong and what to do>"}``):

* ``GET /api/health``: ``{ok: true, version}`` (the only unauthenticated one);
* ``POST /api/terminal/run`` ``{command, cwd?, timeout_s?}``: ``{run_id}`` at once (202);
  ``WS /api/terminal/runs/{id}/stream`` streams ``{type: "output", data, seq}`` chunks and
  ends with ``{type: "exit", exit_code, truncated, timed_out}``;
  ``GET /api/terminal/runs/{id}`` is the run's status and, once finished, its result;
* ``POST /api/plugins/install`` ``{spec}``: the plugin manager's report (403 when blocked);
* ``GET|POST /api/custom-actions``, ``GET|PUT|DELETE /api/custom-actions/{id}``: the
  config file's ``customActions``, registered live; ``POST /api/custom-actions/{id}/test``
  ``{params}``: ``{ok, output, duration_ms}``;
* ``GET /api/approvals``, ``POST /api/approvals/{id}`` ``{decision}``,
  ``GET /api/approvals/grants``, ``DELETE /api/approvals/grants/{id}``.

Every request must carry ``Authorization: Bearer <token>`` (WebSockets may pass
``?token=`` instead, since browsers cannot set headers on them); the token is compared in
constant time. Requests whose ``Host`` is not a loopback name are refused (DNS rebinding),
and so are browser requests from a non-loopback ``Origin``.

The terminal is the host's: the runtime service ``terminal`` when a host registered one (the
service ``SHELL_COMMAND`` uses), else a local one rooted at ``actions.shell.cwd`` (else the
state directory); its output goes through the ``terminal_output`` hub, so other subscribers
see API runs too. Like ``SHELL_COMMAND`` it runs nothing unless the operator set
``actions.shell.enabled: true``; time limit and output bound come from ``actions.shell``.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import logging
import os
import re
import secrets
import stat
import tempfile
import time
import uuid
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from pydantic import BaseModel, ValidationError
from starlette.applications import Starlette
from starlette.datastructures import Headers, QueryParams
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route, WebSocketRoute
from starlette.types import ASGIApp, Receive, Scope, Send
from starlette.websockets import WebSocket, WebSocketDisconnect

from agentplug.actions.custom import (
    CONFIG_KEY,
    CustomActionDef,
    CustomActionServices,
    build_test_handler,
    register_custom_action_live,
)
from agentplug.actions.model import Action
from agentplug.actions.registry import ActionConflictError, normalize_action_name
from agentplug.actions.runtime import operator_ssrf_policy
from agentplug.actions.terminal import LocalTerminalService, TerminalResult, TerminalService
from agentplug.api.loopback import host_header_is_loopback, origin_is_loopback
from agentplug.core.errors import AgentplugError
from agentplug.services.approvals import ApprovalBroker, ProgrammaticResolver, parse_decision

if TYPE_CHECKING:
    from agentplug.actions.builtins.comms import OutputHub, ShellSettings
    from agentplug.core.host import PluginHost

__all__ = ["APPROVALS_SERVICE", "ControlApi", "HostTerminal", "create_app"]

log = logging.getLogger("agentplug.api")

APPROVALS_SERVICE = "approvals"
"""Runtime service name of the :class:`ApprovalBroker` the API resolves approvals through."""
TERMINAL_SERVICE = "terminal"
"""Runtime service name of a host-provided terminal (the one ``SHELL_COMMAND`` uses)."""
CUSTOM_ACTIONS_OWNER = "custom-actions"
"""Registry owner of config custom actions (the one ``AgentRuntime.load`` uses)."""
PLUGIN_MANAGER_SERVICE = "plugin_manager"

MAX_BODY_BYTES = 1024 * 1024
MAX_ACTIVE_RUNS = 8
MAX_KEPT_RUNS = 128
MAX_TIMEOUT_S = 24 * 3600.0
_PUBLIC_PATHS = frozenset({"/api/health"})


def _error(status: int, message: str, **extra: Any) -> JSONResponse:
    return JSONResponse({"error": message, **extra}, status_code=status)


def _now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _jsonable(value: Any) -> Any:
    """A JSON-compatible copy of a model, dataclass, mapping or plain value."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if hasattr(value, "__dataclass_fields__") and not isinstance(value, type):
        import dataclasses

        return _jsonable(dataclasses.asdict(value))
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_jsonable(v) for v in value]
    if value is None or isinstance(value, str | int | float | bool):
        return value
    if isinstance(value, Path):
        return str(value)
    return repr(value)


# ---------------------------------------------------------------------------
# The guard: loopback Host/Origin and the bearer token, for HTTP and WebSocket alike


class _Guard:
    """ASGI middleware: loopback ``Host``/``Origin`` first, then the bearer token."""

    def __init__(self, app: ASGIApp, *, token: str) -> None:
        self.app = app
        self._token = token.encode("utf-8")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        host = headers.get("host")
        if not host_header_is_loopback(host):
            await _deny(
                scope,
                receive,
                send,
                403,
                f"Host header {host!r} is not a loopback name; this API answers only to "
                "localhost, 127.0.0.1 or [::1] (DNS-rebinding protection)",
            )
            return
        origin = headers.get("origin")
        if origin is not None and not origin_is_loopback(origin):
            await _deny(
                scope,
                receive,
                send,
                403,
                f"requests from origin {origin!r} are refused; only pages served from the "
                "loopback interface may call this API",
            )
            return
        if scope["path"] not in _PUBLIC_PATHS and not self._authorized(scope, headers):
            await _deny(
                scope,
                receive,
                send,
                401,
                "missing or wrong API token: send 'Authorization: Bearer <token>' (WebSockets "
                "may use ?token=<token>); the token is in <state_dir>/api-token",
            )
            return
        await self.app(scope, receive, send)

    def _authorized(self, scope: Scope, headers: Headers) -> bool:
        presented: str | None = None
        scheme, _, credentials = headers.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer" and credentials.strip():
            presented = credentials.strip()
        elif scope["type"] == "websocket":
            presented = QueryParams(scope.get("query_string", b"").decode("latin-1")).get("token")
        if not presented:
            return False
        return hmac.compare_digest(presented.encode("utf-8"), self._token)


async def _deny(scope: Scope, receive: Receive, send: Send, status: int, message: str) -> None:
    response = _error(status, message)
    if scope["type"] == "http":
        if status == 401:
            response.headers["WWW-Authenticate"] = "Bearer"
        await response(scope, receive, send)
        return
    websocket = WebSocket(scope, receive, send)
    if "websocket.http.response" in scope.get("extensions", {}):
        await websocket.send_denial_response(response)
    else:  # no denial-response support: close the handshake (clients see HTTP 403)
        await websocket.close(code=1008, reason=message[:120])


# ---------------------------------------------------------------------------
# Terminal


class HostTerminal:
    """The host's terminal service, looked up at each run.

    The runtime service ``terminal`` (a host replacement, the one ``SHELL_COMMAND`` uses)
    when registered; otherwise a :class:`LocalTerminalService` rooted at the operator's
    ``actions.shell.cwd``, else ``default_cwd``.
    """

    def __init__(self, host: PluginHost, default_cwd: str | os.PathLike[str]) -> None:
        self.host = host
        self.default_cwd = Path(default_cwd)

    def resolve(self) -> TerminalService:
        """The service the next run goes through (``FileNotFoundError`` for a missing cwd)."""
        service = self.host.actions.get_service(TERMINAL_SERVICE)
        if service is not None and callable(getattr(service, "run", None)):
            return cast("TerminalService", service)
        configured = _shell_settings(self.host).cwd
        return LocalTerminalService(Path(configured) if configured else self.default_cwd)

    async def run(
        self,
        command: str,
        *,
        cwd: str | None,
        timeout_s: float,
        max_output_bytes: int,
        on_output: Callable[[str], None] | None = None,
    ) -> TerminalResult:
        """Run ``command`` through :meth:`resolve`'s service."""
        return await self.resolve().run(
            command,
            cwd=cwd,
            timeout_s=timeout_s,
            max_output_bytes=max_output_bytes,
            on_output=on_output,
        )


def _shell_settings(host: PluginHost) -> ShellSettings:
    from agentplug.actions.builtins.comms import ShellSettings, load_settings

    return load_settings(host.config.actions, "shell", ShellSettings)


@dataclass
class _Run:
    run_id: str
    command: str
    cwd: str | None
    timeout_s: float
    started_at: float = field(default_factory=time.time)
    result: TerminalResult | None = None
    error: str | None = None
    task: asyncio.Task[None] | None = None

    @property
    def finished(self) -> bool:
        return self.result is not None or self.error is not None

    def exit_message(self) -> dict[str, Any]:
        result = self.result
        return {
            "type": "exit",
            "run_id": self.run_id,
            "exit_code": result.exit_code if result else None,
            "truncated": result.truncated if result else False,
            "timed_out": result.timed_out if result else False,
            "duration_ms": round(result.duration_ms, 3) if result else None,
            "error": self.error,
        }

    def to_json(self) -> dict[str, Any]:
        result = self.result
        status = "running"
        if self.error is not None:
            status = "failed"
        elif result is not None:
            status = "timed_out" if result.timed_out else "exited"
        return {
            "run_id": self.run_id,
            "command": self.command,
            "cwd": self.cwd,
            "timeout_s": self.timeout_s,
            "started_at": self.started_at,
            "status": status,
            "exit_code": result.exit_code if result else None,
            "output": result.output if result else None,
            "truncated": result.truncated if result else False,
            "timed_out": result.timed_out if result else False,
            "duration_ms": round(result.duration_ms, 3) if result else None,
            "error": self.error,
        }


# ---------------------------------------------------------------------------
# The API


class ControlApi:
    """State and handlers of the control API for one host (``app.state.api``)."""

    def __init__(
        self,
        host: PluginHost,
        *,
        state_dir: Path,
        config_path: Path | None,
        terminal: TerminalService | None,
        plugin_manager: Any,
    ) -> None:
        self.host = host
        self.state_dir = state_dir
        self.config_path = config_path
        self.terminal: TerminalService = terminal or HostTerminal(host, state_dir)
        self._plugin_manager = plugin_manager
        self.runs: OrderedDict[str, _Run] = OrderedDict()
        self._config_lock = asyncio.Lock()

    # -- shared helpers ----------------------------------------------------------------

    @staticmethod
    async def _body(request: Request) -> dict[str, Any]:
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > MAX_BODY_BYTES:
            raise HTTPException(413, f"request body larger than {MAX_BODY_BYTES} bytes")
        raw = await request.body()
        if len(raw) > MAX_BODY_BYTES:
            raise HTTPException(413, f"request body larger than {MAX_BODY_BYTES} bytes")
        if not raw.strip():
            return {}
        try:
            data = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise HTTPException(400, f"request body is not valid JSON: {exc}") from None
        if not isinstance(data, dict):
            raise HTTPException(
                400, f"request body must be a JSON object, got {type(data).__name__}"
            )
        return data

    def _hub(self) -> OutputHub:
        from agentplug.actions.builtins.comms import output_hub

        return output_hub(self.host.actions)

    # -- health ------------------------------------------------------------------------

    async def health(self, request: Request) -> Response:
        from agentplug import __version__

        return JSONResponse({"ok": True, "version": __version__})

    # -- terminal ----------------------------------------------------------------------

    async def terminal_run(self, request: Request) -> Response:
        body = await self._body(request)
        command = body.get("command")
        if not isinstance(command, str) or not command.strip():
            return _error(400, "'command' must be a non-empty string (the shell command line)")
        if "\x00" in command:
            return _error(400, "'command' contains a NUL byte")
        cwd = body.get("cwd")
        if cwd is not None and not isinstance(cwd, str):
            return _error(
                400, "'cwd' must be a string relative to the terminal's working directory"
            )
        try:
            settings = _shell_settings(self.host)
        except AgentplugError as exc:
            return _error(500, f"invalid terminal settings: {exc}")
        if not settings.enabled:
            return _error(
                403,
                "the terminal is off: shell commands run only when the operator sets "
                "actions.shell.enabled to true in the config (it also enables SHELL_COMMAND)",
            )
        timeout = body.get("timeout_s", settings.timeout_seconds)
        if (
            isinstance(timeout, bool)
            or not isinstance(timeout, int | float)
            or not 0 < timeout <= MAX_TIMEOUT_S
        ):
            return _error(400, f"'timeout_s' must be a number of seconds in (0, {MAX_TIMEOUT_S:g}]")
        active = sum(1 for run in self.runs.values() if not run.finished)
        if active >= MAX_ACTIVE_RUNS:
            return _error(429, f"{active} terminal runs are still running; wait for one to finish")
        problem = self._check_cwd(cwd)
        if problem is not None:
            return _error(400, problem)
        run = _Run(uuid.uuid4().hex, command, cwd, float(timeout))
        hub = self._hub()
        hub.start(run.run_id, command)  # before returning the id: a subscriber misses nothing
        self.runs[run.run_id] = run
        self._forget_old_runs()
        run.task = asyncio.get_running_loop().create_task(
            self._execute(run, hub, settings.max_output_bytes)
        )
        return JSONResponse({"run_id": run.run_id}, status_code=202)

    def _check_cwd(self, cwd: str | None) -> str | None:
        try:
            service = self.terminal.resolve() if isinstance(self.terminal, HostTerminal) else None
        except (FileNotFoundError, AgentplugError) as exc:
            return f"{exc} (set actions.shell.cwd in the config)"
        if cwd is None or not isinstance(service, LocalTerminalService):
            return None
        root = service.working_dir
        target = (root / cwd).resolve()
        if not target.is_relative_to(root):
            return f"cwd {cwd!r} is outside the terminal's working directory {str(root)!r}"
        if not target.is_dir():
            return f"cwd {cwd!r} does not exist under {str(root)!r}"
        return None

    async def _execute(self, run: _Run, hub: OutputHub, max_output_bytes: int) -> None:
        try:
            result = await self.terminal.run(
                run.command,
                cwd=run.cwd,
                timeout_s=run.timeout_s,
                max_output_bytes=max_output_bytes,
                on_output=lambda text: hub.publish(run.run_id, text),
            )
            if not isinstance(result, TerminalResult):
                result = TerminalResult.model_validate(result, from_attributes=True)
            run.result = result
            hub.finish(run.run_id, result.exit_code)
        except asyncio.CancelledError:
            run.error = "cancelled: the API server is shutting down"
            hub.finish(run.run_id, None, error=run.error)
            raise
        except Exception as exc:  # the terminal refused or crashed: report, close the stream
            run.error = f"{type(exc).__name__}: {exc}"
            hub.finish(run.run_id, None, error=run.error)
            log.warning("terminal run %s failed: %s", run.run_id, run.error)

    def _forget_old_runs(self) -> None:
        excess = len(self.runs) - MAX_KEPT_RUNS
        for run_id in [k for k, r in self.runs.items() if r.finished][: max(0, excess)]:
            del self.runs[run_id]

    async def terminal_status(self, request: Request) -> Response:
        run = self.runs.get(request.path_params["run_id"])
        if run is None:
            return _error(404, f"no terminal run {request.path_params['run_id']!r}")
        return JSONResponse(run.to_json())

    async def terminal_stream(self, websocket: WebSocket) -> None:
        run_id = websocket.path_params["run_id"]
        run = self.runs.get(run_id)
        if run is None:
            await _deny(
                websocket.scope,
                websocket.receive,
                websocket.send,
                404,
                f"no terminal run {run_id!r}",
            )
            return
        await websocket.accept()
        try:
            async for message in self._messages(run):
                await websocket.send_json(message)
            await websocket.close(code=1000)
        except (WebSocketDisconnect, RuntimeError, OSError):  # the client went away
            return

    async def _messages(self, run: _Run) -> AsyncIterator[dict[str, Any]]:
        hub = self._hub()
        if hub.status(run.run_id) is None:
            # The hub forgot this (old, finished) run: replay the bounded result instead.
            if run.result is not None and run.result.output:
                yield {"type": "output", "run_id": run.run_id, "seq": 0, "data": run.result.output}
        else:
            async for chunk in hub.subscribe(run.run_id):
                yield {"type": "output", "run_id": run.run_id, "seq": chunk.seq, "data": chunk.text}
        if run.task is not None and not run.finished:
            # The hub closed the stream; the task records the result just before that.
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.shield(run.task)
        yield run.exit_message()

    async def aclose(self) -> None:
        """Cancel terminal runs still running (their process groups are killed)."""
        tasks = [r.task for r in self.runs.values() if r.task is not None and not r.task.done()]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)

    # -- plugins -----------------------------------------------------------------------

    def _manager(self) -> Any:
        """The runtime's ``plugin_manager`` service; created (rooted at the API's state
        directory) and registered when absent, so ``INSTALL_PLUGIN`` shares it."""
        if self._plugin_manager is None:
            service = self.host.actions.get_service(PLUGIN_MANAGER_SERVICE)
            if service is None:
                from agentplug.plugins.manager import PluginManager

                service = PluginManager(self.host, self.state_dir)
                self.host.actions.register_service(PLUGIN_MANAGER_SERVICE, service)
            self._plugin_manager = service
        return self._plugin_manager

    async def plugins_install(self, request: Request) -> Response:
        body = await self._body(request)
        spec = body.get("spec")
        if not isinstance(spec, str) or not spec.strip():
            return _error(400, "'spec' must be a non-empty requirement, e.g. 'my-plugin>=1'")
        try:
            result = await self._manager().install(spec.strip(), requested_by="api")
        except AgentplugError as exc:  # bad spec, settings, download or pip failure
            return _error(400, f"cannot install {spec.strip()!r}: {exc}")
        payload = _jsonable(result)
        reason = _blocked_reason(result)
        if reason is not None:
            return _error(403, reason, result=payload)
        return JSONResponse(payload)

    # -- custom actions ----------------------------------------------------------------

    def _read_config_file(self) -> dict[str, Any]:
        path = self.config_path
        if path is None:
            raise HTTPException(
                409,
                "no config file: start `agentplug serve --config FILE` to create and edit "
                "custom actions",
            )
        try:
            data = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise HTTPException(500, f"cannot read config file {str(path)!r}: {exc}") from None
        if not isinstance(data, dict):
            raise HTTPException(500, f"config file {str(path)!r} must hold a JSON object")
        entries = data.get(CONFIG_KEY)
        if entries is None:
            data[CONFIG_KEY] = []
        elif not isinstance(entries, list):
            raise HTTPException(
                500, f"{CONFIG_KEY!r} in {str(path)!r} must be an array; fix the file first"
            )
        return data

    def _entries(self) -> list[Any]:
        if self.config_path is None:
            return list(self.host.config.custom_actions)
        entries: list[Any] = self._read_config_file()[CONFIG_KEY]
        return entries

    def _write_config_file(self, data: dict[str, Any]) -> None:
        assert self.config_path is not None
        _write_json_atomic(self.config_path, data)
        # Keep the host's view in step so a later ``actions.load()`` sees the same list.
        self.host.config = self.host.config.model_copy(
            update={"custom_actions": list(data[CONFIG_KEY])}
        )

    @staticmethod
    def _find(entries: list[Any], action_id: str) -> int | None:
        for index, entry in enumerate(entries):
            if isinstance(entry, Mapping) and entry.get("id") == action_id:
                return index
        return None

    @staticmethod
    def _validate(raw: Mapping[str, Any]) -> CustomActionDef:
        try:
            return CustomActionDef.model_validate(raw)
        except ValidationError as exc:
            details = [
                {"field": ".".join(str(p) for p in e["loc"]) or "(entry)", "message": e["msg"]}
                for e in exc.errors()
            ]
            summary = "; ".join(f"{d['field']}: {d['message']}" for d in details)
            raise HTTPException(422, f"invalid custom action: {summary}") from None

    @staticmethod
    def _dump(defn: CustomActionDef) -> dict[str, Any]:
        return defn.model_dump(mode="json", by_alias=True, exclude_none=True)

    @staticmethod
    def _name_clash(entries: list[Any], defn: CustomActionDef, skip: int | None) -> str | None:
        key = normalize_action_name(defn.name)
        for index, entry in enumerate(entries):
            if index == skip or not isinstance(entry, Mapping):
                continue
            name = entry.get("name")
            if isinstance(name, str) and normalize_action_name(name) == key:
                return f"custom action {entry.get('id')!r} is already called {name!r}"
        return None

    def _unregister(self, name: str) -> Action | None:
        registry = self.host.actions.registry
        if registry.owner_of(name) != CUSTOM_ACTIONS_OWNER:
            return None
        action: Action | None = registry.unregister(name)
        return action

    def _register(self, defn: CustomActionDef) -> None:
        """Register ``defn`` live (``ActionConflictError`` when another owner has the name)."""
        if defn.enabled:
            register_custom_action_live(
                defn, _CustomOwner(self.host), services=self.host.actions.custom_services
            )

    def _restore(self, action: Action | None) -> None:
        if action is not None:
            with contextlib.suppress(ActionConflictError):
                self.host.actions.registry.register(action, CUSTOM_ACTIONS_OWNER)

    async def actions_list(self, request: Request) -> Response:
        actions, errors = [], []
        for index, entry in enumerate(self._entries()):
            try:
                actions.append(self._dump(CustomActionDef.model_validate(entry)))
            except ValidationError as exc:
                errors.append({"index": index, "error": str(exc.errors()[0]["msg"])})
        return JSONResponse({"actions": actions, "errors": errors})

    async def actions_get(self, request: Request) -> Response:
        action_id = request.path_params["action_id"]
        entries = self._entries()
        index = self._find(entries, action_id)
        if index is None:
            return _error(404, f"no custom action with id {action_id!r}")
        return JSONResponse(self._dump(self._validate(entries[index])))

    async def actions_create(self, request: Request) -> Response:
        body = await self._body(request)
        async with self._config_lock:
            data = self._read_config_file()
            entries: list[Any] = data[CONFIG_KEY]
            now = _now_iso()
            raw = {**body, "createdAt": now, "updatedAt": now}
            for key in ("created_at", "updated_at"):
                raw.pop(key, None)
            raw.setdefault("enabled", True)
            if not raw.get("id"):
                raw["id"] = _new_id(str(raw.get("name") or "action"))
            defn = self._validate(raw)
            if self._find(entries, defn.id) is not None:
                return _error(409, f"a custom action with id {defn.id!r} already exists")
            clash = self._name_clash(entries, defn, None)
            if clash is not None:
                return _error(409, clash)
            try:
                self._register(defn)
            except ActionConflictError as exc:
                return _error(409, str(exc))
            entries.append(self._dump(defn))
            try:
                self._write_config_file(data)
            except OSError as exc:
                self._unregister(defn.name)
                return _error(500, f"cannot write config file: {exc}")
        return JSONResponse(self._dump(defn), status_code=201)

    async def actions_update(self, request: Request) -> Response:
        action_id = request.path_params["action_id"]
        body = await self._body(request)
        if body.get("id", action_id) != action_id:
            return _error(
                400, f"the body's id {body.get('id')!r} differs from the URL's {action_id!r}"
            )
        async with self._config_lock:
            data = self._read_config_file()
            entries: list[Any] = data[CONFIG_KEY]
            index = self._find(entries, action_id)
            if index is None:
                return _error(404, f"no custom action with id {action_id!r}")
            old = entries[index]
            created = old.get("createdAt") or old.get("created_at") or _now_iso()
            raw = {**body, "id": action_id, "createdAt": created, "updatedAt": _now_iso()}
            raw.pop("created_at", None)
            raw.pop("updated_at", None)
            raw.setdefault("enabled", True)
            defn = self._validate(raw)
            clash = self._name_clash(entries, defn, index)
            if clash is not None:
                return _error(409, clash)
            old_name = old.get("name")
            previous = self._unregister(old_name) if isinstance(old_name, str) else None
            try:
                self._register(defn)
            except ActionConflictError as exc:
                self._restore(previous)
                return _error(409, str(exc))
            entries[index] = self._dump(defn)
            try:
                self._write_config_file(data)
            except OSError as exc:
                self._unregister(defn.name)
                self._restore(previous)
                return _error(500, f"cannot write config file: {exc}")
        return JSONResponse(self._dump(defn))

    async def actions_delete(self, request: Request) -> Response:
        action_id = request.path_params["action_id"]
        async with self._config_lock:
            data = self._read_config_file()
            entries: list[Any] = data[CONFIG_KEY]
            index = self._find(entries, action_id)
            if index is None:
                return _error(404, f"no custom action with id {action_id!r}")
            old = entries.pop(index)
            name = old.get("name")
            previous = self._unregister(name) if isinstance(name, str) else None
            try:
                self._write_config_file(data)
            except OSError as exc:
                self._restore(previous)
                return _error(500, f"cannot write config file: {exc}")
        return JSONResponse({"deleted": action_id})

    async def actions_test(self, request: Request) -> Response:
        action_id = request.path_params["action_id"]
        body = await self._body(request)
        params = body.get("params", {})
        if not isinstance(params, dict):
            return _error(400, "'params' must be an object of parameter values")
        entries = self._entries()
        index = self._find(entries, action_id)
        if index is None:
            return _error(404, f"no custom action with id {action_id!r}")
        defn = self._validate(entries[index])
        services = self.host.actions.custom_services or CustomActionServices.default(
            ssrf_policy=operator_ssrf_policy(self.host.config.security), terminal=self.terminal
        )
        started = time.perf_counter()
        output = await build_test_handler(defn, services=services)(params)
        duration_ms = round((time.perf_counter() - started) * 1000, 3)
        return JSONResponse({"ok": output.ok, "output": output.output, "duration_ms": duration_ms})

    # -- approvals ---------------------------------------------------------------------

    def _approvals(self) -> tuple[ApprovalBroker, ProgrammaticResolver]:
        broker = self.host.actions.get_service(APPROVALS_SERVICE)
        if not isinstance(broker, ApprovalBroker):
            raise HTTPException(
                503,
                f"no ApprovalBroker is registered as runtime service {APPROVALS_SERVICE!r}; "
                "`agentplug serve` wires one (embedding hosts: see agentplug.api.serve."
                "wire_approvals)",
            )
        resolver = broker.resolver
        if not isinstance(resolver, ProgrammaticResolver):
            raise HTTPException(
                503,
                f"the approval broker's resolver is a {type(resolver).__name__}; the API "
                "resolves approvals only through a ProgrammaticResolver",
            )
        return broker, resolver

    async def approvals_list(self, request: Request) -> Response:
        _, resolver = self._approvals()
        pending = [
            {**p.summary(), "params": _jsonable(p.params), "created_at": p.created_at}
            for p in resolver.pending
        ]
        return JSONResponse({"pending": pending})

    async def approvals_resolve(self, request: Request) -> Response:
        approval_id = request.path_params["approval_id"]
        body = await self._body(request)
        decision = body.get("decision")
        if not isinstance(decision, str):
            return _error(400, "'decision' must be one of allow-once, allow-always, deny")
        _, resolver = self._approvals()
        if approval_id not in {p.id for p in resolver.pending}:
            return _error(404, resolver.resolve(approval_id, decision).message)
        reply = resolver.resolve(approval_id, decision)
        if not reply.ok:
            return _error(400, reply.message)
        return JSONResponse(
            {
                "ok": True,
                "id": approval_id,
                "decision": parse_decision(decision),
                "message": reply.message,
            }
        )

    async def grants_list(self, request: Request) -> Response:
        broker, _ = self._approvals()
        return JSONResponse({"grants": [g.to_dict() for g in broker.list_grants()]})

    async def grants_revoke(self, request: Request) -> Response:
        grant_id = request.path_params["grant_id"]
        broker, _ = self._approvals()
        if not broker.revoke_grant(grant_id):
            return _error(404, f"no standing grant {grant_id!r}")
        return JSONResponse({"revoked": grant_id})


class _CustomOwner:
    """Runtime view for live registration under the owner ``AgentRuntime.load`` uses."""

    def __init__(self, host: PluginHost) -> None:
        self._runtime = host.actions

    def get_service(self, name: str) -> object | None:
        service: object | None = self._runtime.get_service(name)
        return service

    def register_action(self, action: Action) -> None:
        self._runtime.registry.register(action, CUSTOM_ACTIONS_OWNER)


def _new_id(name: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")[:40] or "action"
    return f"{slug}-{secrets.token_hex(3)}"


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


def _write_json_atomic(path: Path, data: Any) -> None:
    """Write ``data`` as JSON to ``path`` atomically (temp file in the same folder + rename)."""
    text = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    try:
        mode: int | None = stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        mode = None
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


# ---------------------------------------------------------------------------
# The application


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    return _error(exc.status_code, str(exc.detail))


async def _server_error(request: Request, exc: Exception) -> Response:
    log.exception("API request %s %s failed", request.method, request.url.path)
    return _error(500, f"internal error ({type(exc).__name__}); see the server log")


def create_app(
    host: PluginHost,
    *,
    token: str,
    state_dir: str | os.PathLike[str],
    config_path: str | os.PathLike[str] | None = None,
    terminal: TerminalService | None = None,
    plugin_manager: Any = None,
) -> Starlette:
    """The control API for ``host`` (see the module docstring for the endpoints).

    ``token`` is the bearer token every request but ``/api/health`` must present.
    ``state_dir`` roots the plugin manager and, unless ``actions.shell.cwd`` is set, the
    default terminal. ``config_path`` is the JSON config whose ``customActions`` the CRUD
    endpoints edit (without it they only list the host's config). ``terminal`` replaces
    the terminal lookup (default: runtime service ``terminal``, else a local one);
    ``plugin_manager`` replaces ``PluginManager(host, state_dir)``. Approvals are resolved
    through the :class:`ApprovalBroker` registered as runtime service ``approvals``.
    """
    if not isinstance(token, str) or len(token) < 16:
        raise ValueError("the API token must be a string of at least 16 characters")
    api = ControlApi(
        host,
        state_dir=Path(state_dir),
        config_path=Path(config_path) if config_path is not None else None,
        terminal=terminal,
        plugin_manager=plugin_manager,
    )

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
        Route("/api/plugins/install", api.plugins_install, methods=["POST"]),
        Route("/api/custom-actions", api.actions_list, methods=["GET"]),
        Route("/api/custom-actions", api.actions_create, methods=["POST"]),
        Route("/api/custom-actions/{action_id}", api.actions_get, methods=["GET"]),
        Route("/api/custom-actions/{action_id}", api.actions_update, methods=["PUT"]),
        Route("/api/custom-actions/{action_id}", api.actions_delete, methods=["DELETE"]),
        Route("/api/custom-actions/{action_id}/test", api.actions_test, methods=["POST"]),
        Route("/api/approvals", api.approvals_list, methods=["GET"]),
        Route("/api/approvals/grants", api.grants_list, methods=["GET"]),
        Route("/api/approvals/grants/{grant_id}", api.grants_revoke, methods=["DELETE"]),
        Route("/api/approvals/{approval_id}", api.approvals_resolve, methods=["POST"]),
    ]
    app = Starlette(
        routes=routes,
        exception_handlers={HTTPException: _http_error, Exception: _server_error},
        lifespan=lifespan,
    )
    app.add_middleware(_Guard, token=token)
    app.state.api = api
    return app
