"""Communication built-ins (ACTIONS.md §4): ``MESSAGE``, ``SHELL_COMMAND`` and ``LOG_LEVEL``.

``MESSAGE`` (``text``, ``targetType`` = ``user`` | ``room``, ``source``, ``target``)
    Looks the service called ``source`` up in the runtime's service registry
    (``runtime.get_service(source)``); it must implement :class:`MessagingService`
    (``send_to_user`` / ``send_to_room``). An unknown service, a service that cannot send to
    the requested target type, or a failed send is a failed result saying which.

``SHELL_COMMAND`` (``command``, optional ``runId``)
    Runs the command through the ``terminal`` service (a host replacement, or by default a
    :class:`~agentplug.actions.terminal.LocalTerminalService` rooted at ``actions.shell.cwd``,
    else the state directory, else the current directory), with a time limit and bounded
    output. Output chunks are published, as they arrive, on the :class:`OutputHub` service
    ``terminal_output``; a WebSocket endpoint streams them with
    ``async for chunk in hub.subscribe(run_id)``. The result carries the run id, the exit
    code and the (bounded) output. ``actions.shell.enabled: false`` refuses every command.

``LOG_LEVEL`` (``level`` = ``trace`` | ``debug`` | ``info`` | ``warn`` | ``error``, or
``reset``)
    Sets the log level of the current room only (``message.room_id``) in the
    :class:`RoomLogLevels` service ``log_levels``. Records carrying a ``room_id`` (logged with
    ``extra={"room_id": ...}`` or through :func:`room_logger`) are filtered by
    :class:`RoomLevelFilter` with their room's level; other rooms keep theirs.

Operator settings (``actions.shell``)::

    {"actions": {"shell": {"enabled": true, "cwd": "/srv/agent/work",
                           "timeoutSeconds": 60, "maxOutputBytes": 65536}}}

Invalid settings raise :class:`~agentplug.core.errors.ConfigError` naming ``actions.shell.<key>``
when the built-ins are registered (``await host.actions.load()``).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import inspect
import logging
import re
import threading
import uuid
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel

from agentplug.actions.model import (
    Action,
    ActionExample,
    ActionParameter,
    ActionResult,
    ActionRuntime,
    HandlerOptions,
    Message,
    ParameterSchema,
    State,
)
from agentplug.actions.terminal import LocalTerminalService, TerminalResult
from agentplug.core.errors import ConfigError

if TYPE_CHECKING:
    from agentplug.actions.runtime import AgentRuntime

__all__ = [
    "LEVELS",
    "LOG_LEVELS_SERVICE",
    "OUTPUT_HUB_SERVICE",
    "TERMINAL_SERVICE",
    "TRACE",
    "MessagingService",
    "OutputChunk",
    "OutputHub",
    "RoomLevelFilter",
    "RoomLogLevels",
    "RunStatus",
    "ShellSettings",
    "builtin_actions",
    "load_settings",
    "output_hub",
    "room_log_levels",
    "room_logger",
]

log = logging.getLogger("agentplug.builtins.comms")

TRACE = 5
"""The ``trace`` log level (below ``DEBUG``), registered with :mod:`logging` as ``TRACE``."""
logging.addLevelName(TRACE, "TRACE")

LEVELS: Mapping[str, int] = {
    "trace": TRACE,
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warn": logging.WARNING,
    "warning": logging.WARNING,
    "error": logging.ERROR,
}
"""``LOG_LEVEL`` names (``warning`` is accepted for ``warn``)."""

TERMINAL_SERVICE = "terminal"
OUTPUT_HUB_SERVICE = "terminal_output"
LOG_LEVELS_SERVICE = "log_levels"

_T = TypeVar("_T")
_M = TypeVar("_M", bound=BaseModel)


# ---------------------------------------------------------------------------
# Settings


class _Section(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True
    )


class ShellSettings(_Section):
    """``actions.shell``."""

    enabled: bool = False
    """Off by default: running arbitrary commands from a conversation is an operator's
    explicit choice (``actions.shell.enabled: true``)."""
    cwd: str | None = None
    """Working directory (must exist); default: the state directory, else the current one."""
    timeout_seconds: float = Field(default=60.0, gt=0, le=24 * 3600)
    max_output_bytes: int = Field(default=64 * 1024, gt=0, le=64 * 1024 * 1024)


def load_settings(actions: Mapping[str, Any], key: str, model: type[_M]) -> _M:
    """Validate ``actions.<key>`` with ``model``; raise :class:`ConfigError` naming each key."""
    raw = actions.get(key)
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        raise ConfigError([(f"actions.{key}", f"must be an object, got {type(raw).__name__}")])
    try:
        return model.model_validate(dict(raw))
    except ValidationError as exc:
        issues = []
        for error in exc.errors():
            where = ".".join(str(part) for part in error["loc"])
            issues.append((f"actions.{key}.{where}" if where else f"actions.{key}", error["msg"]))
        raise ConfigError(issues) from None


def _get_or_register(runtime: object, name: str, kind: type[_T], factory: Callable[[], _T]) -> _T:
    """The ``name`` service of ``runtime`` when it is a ``kind``; else a new one, registered."""
    get = getattr(runtime, "get_service", None)
    existing = get(name) if callable(get) else None
    if isinstance(existing, kind):
        return existing
    if existing is not None:
        raise TypeError(
            f"service {name!r} is a {type(existing).__name__}, expected {kind.__name__}; "
            f"register an {kind.__name__} under {name!r} or leave the name free"
        )
    service = factory()
    register = getattr(runtime, "register_service", None)
    if callable(register):
        register(name, service)
    return service


def _params(options: HandlerOptions | None) -> Mapping[str, Any]:
    return options.parameters if options is not None else {}


def _text_param(params: Mapping[str, Any], name: str) -> str | None:
    value = params.get(name)
    if isinstance(value, str) and value.strip():
        return value
    return None


# ---------------------------------------------------------------------------
# MESSAGE


@runtime_checkable
class MessagingService(Protocol):
    """What a messaging service (``telegram``, ``discord``...) implements for ``MESSAGE``.

    Register it with ``runtime.register_service("telegram", service)``. Either method may
    raise to report a failed send; the message becomes the failed result's reason.
    """

    async def send_to_user(self, user_id: str, text: str) -> object:
        """Send ``text`` to the user ``user_id``."""
        ...

    async def send_to_room(self, room_id: str, text: str) -> object:
        """Send ``text`` to the room (channel, group, chat) ``room_id``."""
        ...


_SEND_METHODS = {"user": "send_to_user", "room": "send_to_room"}


async def _message(
    runtime: ActionRuntime, message: Message, state: State | None, options: HandlerOptions | None
) -> ActionResult:
    params = _params(options)
    missing = [n for n in ("text", "targetType", "source", "target") if not _text_param(params, n)]
    if missing:
        return ActionResult.failure(
            f"Missing required parameter: {missing[0]}. MESSAGE needs text, targetType "
            "(user or room), source (the service, e.g. telegram) and target (the id).",
            action="MESSAGE",
            missing=missing,
        )
    text = str(params["text"])
    target_type = str(params["targetType"]).strip().casefold()
    source = str(params["source"]).strip()
    target = str(params["target"]).strip()
    method_name = _SEND_METHODS.get(target_type)
    if method_name is None:
        return ActionResult.failure(
            f"Unknown targetType {params['targetType']!r}: use 'user' or 'room'.",
            action="MESSAGE",
            reason="unknown_target_type",
        )
    service = runtime.get_service(source)
    if service is None and source.casefold() != source:
        service = runtime.get_service(source.casefold())
    if service is None:
        return ActionResult.failure(
            f"No messaging service named {source!r} is registered, so the message was not "
            f"sent. Enable the plugin that provides {source!r} (it registers the service "
            f"with runtime.register_service({source!r}, ...)).",
            action="MESSAGE",
            reason="unknown_service",
            source=source,
        )
    send = getattr(service, method_name, None)
    if not callable(send):
        return ActionResult.failure(
            f"Service {source!r} cannot send to a {target_type}: it has no "
            f"{method_name}(id, text) method "
            "(see agentplug.actions.builtins.comms.MessagingService).",
            action="MESSAGE",
            reason="unsupported_target_type",
            source=source,
        )
    try:
        returned = send(target, text)
        if inspect.isawaitable(returned):
            await returned
    except Exception as exc:  # the service's failure is the user's answer
        return ActionResult.failure(
            f"Could not send the message to {target_type} {target!r} on {source}: {exc}",
            action="MESSAGE",
            reason="send_failed",
            source=source,
            error_type=type(exc).__name__,
        )
    return ActionResult(
        success=True,
        text=f"Message sent to {target_type} {target} on {source}.",
        data={"source": source, "targetType": target_type, "target": target},
    )


def _message_action() -> Action:
    return Action(
        name="MESSAGE",
        similes=("SEND_MESSAGE", "SEND_DM", "DIRECT_MESSAGE", "POST_MESSAGE"),
        description="Send a text message to a user or a room on a specific messaging service "
        "(for example telegram or discord), by user or room id.",
        handler=_message,
        parameters=(
            ActionParameter(name="text", description="the message to send", required=True),
            ActionParameter(
                name="targetType",
                description="'user' (direct message) or 'room' (channel / group)",
                required=True,
                schema=ParameterSchema(type="string", enum=["user", "room"]),
            ),
            ActionParameter(
                name="source",
                description="the messaging service, e.g. telegram",
                required=True,
            ),
            ActionParameter(
                name="target", description="the user or room id on that service", required=True
            ),
        ),
        examples=(
            (
                ActionExample(name="user", text="tell the ops room on telegram the deploy is done"),
                ActionExample(name="agent", text="Message sent.", actions=["MESSAGE"]),
            ),
        ),
    )


# ---------------------------------------------------------------------------
# OutputHub


@dataclass(frozen=True)
class OutputChunk:
    """One piece of a run's output; ``seq`` counts the run's chunks from 0."""

    run_id: str
    seq: int
    text: str


@dataclass(frozen=True)
class RunStatus:
    """What the hub knows about a run (for a late subscriber or a status endpoint)."""

    run_id: str
    command: str
    started: bool
    finished: bool
    exit_code: int | None
    error: str | None
    chunks: int


class _Channel:
    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        self.command = ""
        self.chunks: collections.deque[OutputChunk] = collections.deque()
        self.first_seq = 0
        self.next_seq = 0
        self.bytes = 0
        self.started = False
        self.finished = False
        self.exit_code: int | None = None
        self.error: str | None = None
        self.waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = []


_RUN_ID = re.compile(r"^[A-Za-z0-9_.:-]{1,128}$")


def _check_run_id(run_id: str) -> str:
    if not isinstance(run_id, str) or not _RUN_ID.match(run_id):
        raise ValueError(
            f"run id {run_id!r} must be 1-128 characters of letters, digits, '_', '.', ':', '-'"
        )
    return run_id


class OutputHub:
    """Fan-out of terminal output to subscribers (service ``terminal_output``).

    The producer calls :meth:`start`, :meth:`publish` for each chunk and :meth:`finish`;
    consumers iterate :meth:`subscribe`. A subscriber gets the run's backlog first (so
    subscribing just after the run started loses nothing), then live chunks, and its
    iterator ends when the run finishes. Subscribing before the run starts is allowed (pass
    the ``runId`` parameter to ``SHELL_COMMAND`` to know it in advance).

    Bounds: each run keeps at most ``max_backlog_bytes`` of output (oldest chunks dropped
    first; a subscriber that fell behind skips to the oldest kept chunk) and at most
    ``max_runs`` runs are remembered (finished runs are forgotten first, then never-started
    subscriptions; running ones never). Publishing is thread-safe; subscribers are woken on
    their own event loop.
    """

    def __init__(self, *, max_backlog_bytes: int = 1024 * 1024, max_runs: int = 64) -> None:
        if max_backlog_bytes <= 0 or max_runs <= 0:
            raise ValueError("max_backlog_bytes and max_runs must be positive")
        self.max_backlog_bytes = max_backlog_bytes
        self.max_runs = max_runs
        self._lock = threading.Lock()
        self._channels: collections.OrderedDict[str, _Channel] = collections.OrderedDict()

    # -- producer side

    def start(self, run_id: str, command: str = "") -> None:
        """Open the run ``run_id``; raise ``ValueError`` when it was already started."""
        _check_run_id(run_id)
        with self._lock:
            channel = self._channel(run_id)
            if channel.started:
                raise ValueError(f"run {run_id!r} was already started; use a new run id")
            channel.started = True
            channel.command = command
            self._channels.move_to_end(run_id)
            self._evict()

    def publish(self, run_id: str, text: str) -> None:
        """Append ``text`` to the run's output and wake its subscribers."""
        if not text:
            return
        with self._lock:
            channel = self._channels.get(run_id)
            if channel is None or channel.finished:
                return
            channel.chunks.append(OutputChunk(run_id, channel.next_seq, text))
            channel.next_seq += 1
            channel.bytes += len(text.encode("utf-8", errors="replace"))
            while channel.bytes > self.max_backlog_bytes and len(channel.chunks) > 1:
                dropped = channel.chunks.popleft()
                channel.first_seq = dropped.seq + 1
                channel.bytes -= len(dropped.text.encode("utf-8", errors="replace"))
            waiters, channel.waiters = channel.waiters, []
        _wake(waiters)

    def finish(self, run_id: str, exit_code: int | None, error: str | None = None) -> None:
        """Close the run: subscribers receive the remaining chunks, then their iterator ends."""
        with self._lock:
            channel = self._channels.get(run_id)
            if channel is None:
                return
            channel.finished = True
            channel.exit_code = exit_code
            channel.error = error
            waiters, channel.waiters = channel.waiters, []
            self._evict()
        _wake(waiters)

    # -- consumer side

    def subscribe(self, run_id: str) -> AsyncIterator[OutputChunk]:
        """Chunks of ``run_id``: backlog, then live, ending when the run finishes."""
        _check_run_id(run_id)
        with self._lock:
            channel = self._channel(run_id)
            self._evict()
        return self._iterate(channel)

    async def _iterate(self, channel: _Channel) -> AsyncIterator[OutputChunk]:
        seq = 0
        loop = asyncio.get_running_loop()
        while True:
            event: asyncio.Event | None = None
            with self._lock:
                seq = max(seq, channel.first_seq)
                pending = [c for c in channel.chunks if c.seq >= seq]
                done = channel.finished
                if not pending and not done:
                    event = asyncio.Event()
                    channel.waiters.append((loop, event))
            for chunk in pending:
                seq = chunk.seq + 1
                yield chunk
            if pending:
                continue
            if done:
                return
            assert event is not None
            await event.wait()

    def status(self, run_id: str) -> RunStatus | None:
        """What is known about ``run_id``, or ``None`` when the hub does not remember it."""
        with self._lock:
            channel = self._channels.get(run_id)
            if channel is None:
                return None
            return _status(channel)

    def runs(self) -> list[RunStatus]:
        """Every remembered run, oldest first."""
        with self._lock:
            return [_status(c) for c in self._channels.values()]

    # -- internals (lock held)

    def _channel(self, run_id: str) -> _Channel:
        channel = self._channels.get(run_id)
        if channel is None:
            channel = self._channels[run_id] = _Channel(run_id)
        return channel

    def _evict(self) -> None:
        excess = len(self._channels) - self.max_runs
        if excess <= 0:
            return
        finished = [k for k, c in self._channels.items() if c.finished]
        waiting = [k for k, c in self._channels.items() if not c.started]
        for key in (finished + waiting)[:excess]:
            channel = self._channels.pop(key)
            if not channel.finished:
                channel.finished = True
                channel.error = "forgotten by the output hub before it started"
                waiters, channel.waiters = channel.waiters, []
                _wake(waiters)


