"""Custom-action CRUD and test endpoints (:class:`CustomActionRoutes`).

``GET|POST /api/custom-actions``, ``GET|PUT|DELETE /api/custom-actions/{id}`` edit the
config file's ``customActions`` and register them live; ``POST /api/custom-actions/{id}/test``
runs one.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import secrets
import stat
import tempfile
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from agentplug.actions.custom import (
    CONFIG_KEY,
    CodeHandlerDef,
    CustomActionDef,
    build_test_handler,
    register_custom_action_live,
)
from agentplug.actions.model import Action
from agentplug.actions.registry import ActionConflictError, normalize_action_name
from agentplug.api.responses import error_response
from agentplug.api.routes.base import ApiBase
from agentplug.config.datafiles import DataFileError, read_data_file
from agentplug.core.redaction import scrub_data

if TYPE_CHECKING:
    from agentplug.actions.runtime import AgentRuntime

MAX_ACTIVE_CODE_TESTS = 4
"""``code`` tests running at once; more are answered 429 (each starts a sandbox process)."""

CUSTOM_ACTIONS_OWNER = "custom-actions"
"""Registry owner of config custom actions (the one ``AgentRuntime.load`` uses)."""


def _now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class CustomActionRoutes(ApiBase):
    """The custom-action endpoints of :class:`~agentplug.api.app.ControlApi`."""

    _config_lock: asyncio.Lock
    _code_tests: int = 0
    """``code`` tests in progress (see :data:`MAX_ACTIVE_CODE_TESTS`)."""

    def _read_config_file(self) -> dict[str, Any]:
        path = self.config_path
        if path is None:
            raise HTTPException(
                409,
                "no config file: start `agentplug serve --config FILE` to create and edit "
                "custom actions",
            )
        try:
            data = read_data_file(path) if path.exists() else {}
        except DataFileError as exc:
            raise HTTPException(500, f"cannot read the config file: {exc}") from None
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
        registry = self.gateway.actions.registry
        if registry.owner_of(name) != CUSTOM_ACTIONS_OWNER:
            return None
        action: Action | None = registry.unregister(name)
        return action

    def _register(self, defn: CustomActionDef) -> None:
        """Register ``defn`` live (``ActionConflictError`` when another owner has the name)."""
        if defn.enabled:
            register_custom_action_live(
                defn,
                _CustomOwner(self.gateway.actions),
                services=self.gateway.actions.custom_services,
            )

    def _restore(self, action: Action | None) -> None:
        if action is not None:
            with contextlib.suppress(ActionConflictError):
                self.gateway.actions.registry.register(action, CUSTOM_ACTIONS_OWNER)

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
            return error_response(404, f"no custom action with id {action_id!r}")
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
                return error_response(409, f"a custom action with id {defn.id!r} already exists")
            clash = self._name_clash(entries, defn, None)
            if clash is not None:
                return error_response(409, clash)
            try:
                self._register(defn)
            except ActionConflictError as exc:
                return error_response(409, str(exc))
            entries.append(self._dump(defn))
            try:
                self._write_config_file(data)
            except OSError as exc:
                self._unregister(defn.name)
                return error_response(500, f"cannot write config file: {exc}")
        return JSONResponse(self._dump(defn), status_code=201)

    async def actions_update(self, request: Request) -> Response:
        action_id = request.path_params["action_id"]
        body = await self._body(request)
        if body.get("id", action_id) != action_id:
            return error_response(
                400, f"the body's id {body.get('id')!r} differs from the URL's {action_id!r}"
            )
        async with self._config_lock:
            data = self._read_config_file()
            entries: list[Any] = data[CONFIG_KEY]
            index = self._find(entries, action_id)
            if index is None:
                return error_response(404, f"no custom action with id {action_id!r}")
            old = entries[index]
            created = old.get("createdAt") or old.get("created_at") or _now_iso()
            raw = {**body, "id": action_id, "createdAt": created, "updatedAt": _now_iso()}
            raw.pop("created_at", None)
            raw.pop("updated_at", None)
            raw.setdefault("enabled", True)
            defn = self._validate(raw)
            clash = self._name_clash(entries, defn, index)
            if clash is not None:
                return error_response(409, clash)
            old_name = old.get("name")
            previous = self._unregister(old_name) if isinstance(old_name, str) else None
            try:
                self._register(defn)
            except ActionConflictError as exc:
                self._restore(previous)
                return error_response(409, str(exc))
            entries[index] = self._dump(defn)
            try:
                self._write_config_file(data)
            except OSError as exc:
                self._unregister(defn.name)
                self._restore(previous)
                return error_response(500, f"cannot write config file: {exc}")
        return JSONResponse(self._dump(defn))

    async def actions_delete(self, request: Request) -> Response:
        action_id = request.path_params["action_id"]
        async with self._config_lock:
            data = self._read_config_file()
            entries: list[Any] = data[CONFIG_KEY]
            index = self._find(entries, action_id)
            if index is None:
                return error_response(404, f"no custom action with id {action_id!r}")
            old = entries.pop(index)
            name = old.get("name")
            previous = self._unregister(name) if isinstance(name, str) else None
            try:
                self._write_config_file(data)
            except OSError as exc:
                self._restore(previous)
                return error_response(500, f"cannot write config file: {exc}")
        return JSONResponse({"deleted": action_id})

    async def actions_test(self, request: Request) -> Response:
        action_id = request.path_params["action_id"]
        body = await self._body(request)
        params = body.get("params", {})
        if not isinstance(params, dict):
            return error_response(400, "'params' must be an object of parameter values")
        entries = self._entries()
        index = self._find(entries, action_id)
        if index is None:
            return error_response(404, f"no custom action with id {action_id!r}")
        defn = self._validate(entries[index])
        services = self.gateway.actions.custom_action_services()
        is_code = isinstance(defn.handler, CodeHandlerDef)
        if is_code:
            # Checked and counted without an await in between: the limit is exact.
            if self._code_tests >= MAX_ACTIVE_CODE_TESTS:
                return error_response(
                    429,
                    f"{self._code_tests} code-action tests are still running (the limit is "
                    f"{MAX_ACTIVE_CODE_TESTS}); wait for one to finish",
                )
            self._code_tests += 1
        started = time.perf_counter()
        try:
            output = await build_test_handler(defn, services=services)(params)
        finally:
            if is_code:
                self._code_tests -= 1
        duration_ms = round((time.perf_counter() - started) * 1000, 3)
        shown = scrub_data(output.output)  # a test run may echo a credential it was given
        return JSONResponse({"ok": output.ok, "output": shown, "duration_ms": duration_ms})


class _CustomOwner:
    """Runtime view for live registration under the owner ``AgentRuntime.load`` uses."""

    def __init__(self, runtime: AgentRuntime) -> None:
        self._runtime = runtime

    def get_service(self, name: str) -> object | None:
        service: object | None = self._runtime.get_service(name)
        return service

    def register_action(self, action: Action) -> None:
        self._runtime.registry.register(action, CUSTOM_ACTIONS_OWNER)


def _new_id(name: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")[:40] or "action"
    return f"{slug}-{secrets.token_hex(3)}"


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
