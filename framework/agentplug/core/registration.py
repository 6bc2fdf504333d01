"""Turning plugin objects into pluggy registrations: ids, ``api.on`` handlers, signatures."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import pluggy
from agentplug_hookspecs import PROJECT_NAME

from agentplug.core.records import HandlerOwner

__all__ = [
    "HookRelayManager",
    "OnHandler",
    "default_id",
    "display_metadata",
    "has_hookimpls",
    "positional_wrapper",
    "register_callable",
    "signature_message",
]

_IMPL_OPTS: dict[str, Any] = {
    "wrapper": False,
    "hookwrapper": False,
    "optionalhook": False,
    "tryfirst": False,
    "trylast": False,
    "specname": None,
}


class OnHandler:
    """A pluggy plugin object carrying one ``api.on(...)`` handler."""

    def __init__(self, hook: str, function: Callable[..., Any]) -> None:
        self.hook_name = hook
        setattr(self, hook, function)


class HookRelayManager(pluggy.PluginManager):
    """pluggy's manager, taught to read ``api.on(...)`` handler objects."""

    def parse_hookimpl_opts(self, plugin: object, name: str) -> Any:
        if isinstance(plugin, OnHandler):
            return dict(_IMPL_OPTS) if name == plugin.hook_name else None
        return super().parse_hookimpl_opts(plugin, name)


@dataclass(frozen=True)
class CallShape:
    """What a caller must pass to a callable: its positional parameters without a default
    (names, in order), whether it takes ``*args``, and its keyword-only parameters without
    a default (which a positional caller can never pass).

    The one rule for every callback agentplug calls (hook handlers, trusted policies,
    session cleanup callbacks): only parameters without a default count, so a defaulted
    one keeps its default (``lambda event, pid=pid: ...`` binds a loop variable).
    """

    required: tuple[str, ...]
    var_positional: bool
    keyword_only: tuple[str, ...]


def call_shape(function: Callable[..., Any]) -> CallShape | None:
    """The :class:`CallShape` of ``function`` (``None`` when it has no signature)."""
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):
        return None
    params = list(signature.parameters.values())
    return CallShape(
        tuple(
            p.name
            for p in params
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty
        ),
        any(p.kind is p.VAR_POSITIONAL for p in params),
        tuple(p.name for p in params if p.kind is p.KEYWORD_ONLY and p.default is p.empty),
    )


def positional_wrapper(function: Callable[..., Any]) -> Callable[..., Any]:
    """Adapt an ``api.on`` handler to the ``(event, ctx)`` a hook passes.

    Only parameters without a default count, by position, whatever their names: none gets
    nothing, one gets the event, two get the event and the context, ``*args`` gets both.
    A defaulted parameter keeps its default (``lambda event, pid=pid: ...`` binds a loop
    variable). Raises ``TypeError`` when the handler requires more than a hook passes.
    """
    shape = call_shape(function)
    if shape is None:
        return lambda event, ctx: function(event, ctx)
    if len(shape.required) > 2 or shape.keyword_only:
        extra = [*shape.required[2:], *shape.keyword_only]
        raise TypeError(
            f"handler {getattr(function, '__qualname__', function)!r} requires argument(s) "
            f"{extra} that a hook never passes; handlers receive (event, ctx)"
        )
    names, has_var, required = shape.required, shape.var_positional, shape.required
    # pluggy passes arguments by the names of the parameters without defaults, and binds
    # only functions and bound methods (a partial or a callable object needs a wrapper).
    hookable = inspect.isfunction(function) or inspect.ismethod(function)
    if hookable and not has_var and names in {(), ("event",), ("event", "ctx")}:
        return function
    if has_var or len(required) == 2:
        return lambda event, ctx: function(event, ctx)
    if len(required) == 1:
        return lambda event: function(event)
    return lambda: function()


def default_id(plugin: object) -> str:
    for attr in ("plugin_id", "PLUGIN_ID"):
        value = getattr(plugin, attr, None)
        if isinstance(value, str) and value:
            return value
    name = getattr(plugin, "__name__", None) or type(plugin).__name__
    return str(name).rsplit(".", 1)[-1]


def display_metadata(plugin: object) -> tuple[str | None, str | None]:
    """The plugin object's display ``name`` and ``description`` (non-empty strings only)."""
    found: list[str | None] = []
    for attr in ("name", "description"):
        value = getattr(plugin, attr, None)
        found.append(value.strip() if isinstance(value, str) and value.strip() else None)
    return found[0], found[1]


def has_hookimpls(plugin: object) -> bool:
    for attr in dir(plugin):
        if attr.startswith("__"):
            continue
        try:
            value = getattr(plugin, attr)
        except Exception:
            continue
        if getattr(value, f"{PROJECT_NAME}_impl", None) is not None:
            return True
    return False


def register_callable(plugin: object) -> Callable[[Any], Any] | None:
    register = getattr(plugin, "register", None)
    if callable(register):
        return register  # type: ignore[no-any-return]
    if inspect.isfunction(plugin):
        return plugin  # a bare ``register(api)`` function as the entry point
    return None


def signature_message(text: str) -> str:
    return (
        f"{text.strip()} - hook implementations take a subset of the hookspec's arguments "
        "(`event`, `ctx`)"
    )


def has_async_handler(relay: Any, owners: Mapping[str, HandlerOwner], plugin_id: str) -> bool:
    """Whether ``plugin_id`` put an ``async`` handler on the pluggy hook ``relay`` (a
    synchronous hook ignores it)."""
    for impl in relay.get_hookimpls():
        owner = owners[impl.plugin_name]
        if owner.plugin_id == plugin_id and (
            owner.is_async or inspect.iscoroutinefunction(impl.function)
        ):
            return True
    return False
