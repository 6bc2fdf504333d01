"""Custom actions: user-defined actions declared in the config file, no plugin code.

The config's top-level ``customActions`` array holds definitions in the seed's JSON shape
(``eliza.json`` definitions load unchanged)::

    {"id": "weather-check", "name": "CHECK_WEATHER", "description": "...",
     "similes": ["WEATHER"], "parameters": [{"name": "city", "description": "...",
     "required": true}], "handler": {"type": "http", "method": "GET",
     "url": "https://wttr.in/{{city}}?format=3"}, "enabled": true,
     "createdAt": "2025-01-01T00:00:00Z", "updatedAt": "2025-01-01T00:00:00Z"}

:func:`load_custom_actions` validates and converts them, :func:`def_to_action` turns one
definition into an :class:`~agentplug.actions.model.Action`, :func:`register_custom_action_live`
adds one to a running runtime, and :func:`build_test_handler` runs one without registering it.

The three handler kinds run through a :class:`CustomActionServices` object so hosts (and
tests) can swap the back-ends; its defaults are the real ones: the SSRF-guarded HTTP client,
the local terminal service and the isolated code sandbox.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Awaitable, Callable, Collection, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, TypeAlias

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic.alias_generators import to_camel

from agentplug.actions.code_handler import CodeHandlerDef, run_code_handler
from agentplug.actions.handler_output import HandlerOutput
from agentplug.actions.http_handler import HttpHandlerDef, run_http_handler
from agentplug.actions.model import (
    Action,
    ActionDefinitionError,
    ActionParameter,
    ActionResult,
    ActionRuntime,
    HandlerOptions,
    Message,
    State,
)
from agentplug.actions.registry import normalize_action_name
from agentplug.actions.shell_handler import ShellHandlerDef, run_shell_handler
from agentplug.actions.terminal import LocalTerminalService, TerminalService
from agentplug.sandbox import CodeSandbox, FetchCallable, FetchRequest, FetchResponse
from agentplug.security.ssrf import FetchError, SSRFPolicy, guarded_fetch

__all__ = [
    "CodeBackend",
    "CodeHandlerDef",
    "CustomActionConfigError",
    "CustomActionDef",
    "CustomActionHandlerDef",
    "CustomActionLoadError",
    "CustomActionParameter",
    "CustomActionServices",
    "HttpBackend",
    "HttpHandlerDef",
    "LoadResult",
    "ShellBackend",
    "ShellHandlerDef",
    "TestOutput",
    "bind_runtime",
    "build_test_handler",
    "def_to_action",
    "guarded_fetch_for_code",
    "load_custom_actions",
    "read_custom_action_defs",
    "register_custom_action_live",
]

logger = logging.getLogger("agentplug.actions")

CONFIG_KEY = "customActions"
"""Top-level key of the config file that holds the definitions."""

TestOutput: TypeAlias = HandlerOutput
"""What a test handler returns: ``{ok: bool, output: str}``."""


CustomActionHandlerDef: TypeAlias = Annotated[
    HttpHandlerDef | ShellHandlerDef | CodeHandlerDef, Field(discriminator="type")
]
"""One of the ``http``, ``shell`` or ``code`` handler objects, chosen by ``type``."""


class CustomActionParameter(BaseModel):
    """``{name, description, required}``; every custom-action parameter is a string."""

    model_config = ConfigDict(populate_by_name=True, extra="ignore")

    name: str = Field(min_length=1, pattern=r"^[A-Za-z_][A-Za-z0-9_.-]*$")
    description: str = ""
    required: bool = False


class CustomActionDef(BaseModel):
    """One entry of ``customActions``, in the seed's JSON shape (camelCase keys).

    Unknown keys are ignored so definitions written by newer tools still load; the fields
    below are checked, and a bad one is reported by :func:`load_custom_actions` with its path.
    """

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, serialize_by_alias=True, extra="ignore"
    )

    id: str = Field(min_length=1)
    name: str = Field(min_length=1)
    description: str
    similes: list[str] = Field(default_factory=list)
    parameters: list[CustomActionParameter]
    handler: CustomActionHandlerDef
    enabled: bool
    created_at: str
    updated_at: str

    @field_validator("description")
    @classmethod
    def _description_not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must describe what the action does and when to use it")
        return value

    @field_validator("created_at", "updated_at")
    @classmethod
    def _iso_timestamp(cls, value: str) -> str:
        try:
            datetime.fromisoformat(value)
        except ValueError:
            raise ValueError(
                f"{value!r} is not an ISO 8601 timestamp such as '2025-01-01T00:00:00Z'"
            ) from None
        return value

    @field_validator("parameters")
    @classmethod
    def _unique_parameter_names(
        cls, value: list[CustomActionParameter]
    ) -> list[CustomActionParameter]:
        seen: set[str] = set()
        for param in value:
            if param.name in seen:
                raise ValueError(f"parameter {param.name!r} is declared twice")
            seen.add(param.name)
        return value

    @property
    def declared_names(self) -> list[str]:
        """Names of the declared parameters (the only ones substituted into templates)."""
        return [p.name for p in self.parameters]


# ---------------------------------------------------------------------------
# Handler back-ends

HttpBackend: TypeAlias = Callable[
    [HttpHandlerDef, Mapping[str, str], Collection[str]], Awaitable[HandlerOutput]
]
"""Runs an ``http`` handler: ``(defn, params, declared_names) -> HandlerOutput``."""

ShellBackend: TypeAlias = Callable[
    [ShellHandlerDef, Mapping[str, str], Collection[str]], Awaitable[HandlerOutput]
]
"""Runs a ``shell`` handler: ``(defn, params, declared_names) -> HandlerOutput``."""

CodeBackend: TypeAlias = Callable[[CodeHandlerDef, Mapping[str, str]], Awaitable[HandlerOutput]]
"""Runs a ``code`` handler: ``(defn, params) -> HandlerOutput``."""


@dataclass(frozen=True)
class CustomActionServices:
    """The three handler back-ends custom actions run through.

    Build the real ones with :meth:`default` (optionally with an SSRF allowlist, a shell
    working directory or a replacement terminal/sandbox); pass other callables to swap one.
    """

    http: HttpBackend
    shell: ShellBackend
    code: CodeBackend

    @classmethod
    def default(
        cls,
        *,
        ssrf_policy: SSRFPolicy | None = None,
        shell_cwd: str | os.PathLike[str] | None = None,
        shell_timeout_s: float = 30.0,
        terminal: TerminalService | None = None,
        sandbox: CodeSandbox | None = None,
    ) -> CustomActionServices:
        """The real back-ends.

        ``http`` goes through the SSRF guard with ``ssrf_policy`` (default policy: internal
        addresses blocked). ``shell`` runs through ``terminal`` (default: a
        :class:`~agentplug.actions.terminal.LocalTerminalService` rooted at ``shell_cwd``,
        itself defaulting to the current directory) with ``shell_timeout_s``. ``code`` runs in
        ``sandbox`` (default: a fresh :class:`~agentplug.sandbox.CodeSandbox` per run, closed
        afterwards; pass a long-lived one to reuse warm workers) and its ``fetch`` goes
        through the same SSRF policy.
        """
        policy = ssrf_policy or SSRFPolicy()
        cwd = Path(shell_cwd) if shell_cwd is not None else Path.cwd()
        fetch = guarded_fetch_for_code(policy)

        async def http(
            defn: HttpHandlerDef, params: Mapping[str, str], declared: Collection[str]
        ) -> HandlerOutput:
            return await run_http_handler(defn, params, declared, policy=policy)

        async def shell(
            defn: ShellHandlerDef, params: Mapping[str, str], declared: Collection[str]
        ) -> HandlerOutput:
            # Built per run so a working directory created after start-up is still found.
            service = terminal if terminal is not None else LocalTerminalService(cwd)
            return await run_shell_handler(
                defn, params, declared, terminal=service, timeout_s=shell_timeout_s
            )

        async def code(defn: CodeHandlerDef, params: Mapping[str, str]) -> HandlerOutput:
            if sandbox is not None:
                return await run_code_handler(defn, params, sandbox=sandbox, fetch=fetch)
            async with CodeSandbox() as box:
                return await run_code_handler(defn, params, sandbox=box, fetch=fetch)

        return cls(http=http, shell=shell, code=code)


def guarded_fetch_for_code(policy: SSRFPolicy) -> FetchCallable:
    """The ``fetch`` given to sandboxed code: the SSRF-guarded client of ``http`` handlers.

    Blocked targets and network failures raise (the sandbox turns that into an error inside
    the code); a redirect is refused rather than followed, like in ``http`` handlers.
    """

    async def fetch(request: FetchRequest) -> FetchResponse:
        result = await guarded_fetch(
            request.url,
            method=request.method,
            headers=request.headers,
            body=request.body,
            policy=policy,
        )
        if result.redirect_location is not None:
            raise FetchError(
                f"redirect blocked: {request.url} answered {result.status} with Location "
                f"{result.redirect_location!r}; fetch never follows redirects (SSRF protection)"
            )
        return FetchResponse(status=result.status, headers=result.headers, body=result.body)

    return fetch


# ---------------------------------------------------------------------------
# Conversion


def _string_params(defn: CustomActionDef, raw: Mapping[str, Any]) -> dict[str, str]:
    """Declared parameters only, as strings (custom-action parameters are all strings)."""
    params: dict[str, str] = {}
    for name in defn.declared_names:
        value = raw.get(name)
        if value is None:
            continue
        if isinstance(value, bool):
            params[name] = "true" if value else "false"
        elif isinstance(value, str | int | float):
            params[name] = str(value)
        else:
            params[name] = json.dumps(value, ensure_ascii=False)
    return params


def _missing_required(defn: CustomActionDef, params: Mapping[str, str]) -> str | None:
    for param in defn.parameters:
        if param.required and not params.get(param.name):
            return param.name
    return None


async def _run_handler(
    defn: CustomActionDef, params: Mapping[str, str], services: CustomActionServices
) -> HandlerOutput:
    handler = defn.handler
    declared = defn.declared_names
    if isinstance(handler, HttpHandlerDef):
        return await services.http(handler, params, declared)
    if isinstance(handler, ShellHandlerDef):
        return await services.shell(handler, params, declared)
    return await services.code(handler, params)


async def _invoke(
    defn: CustomActionDef, raw: Mapping[str, Any], services: CustomActionServices
) -> tuple[HandlerOutput, dict[str, str], bool]:
    """Check required parameters, then run the handler; never raises.

    Returns the output, the string parameters used, and whether the handler completed
    (``False`` when a required parameter was missing, i.e. before any I/O, or when it raised).
    """
    params = _string_params(defn, raw)
    missing = _missing_required(defn, params)
    if missing is not None:
        return (
            HandlerOutput(ok=False, output=f"Missing required parameter: {missing}"),
            params,
            False,
        )
    try:
        output = await _run_handler(defn, params, services)
    except Exception as exc:  # a back-end failure is the action's failure, not the host's
        return HandlerOutput(ok=False, output=f"Action failed: {exc}"), params, False
    return output, params, True


def def_to_action(
    defn: CustomActionDef | Mapping[str, Any], *, services: CustomActionServices | None = None
) -> Action:
    """Convert one definition into an :class:`Action`.

    Every parameter is typed ``string`` and ``validate`` always passes. The handler returns a
    failed ``Missing required parameter: <name>`` before doing any I/O, otherwise
    ``ActionResult(text=output, success=ok, data={"action_id": id, "params": params})``; a
    raised error becomes the failed result ``Action failed: <error>``.
    """
    definition = defn if isinstance(defn, CustomActionDef) else CustomActionDef.model_validate(defn)
    backends = services if services is not None else CustomActionServices.default()

    async def handler(
        runtime: ActionRuntime,
        message: Message,
        state: State | None,
        options: HandlerOptions | None,
    ) -> ActionResult:
        raw = options.parameters if options is not None else {}
        output, params, completed = await _invoke(definition, raw, backends)
        if not completed:
            return ActionResult(success=False, text=output.output)
        return ActionResult(
            text=output.output,
            success=output.ok,
            data={"action_id": definition.id, "params": params},
        )

    async def validate(runtime: ActionRuntime, message: Message, state: State | None) -> bool:
        return True

    return Action(
        name=definition.name,
        description=definition.description,
        similes=definition.similes,
        parameters=[
            ActionParameter(
                name=p.name,
                description=p.description,
                required=p.required,
                schema={"type": "string"},
            )
            for p in definition.parameters
        ],
        validate=validate,
        handler=handler,
        metadata={"custom_action_id": definition.id, "handler_type": definition.handler.type},
    )


def build_test_handler(
    defn: CustomActionDef | Mapping[str, Any], *, services: CustomActionServices | None = None
) -> Callable[[Mapping[str, Any]], Coroutine[Any, Any, TestOutput]]:
    """A callable ``params -> {ok, output}`` that runs the handler without registering it.

    Same rules as the converted action: missing required parameters fail before any I/O and
    a raised error becomes ``Action failed: <error>``.
    """
    definition = defn if isinstance(defn, CustomActionDef) else CustomActionDef.model_validate(defn)
    backends = services if services is not None else CustomActionServices.default()

    async def test(params: Mapping[str, Any]) -> TestOutput:
        output, _, _ = await _invoke(definition, params, backends)
        return output

    return test


_bound_runtime: ActionRuntime | None = None


def bind_runtime(runtime: ActionRuntime | None) -> None:
    """Set (or clear with ``None``) the runtime live registration uses by default.

    The host binds its runtime once it is started and clears it when it stops, so a UI
    creating an action between runs gets ``None`` rather than an action on a dead runtime.
    """
    global _bound_runtime
    _bound_runtime = runtime


def register_custom_action_live(
    defn: CustomActionDef | Mapping[str, Any],
    runtime: ActionRuntime | None = None,
    *,
    services: CustomActionServices | None = None,
) -> Action | None:
    """Convert ``defn`` and register it on ``runtime`` now, without a restart.

    Uses the runtime bound with :func:`bind_runtime` when ``runtime`` is omitted, and returns
    ``None`` when there is none. A name clash raises
    :class:`~agentplug.actions.registry.ActionConflictError` from the runtime.
    """
    target = runtime if runtime is not None else _bound_runtime
    if target is None:
        logger.warning(
            "custom action not registered live: no runtime is running; it will load from "
            "the config at the next start"
        )
        return None
    action = def_to_action(defn, services=services)
    target.register_action(action)
    return action


# ---------------------------------------------------------------------------
# Loading


class CustomActionConfigError(ValueError):
    """The config as a whole cannot be read (missing file, bad JSON, ``customActions`` type)."""


@dataclass(frozen=True)
class CustomActionLoadError:
    """A malformed definition: which entry (index and id), which field, and what is wrong."""

    index: int
    id: str | None
    field: str
    message: str

    def __str__(self) -> str:
        who = f" (id {self.id!r})" if self.id else ""
        return (
            f"{CONFIG_KEY}[{self.index}]{who}: field {self.field!r}: {self.message}; "
            "fix this entry (it was skipped, the others loaded)"
        )


@dataclass
class LoadResult:
    """What :func:`load_custom_actions` produced."""

    actions: list[Action] = field(default_factory=list)
    """The enabled definitions, converted, in config order."""
    definitions: list[CustomActionDef] = field(default_factory=list)
    """The enabled, valid definitions (parallel to :attr:`actions`)."""
    disabled: list[CustomActionDef] = field(default_factory=list)
    """Valid definitions with ``enabled: false`` (not converted)."""
    errors: list[CustomActionLoadError] = field(default_factory=list)
    """Malformed entries that were skipped."""


def _field_path(loc: Sequence[int | str]) -> str:
    parts: list[str] = []
    for index, item in enumerate(loc):
        # The discriminated union inserts the tag ("http") into the path; users never wrote it.
        if index == 1 and loc[0] == "handler" and item in ("http", "shell", "code"):
            continue
        if isinstance(item, int):
            parts.append(f"[{item}]")
        else:
            parts.append(("." if parts else "") + item)
    return "".join(parts) or "(entry)"


def _read_config(config: Mapping[str, Any] | str | os.PathLike[str]) -> Mapping[str, Any]:
    if isinstance(config, Mapping):
        return config
    path = Path(config)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise CustomActionConfigError(
            f"cannot read config file {str(path)!r}: {exc.strerror or exc}; check the path"
        ) from exc
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CustomActionConfigError(
            f"config file {str(path)!r} is not valid JSON: {exc.msg} at line {exc.lineno} "
            f"column {exc.colno}"
        ) from exc
    if not isinstance(data, Mapping):
        raise CustomActionConfigError(
            f"config file {str(path)!r} must hold a JSON object with a {CONFIG_KEY!r} array"
        )
    return data


def read_custom_action_defs(
    config: Mapping[str, Any] | str | os.PathLike[str],
) -> tuple[list[CustomActionDef], list[CustomActionLoadError]]:
    """Parse every entry of ``customActions`` (enabled or not) and report malformed ones.

    Also reports an entry whose id, or name (ignoring case and ``_``), repeats an earlier
    valid entry. Raises :class:`CustomActionConfigError` when the config itself is unusable.
    """
    indexed, errors = _parse_entries(_read_config(config))
    return [definition for _, definition in indexed], errors


def _parse_entries(
    data: Mapping[str, Any],
) -> tuple[list[tuple[int, CustomActionDef]], list[CustomActionLoadError]]:
    entries = data.get(CONFIG_KEY, [])
    if entries is None:
        entries = []
    if not isinstance(entries, list):
        raise CustomActionConfigError(
            f"{CONFIG_KEY!r} must be a JSON array of action definitions, got "
            f"{type(entries).__name__}"
        )
    definitions: list[tuple[int, CustomActionDef]] = []
    errors: list[CustomActionLoadError] = []
    ids: dict[str, int] = {}
    names: dict[str, int] = {}
    for index, entry in enumerate(entries):
        raw_id = entry.get("id") if isinstance(entry, Mapping) else None
        entry_id = raw_id if isinstance(raw_id, str) else None
        if not isinstance(entry, Mapping):
            errors.append(
                CustomActionLoadError(
                    index, None, "(entry)", f"expected an object, got {type(entry).__name__}"
                )
            )
            continue
        try:
            definition = CustomActionDef.model_validate(entry)
        except ValidationError as exc:
            for error in exc.errors():
                errors.append(
                    CustomActionLoadError(index, entry_id, _field_path(error["loc"]), error["msg"])
                )
            continue
        if definition.id in ids:
            errors.append(
                CustomActionLoadError(
                    index,
                    entry_id,
                    "id",
                    f"id {definition.id!r} is already used by entry [{ids[definition.id]}]",
                )
            )
            continue
        key = normalize_action_name(definition.name)
        if key in names:
            errors.append(
                CustomActionLoadError(
                    index,
                    entry_id,
                    "name",
                    f"name {definition.name!r} clashes with entry [{names[key]}] (names are "
                    "compared ignoring case and '_')",
                )
            )
            continue
        ids[definition.id] = index
        names[key] = index
        definitions.append((index, definition))
    return definitions, errors


def load_custom_actions(
    config: Mapping[str, Any] | str | os.PathLike[str],
    *,
    services: CustomActionServices | None = None,
) -> LoadResult:
    """Read ``customActions`` from ``config`` (a mapping or a JSON file path).

    Keeps only ``enabled`` definitions and converts each with :func:`def_to_action`. A
    malformed entry is reported in :attr:`LoadResult.errors` (index, id, field) and logged,
    then skipped; the others load. Raises :class:`CustomActionConfigError` only when the
    config as a whole is unusable.
    """
    definitions, errors = _parse_entries(_read_config(config))
    backends = services if services is not None else CustomActionServices.default()
    result = LoadResult(errors=errors)
    for index, definition in definitions:
        if not definition.enabled:
            result.disabled.append(definition)
            continue
        try:
            action = def_to_action(definition, services=backends)
        except (ActionDefinitionError, ValidationError) as exc:
            result.errors.append(CustomActionLoadError(index, definition.id, "(entry)", str(exc)))
            continue
        result.actions.append(action)
        result.definitions.append(definition)
    for error in result.errors:
        logger.warning("custom action skipped: %s", error)
    return result
