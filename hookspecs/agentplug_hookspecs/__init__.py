"""agentplug's hook contract: every hook as a pluggy hookspec with typed models and
its semantics declared as data. Depends on pluggy and pydantic only.

(PYTEST_DONT_REWRITE: nothing here needs pytest's assertion rewriting.)
"""

from __future__ import annotations

from . import actions, agent, common, lifecycle, messages, sessions, tools
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
    deep_freeze,
    thaw,
)
from ._semantics import (
    PROJECT_NAME,
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
    "declarations_in",
    "declare",
    "deep_freeze",
    "hookspec",
    "lifecycle",
    "messages",
    "sessions",
    "thaw",
    "tools",
]
