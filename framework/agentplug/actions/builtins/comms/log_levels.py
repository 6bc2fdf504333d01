"""The ``LOG_LEVEL`` built-in and per-room log levels (service ``log_levels``).

Holds the ``trace`` level, the level names, :class:`RoomLogLevels`, :class:`RoomLevelFilter`
and :func:`room_logger`.
"""

from __future__ import annotations

import collections
import logging
import threading
from collections.abc import Mapping

from agentplug.actions.builtins._shared import get_or_register, handler_params, text_param
from agentplug.actions.model import (
    Action,
    ActionExample,
    ActionParameter,
    ActionResult,
    ActionRuntime,
    HandlerOptions,
    Message,
    State,
)

__all__ = [
    "LEVELS",
    "LOG_LEVELS_SERVICE",
    "TRACE",
    "RoomLevelFilter",
    "RoomLogLevels",
    "log_level_action",
    "room_log_levels",
    "room_logger",
]

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


LOG_LEVELS_SERVICE = "log_levels"


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
    return get_or_register(runtime, LOG_LEVELS_SERVICE, RoomLogLevels, RoomLogLevels)


async def _log_level(
    runtime: ActionRuntime, message: Message, state: State | None, options: HandlerOptions | None
) -> ActionResult:
    raw = text_param(handler_params(options), "level")
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


def log_level_action() -> Action:
    """The ``LOG_LEVEL`` action: set the log level of the current room (or session)."""
    return Action(
        name="LOG_LEVEL",
        similes=("SET_LOG_LEVEL", "LOGLEVEL", "VERBOSITY"),
        description="Set the log level (trace, debug, info, warn, error) for the current "
        "room or session only; other rooms keep their level.",
        handler=_log_level,
        side_effects=True,  # changes what the room logs from now on
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