def _status(channel: _Channel) -> RunStatus:
    return RunStatus(
        run_id=channel.run_id,
        command=channel.command,
        started=channel.started,
        finished=channel.finished,
        exit_code=channel.exit_code,
        error=channel.error,
        chunks=channel.next_seq,
    )


def _wake(waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Event]]) -> None:
    for loop, event in waiters:
        # A closed loop raises RuntimeError: that subscriber is gone, nobody to wake.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(event.set)


def output_hub(runtime: object) -> OutputHub:
    """The runtime's ``terminal_output`` hub (created and registered on first use)."""
    return _get_or_register(runtime, OUTPUT_HUB_SERVICE, OutputHub, OutputHub)


# ---------------------------------------------------------------------------
# SHELL_COMMAND


def _default_cwd(runtime: AgentRuntime, settings: ShellSettings) -> Path:
    if settings.cwd:
        return Path(settings.cwd)
    configured = runtime.host.config.runtime.state_dir
    if configured:
        return Path(configured)
    store_path = getattr(runtime.host.store, "path", None)
    if isinstance(store_path, Path):
        return store_path.parent
    return Path.cwd()


def _shell_action(runtime: AgentRuntime, settings: ShellSettings) -> Action:
    async def handler(
        rt: ActionRuntime, message: Message, state: State | None, options: HandlerOptions | None
    ) -> ActionResult:
        if not settings.enabled:
            return ActionResult.failure(
                "SHELL_COMMAND is disabled: no command was run. An operator enables it with "
                "actions.shell.enabled = true (and a working directory in actions.shell.cwd).",
                action="SHELL_COMMAND",
                reason="disabled",
            )
        params = _params(options)
        command = _text_param(params, "command")
        if command is None:
            return ActionResult.failure(
                "Missing required parameter: command (the shell command line to run).",
                action="SHELL_COMMAND",
            )
        terminal = rt.get_service(TERMINAL_SERVICE)
        if terminal is None:
            try:
                terminal = LocalTerminalService(_default_cwd(runtime, settings))
            except FileNotFoundError as exc:
                return ActionResult.failure(
                    f"SHELL_COMMAND cannot run: {exc} (set actions.shell.cwd).",
                    action="SHELL_COMMAND",
                    reason="no_working_directory",
                )
        run = getattr(terminal, "run", None)
        if not callable(run):
            return ActionResult.failure(
                f"The {TERMINAL_SERVICE!r} service ({type(terminal).__name__}) has no run() "
                "method; register an agentplug.actions.terminal.TerminalService.",
                action="SHELL_COMMAND",
                reason="bad_terminal_service",
            )
        hub = output_hub(rt)
        run_id = _text_param(params, "runId") or uuid.uuid4().hex
        try:
            hub.start(run_id, command)
        except ValueError as exc:
            return ActionResult.failure(f"SHELL_COMMAND: {exc}.", action="SHELL_COMMAND")
        try:
            result = await run(
                command,
                cwd=None,
                timeout_s=settings.timeout_seconds,
                max_output_bytes=settings.max_output_bytes,
                on_output=lambda text: hub.publish(run_id, text),
            )
        except Exception as exc:  # the terminal refused or crashed: say so, close the stream
            hub.finish(run_id, None, error=str(exc))
            return ActionResult.failure(
                f"SHELL_COMMAND could not run the command: {exc}",
                action="SHELL_COMMAND",
                run_id=run_id,
                error_type=type(exc).__name__,
            )
        if not isinstance(result, TerminalResult):
            result = TerminalResult.model_validate(result, from_attributes=True)
        hub.finish(run_id, result.exit_code)
        return _shell_result(run_id, result, settings)

    return Action(
        name="SHELL_COMMAND",
        similes=("RUN_COMMAND", "RUN_SHELL", "EXEC_COMMAND", "TERMINAL"),
        description="Run a shell command line in the operator's working directory through "
        "the terminal service and report its exit code and output (output is also streamed "
        "live to subscribers).",
        handler=handler,
        parameters=(
            ActionParameter(
                name="command", description="the shell command line to run", required=True
            ),
            ActionParameter(
                name="runId",
                description="optional id for the run, to subscribe to its output stream first",
                schema=ParameterSchema(type="string", pattern=_RUN_ID.pattern),
            ),
        ),
        examples=(
            (
                ActionExample(name="user", text="run `ls -la` in the workspace"),
                ActionExample(name="agent", text="Exit code 0.", actions=["SHELL_COMMAND"]),
            ),
        ),
    )


