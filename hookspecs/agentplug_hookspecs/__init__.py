"""agentplug's hook contract: every hook as a pluggy hookspec with typed models and
its semantics declared as data. Depends on pluggy and pydantic only.

The distribution ``agentplug-hookspecs`` installs it alone: a plugin that depends on it
marks its handlers with :func:`hookimpl` (the same object as ``agentplug.hookimpl``) and
type-checks them against the models of :mod:`agentplug_hookspecs.tools` and the other
hook modules, without the runtime.

(PYTEST_DONT_REWRITE: nothing here needs pytest's assertion rewriting.)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._names import PROJECT_NAME

__version__ = "0.1.0"

# Everything else loads on first use: ``import agentplug`` (and every plugin module's
# ``from agentplug import hookimpl``) then costs no pydantic model, and the hook modules
# are imported only by hosts and tools that use the catalogue.
_LAZY = {
    **dict.fromkeys(
        (
            "TRUST_MARKERS",
            "Context",
            "Event",
            "FrozenDict",
            "FrozenList",
            "HandlerContext",
            "HookModel",
            "JsonList",
            "JsonMap",
            "Result",
            "bind_handler_context",
            "current_handler_context",
            "deep_freeze",
            "thaw",
        ),
        "._model",
    ),
    **dict.fromkeys(
        (
            "Claim",
            "Collect",
            "Decide",
            "Deprecation",
            "DictMerge",
            "FailurePolicy",
            "FieldMerge",
            "HookDecl",
            "HookKind",
            "Observe",
            "Pipeline",
            "Reduction",
            "Special",
            "declarations_in",
            "declare",
            "hookspec",
        ),
        "._semantics",
    ),
    **dict.fromkeys(("HandlerOptions", "hookimpl"), "._markers"),
    "BUILTIN_SPEC_MODULES": ".catalogue",
    "builtin_declarations": ".catalogue",
}
_SUBMODULES = frozenset(
    {"actions", "agent", "common", "lifecycle", "messages", "sessions", "tools"}
)

if TYPE_CHECKING:
    from . import actions, agent, common, lifecycle, messages, sessions, tools
    from ._markers import HandlerOptions, hookimpl
    from ._model import (
        TRUST_MARKERS,
        Context,
        Event,
        FrozenDict,
        FrozenList,
        HandlerContext,
        HookModel,
        JsonList,
        JsonMap,
        Result,
        bind_handler_context,
        current_handler_context,
        deep_freeze,
        thaw,
    )
    from ._semantics import (
        Claim,
        Collect,
        Decide,
        Deprecation,
        DictMerge,
        FailurePolicy,
        FieldMerge,
        HookDecl,
        HookKind,
        Observe,
        Pipeline,
        Reduction,
        Special,
        declarations_in,
        declare,
        hookspec,
    )
    from .catalogue import BUILTIN_SPEC_MODULES, builtin_declarations


def __getattr__(name: str) -> Any:
    import importlib

    if name in _SUBMODULES:
        return importlib.import_module(f".{name}", __name__)
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'agentplug_hookspecs' has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


__all__ = [
    "BUILTIN_SPEC_MODULES",
    "PROJECT_NAME",
    "TRUST_MARKERS",
    "Claim",
    "Collect",
    "Context",
    "Decide",
    "Deprecation",
    "DictMerge",
    "Event",
    "FailurePolicy",
    "FieldMerge",
    "FrozenDict",
    "FrozenList",
    "HandlerContext",
    "HandlerOptions",
    "HookDecl",
    "HookKind",
    "HookModel",
    "JsonList",
    "JsonMap",
    "Observe",
    "Pipeline",
    "Reduction",
    "Result",
    "Special",
    "actions",
    "agent",
    "bind_handler_context",
    "builtin_declarations",
    "common",
    "current_handler_context",
    "declarations_in",
    "declare",
    "deep_freeze",
    "hookimpl",
    "hookspec",
    "lifecycle",
    "messages",
    "sessions",
    "thaw",
    "tools",
]
