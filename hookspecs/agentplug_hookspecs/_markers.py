"""The ``@hookimpl`` marker plugin authors use.

It lives in the contract so that a plugin depending on ``agentplug-hookspecs`` alone can
mark (and type-check) its handlers; ``agentplug.hookimpl`` is this very object, so a
plugin may import it from either package. Importing this module loads pluggy only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar, overload

import pluggy

from ._names import PROJECT_NAME

__all__ = [
    "MAX_TIMEOUT_MS",
    "OPTIONS_ATTR",
    "HandlerOptions",
    "check_timeout_ms",
    "hookimpl",
    "options_of",
]

MAX_TIMEOUT_MS = 600_000
"""Upper bound of every configured handler timeout (10 minutes)."""

F = TypeVar("F", bound=Callable[..., Any])
_pluggy_marker = pluggy.HookimplMarker(PROJECT_NAME)
OPTIONS_ATTR = "agentplug_options"


@dataclass(frozen=True, slots=True)
class HandlerOptions:
    """Author-level options of one handler."""

    priority: int = 0
    """Higher runs first; equal priorities keep registration order."""
    timeout_ms: int | None = None
    """The author's time budget (operator config may override it)."""
    thread: bool = False
    """Run a *synchronous* handler in a worker thread so a blocking call can time out."""


def check_timeout_ms(value: object, where: str) -> int | None:
    """Validate a timeout: ``None`` or a positive int of at most 600 000 ms."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= MAX_TIMEOUT_MS:
        raise ValueError(
            f"{where}: timeout_ms must be a positive integer of at most {MAX_TIMEOUT_MS} "
            f"(milliseconds); got {value!r}"
        )
    return value


def _check_priority(value: object, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{where}: priority must be an integer; got {value!r}")
    return value


@overload
def hookimpl(function: F, /) -> F: ...


@overload
def hookimpl(
    *,
    priority: int = 0,
    timeout_ms: int | None = None,
    thread: bool = False,
    optional: bool = False,
    specname: str | None = None,
) -> Callable[[F], F]: ...


def hookimpl(
    function: F | None = None,
    /,
    *,
    priority: int = 0,
    timeout_ms: int | None = None,
    thread: bool = False,
    optional: bool = False,
    specname: str | None = None,
) -> F | Callable[[F], F]:
    """Mark a function or method as a hook implementation.

    The function's name is the hook (or pass ``specname``). It may be sync or async and
    takes any subset of the hook's arguments (``event``, ``ctx``)::

        @hookimpl(priority=50, timeout_ms=5_000)
        async def before_tool_call(event, ctx):
            ...

    ``optional=True`` lets a plugin implement a hook that may not be declared (for
    example one added by another package); otherwise an unknown hook is refused.
    """

    def mark(fn: F) -> F:
        where = f"@hookimpl on {getattr(fn, '__qualname__', fn)!r}"
        options = HandlerOptions(
            priority=_check_priority(priority, where),
            timeout_ms=check_timeout_ms(timeout_ms, where),
            thread=thread,
        )
        _pluggy_marker(fn, optionalhook=optional, specname=specname)
        setattr(fn, OPTIONS_ATTR, options)
        return fn

    if function is not None:
        return mark(function)
    return mark


def options_of(function: Callable[..., Any]) -> HandlerOptions:
    """The options attached by :func:`hookimpl` (defaults when absent)."""
    options = getattr(function, OPTIONS_ATTR, None)
    return options if isinstance(options, HandlerOptions) else HandlerOptions()