def _shell_result(run_id: str, result: TerminalResult, settings: ShellSettings) -> ActionResult:
    data = {
        "run_id": run_id,
        "exit_code": result.exit_code,
        "output": result.output,
        "truncated": result.truncated,
        "timed_out": result.timed_out,
    }
    notes = []
    if result.truncated:
        notes.append(f"output truncated at {settings.max_output_bytes} bytes")
    if result.timed_out:
        head = f"Command killed after {settings.timeout_seconds:g} s (time limit)."
    else:
        head = f"Exit code {result.exit_code}."
    if notes:
        head += f" ({'; '.join(notes)})"
    text = f"{head}\n{result.output}" if result.output else head
    success = not result.timed_out and result.exit_code == 0
    return ActionResult(success=success, text=text, data=data)


# ---------------------------------------------------------------------------
# LOG_LEVEL


class RoomLogLevels:
    """Per-room log levels (service ``log_levels``) and the filter that applies them.

    :meth:`set` gives one room its own level. A record carrying ``room_id`` (``extra=`` or
    :func:`room_logger`) from a room with a level passes only at or above that level, whatever
    the logger. Rooms without a level, and records without ``room_id``, are unchanged.

    Lowering a room below what the managed logger (``logger_name``, default ``agentplug``)
    lets through requires lowering that logger; the service then attaches its
    :class:`RoomLevelFilter` to every handler reachable from the logger (its own, its
    ancestors' and its descendants') and the filter holds all other records of that logger
    tree to the previous threshold, so other rooms see no difference. The logger's level is
    restored when no room needs it lower. A handler added later should get :attr:`filter`.
    """

    def __init__(self, logger_name: str = "agentplug", *, max_rooms: int = 10_000) -> None:
        self.logger_name = logger_name
        self.max_rooms = max_rooms
        self.filter = RoomLevelFilter(self)
        """The :class:`logging.Filter` applying these levels (attach it to handlers)."""
        self._lock = threading.RLock()
        self._levels: collections.OrderedDict[str, int] = collections.OrderedDict()
        self._baseline: int | None = None  # threshold held for others while lowered
        self._saved_level: int = logging.NOTSET

    def set(self, room_id: str, level: int | str) -> int:
        """Set ``room_id``'s level (a number or a ``LEVELS`` name); return the number."""
        number = _level_number(level)
        with self._lock:
            self._levels[room_id] = number
            self._levels.move_to_end(room_id)
            while len(self._levels) > self.max_rooms:
                self._levels.popitem(last=False)
            self._sync_logger()
        return number

    def clear(self, room_id: str) -> bool:
        """Remove ``room_id``'s own level; return whether it had one."""
        with self._lock:
            had = self._levels.pop(room_id, None) is not None
            self._sync_logger()
        return had

    def get(self, room_id: str) -> int | None:
        """``room_id``'s own level, or ``None`` when it follows the loggers."""
        with self._lock:
            return self._levels.get(room_id)

    def rooms(self) -> dict[str, int]:
        """Every room with its own level."""
        with self._lock:
            return dict(self._levels)

    def allows(self, record: logging.LogRecord) -> bool:
        """Whether ``record`` passes (see the class docstring)."""
        room = getattr(record, "room_id", None)
        with self._lock:
            if isinstance(room, str):
                level = self._levels.get(room)
                if level is not None:
                    return record.levelno >= level
            baseline = self._baseline
        if baseline is not None and self._managed(record.name):
            return record.levelno >= baseline
        return True

    def detach(self) -> None:
        """Forget every room level, restore the logger and remove the filter from handlers."""
        with self._lock:
            self._levels.clear()
            self._sync_logger()
            for handler in self._reachable_handlers():
                handler.removeFilter(self.filter)

    def _managed(self, name: str) -> bool:
        root = self.logger_name
        return root in ("", "root") or name == root or name.startswith(root + ".")

    def _sync_logger(self) -> None:
        logger = logging.getLogger(self.logger_name)
        lowest = min(self._levels.values(), default=None)
        if self._baseline is None:
            effective = logger.getEffectiveLevel()
            if lowest is None or lowest >= effective:
                return
            self._saved_level = logger.level
            self._baseline = effective
        elif lowest is None or lowest >= self._baseline:
            logger.setLevel(self._saved_level)
            self._baseline = None
            return
        for handler in self._reachable_handlers():
            if self.filter not in handler.filters:
                handler.addFilter(self.filter)
        logger.setLevel(lowest)

    def _reachable_handlers(self) -> list[logging.Handler]:
        handlers: list[logging.Handler] = []
        current: logging.Logger | None = logging.getLogger(self.logger_name)
        while current is not None:
            handlers.extend(current.handlers)
            current = current.parent if current.propagate else None
        prefix = self.logger_name + "."
        for name, item in list(logging.root.manager.loggerDict.items()):
            if name.startswith(prefix) and isinstance(item, logging.Logger):
                handlers.extend(item.handlers)
        unique: list[logging.Handler] = []
        for handler in handlers:
            if handler not in unique:
                unique.append(handler)
        return unique


