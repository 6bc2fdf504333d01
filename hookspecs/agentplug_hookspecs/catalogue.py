"""The built-in hook catalogue: every hook of HOOKS.md §3, grouped by module."""

from __future__ import annotations

from types import ModuleType

from . import actions, agent, lifecycle, messages, sessions, tools
from ._semantics import HookDecl, declarations_in

BUILTIN_SPEC_MODULES: tuple[ModuleType, ...] = (
    agent,
    tools,
    messages,
    sessions,
    lifecycle,
    actions,
)
"""Modules holding the built-in hookspecs, in reference order."""


def builtin_declarations() -> dict[str, HookDecl]:
    """Every built-in hook declaration keyed by hook name, in reference order."""
    out: dict[str, HookDecl] = {}
    for module in BUILTIN_SPEC_MODULES:
        for decl in sorted(declarations_in(module), key=lambda d: _source_line(module, d)):
            out[decl.name] = decl
    return out


def _source_line(module: ModuleType, decl: HookDecl) -> int:
    fn = getattr(module, decl.name)
    code = getattr(fn, "__code__", None)
    return code.co_firstlineno if code is not None else 0