class RoomLevelFilter(logging.Filter):
    """Applies a :class:`RoomLogLevels` to records (attach to handlers)."""

    def __init__(self, levels: RoomLogLevels) -> None:
        super().__init__()
        self.levels = levels

    def filter(self, record: logging.LogRecord) -> bool:
        return self.levels.allows(record)


def room_logger(logger: logging.Logger, room_id: str) -> logging.LoggerAdapter[logging.Logger]:
    """A logger adapter whose records carry ``room_id`` (so per-room levels apply)."""
    return logging.LoggerAdapter(logger, {"room_id": room_id})


def _level_number(level: int | str) -> int:
    if isinstance(level, bool):
        raise ValueError(f"invalid log level {level!r}")
    if isinstance(level, int):
        return level
    number = LEVELS.get(level.strip().casefold())
    if number is None:
        raise ValueError(f"unknown log level {level!r}; use one of: {', '.join(_LEVEL_NAMES)}")
    return number


_LEVEL_NAMES = ("trace", "debug", "info", "warn", "error")


def room_log_levels(runtime: object) -> RoomLogLevels:
    """The runtime's ``log_levels`` service (created and registered on first use)."""
    return _get_or_register(runtime, LOG_LEVELS_SERVICE, RoomLogLevels, RoomLogLevels)


async def _log_level(
    runtime: ActionRuntime, message: Message, state: State | None, options: HandlerOptions | None
) -> ActionResult:
    raw = _text_param(_params(options), "level")
    allowed = ", ".join(_LEVEL_NAMES)
    if raw is None:
        return ActionResult.failure(
            f"Missing required parameter: level (one of {allowed}, or reset).", action="LOG_LEVEL"
        )
    name = raw.strip().casefold()
    if name not in LEVELS and name not in ("reset", "default"):
        return ActionResult.failure(
            f"Unknown log level {raw!r}: use one of {allowed} (or reset).",
            action="LOG_LEVEL",
            reason="unknown_level",
        )
    room = message.room_id
    if not room:
        return ActionResult.failure(
            "LOG_LEVEL sets the level of the current room, but this message carries no "
            "room_id; send it from the room whose level should change.",
            action="LOG_LEVEL",
            reason="no_room",
        )
    levels = room_log_levels(runtime)
    if name in ("reset", "default"):
        levels.clear(room)
        return ActionResult(
            success=True,
            text=f"Log level of room {room} reset to the default.",
            data={"room_id": room, "level": None},
        )
    number = levels.set(room, name)
    shown = "warn" if name == "warning" else name
    return ActionResult(
        success=True,
        text=f"Log level of room {room} set to {shown}; other rooms are unchanged.",
        data={"room_id": room, "level": shown, "levelno": number},
    )


def _log_level_action() -> Action:
    return Action(
        name="LOG_LEVEL",
        similes=("SET_LOG_LEVEL", "LOGLEVEL", "VERBOSITY"),
        description="Set the log level (trace, debug, info, warn, error) for the current "
        "room or session only; other rooms keep their level.",
        handler=_log_level,
        parameters=(
            ActionParameter(
                name="level",
                description="trace, debug, info, warn or error (reset clears the room's level)",
                required=True,
            ),
        ),
        examples=(
            (
                ActionExample(name="user", text="set log level to debug for this chat"),
                ActionExample(name="agent", text="Log level set to debug.", actions=["LOG_LEVEL"]),
            ),
        ),
    )


# ---------------------------------------------------------------------------
# Entry point


def builtin_actions(runtime: AgentRuntime) -> list[Action]:
    """``MESSAGE``, ``SHELL_COMMAND`` and ``LOG_LEVEL``; registers the hub and level services.

    Raises :class:`ConfigError` when ``actions.shell`` is invalid.
    """
    shell = load_settings(runtime.host.config.actions, "shell", ShellSettings)
    output_hub(runtime)
    room_log_levels(runtime)
    return [_message_action(), _shell_action(runtime, shell), _log_level_action()]
