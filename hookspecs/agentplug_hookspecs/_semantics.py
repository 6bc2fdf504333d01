"""Hook semantics as data: kind, timeout, failure policy, gates, reduction.

The runtime reads these declarations instead of hard-coding per-hook behaviour. A
maintainer adding a hook writes one hookspec function decorated with :func:`declare`.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, TypeVar

import pluggy

from ._model import Context, Event, HookModel, Result
from ._names import PROJECT_NAME

__all__ = [
    "PROJECT_NAME",
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
]

_VERSION = re.compile(r"\d+(?:\.\d+){0,2}")

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
"""pluggy's hookspec marker for the ``agentplug`` project."""

F = TypeVar("F", bound=Callable[..., Any])


class HookKind(enum.StrEnum):
    """How handlers of a hook run and combine (HOOKS.md §3 "Kinds")."""

    DECIDE = "decide"
    """Sequential; a terminal decision stops the chain."""
    PIPELINE = "pipeline"
    """Sequential; each handler sees the latest value of the higher-priority ones."""
    MERGE = "merge"
    """Sequential; results are combined."""
    CLAIM = "claim"
    """Sequential; the first ``handled`` result wins (pluggy ``firstresult``)."""
    OBSERVE = "observe"
    """Concurrent; results ignored; failures never change what the host does."""
    SYNC = "sync"
    """Synchronous pipeline; async handlers are warned about and ignored."""


class FailurePolicy(enum.StrEnum):
    """What a failed handler (raised, timed out, wrong shape) means (HOOKS.md §2.4)."""

    FAIL_CLOSED = "fail_closed"
    """The failure is a terminal block/deny decision."""
    SKIP = "skip"
    """Log it and ignore that handler's result; keep the others'."""
    OBSERVE = "observe"
    """Log and continue (observation hooks)."""


# -- reductions ----------------------------------------------------------------------
# Each reduction is plain data; the runtime maps its type to a reducer implementation.


@dataclass(frozen=True)
class Reduction:
    """Base of reduction declarations."""

    def describe(self) -> str:
        """One-line human description for the hook reference."""
        raise NotImplementedError


@dataclass(frozen=True)
class Observe(Reduction):
    """Results are ignored."""

    def describe(self) -> str:
        return "results ignored; handlers run concurrently"


@dataclass(frozen=True)
class FieldMerge(Reduction):
    """Combine result fields: ``first`` keep the first defined value (highest priority);
    ``concat`` concatenate defined values in priority order joined by ``separator``."""

    first: tuple[str, ...] = ()
    concat: tuple[str, ...] = ()
    separator: str = "\n\n"

    def describe(self) -> str:
        parts = []
        if self.first:
            parts.append(f"first defined value wins for {', '.join(self.first)}")
        if self.concat:
            parts.append(
                f"{', '.join(self.concat)} concatenated in priority order "
                f"(joined by {self.separator!r})"
            )
        return "; ".join(parts)


@dataclass(frozen=True)
class DictMerge(Reduction):
    """Merge returned mappings in priority order; later (lower-priority) handlers
    override the same key; then the runtime filter named ``post_filter`` applies."""

    post_filter: str | None = None

    def describe(self) -> str:
        text = "mappings merged in priority order; lower-priority handlers override a key"
        if self.post_filter:
            text += f"; then filtered by the {self.post_filter!r} filter"
        return text


@dataclass(frozen=True)
class Collect(Reduction):
    """Every handler's result is kept, with the plugin id that returned it."""

    def describe(self) -> str:
        return "every result collected with its plugin id, in priority order"


@dataclass(frozen=True)
class Decide(Reduction):
    """``terminal`` (a boolean field) set to true stops the chain; ``false`` is no
    decision. ``reason`` names the field carrying the reason; ``accumulate`` lists
    list-valued fields concatenated in priority order."""

    terminal: str = "block"
    reason: str = "block_reason"
    accumulate: tuple[str, ...] = ()

    def describe(self) -> str:
        text = f"`{self.terminal}: true` is terminal; `{self.terminal}: false` is no decision"
        if self.accumulate:
            text += f"; {', '.join(self.accumulate)} accumulate in priority order"
        return text


@dataclass(frozen=True)
class Pipeline(Reduction):
    """Each handler sees the latest ``value`` field produced by higher-priority
    handlers; ``terminal`` (e.g. ``cancel``) true stops the chain."""

    value: str
    terminal: str | None = "cancel"

    def describe(self) -> str:
        text = f"each handler sees the latest `{self.value}`"
        if self.terminal:
            text += f"; `{self.terminal}: true` is terminal, `{self.terminal}: false` no decision"
        return text


@dataclass(frozen=True)
class Claim(Reduction):
    """The first result whose ``flag`` field is true wins; the rest do not run."""

    flag: str = "handled"
    rewrite: str | None = None
    """Optional field that unhandled results may rewrite for lower handlers."""

    def describe(self) -> str:
        text = f"first result with `{self.flag}: true` wins; lower handlers do not run"
        if self.rewrite:
            text += f"; unhandled results may rewrite `{self.rewrite}` for lower handlers"
        return text


@dataclass(frozen=True)
class Special(Reduction):
    """A reducer written for this hook alone (named ``name`` in the runtime)."""

    name: str
    summary: str

    def describe(self) -> str:
        return self.summary


@dataclass(frozen=True)
class Deprecation:
    """A deprecated hook: what to use instead, the release that removes it, and whether
    it aliases another hook.

    The runtime warns each plugin that implements the hook once, when it registers,
    naming both the replacement and the removal version; ``agentplug hooks`` and the
    hook reference show them too (docs/maintainers.md, "Deprecate a hook").
    """

    replacement: str
    """What to use instead: a hook name, or a short phrase naming several."""
    alias_of: str | None = None
    """When set, handlers of this hook run as handlers of ``alias_of``."""
    removed_in: str | None = None
    """The ``agentplug-hookspecs`` version that removes the hook (``"1.0"``); every
    built-in deprecation sets it (a test checks)."""

    def __post_init__(self) -> None:
        if not self.replacement.strip():
            raise ValueError("Deprecation: name the replacement")
        if self.removed_in is not None and not _VERSION.fullmatch(self.removed_in):
            raise ValueError(
                f"Deprecation: removed_in must be a release number such as '1.0'; "
                f"got {self.removed_in!r}"
            )

    def notice(self) -> str:
        """``removed in agentplug-hookspecs 1.0; use X instead`` (the warning's tail)."""
        when = (
            f"removed in agentplug-hookspecs {self.removed_in}"
            if self.removed_in
            else "no removal release set"
        )
        return f"{when}; use {self.replacement} instead"


@dataclass(frozen=True)
class HookDecl:
    """Everything the runtime needs to know about one hook."""

    name: str
    kind: HookKind
    event: type[Event]
    ctx: type[Context]
    result: type[Result] | None
    outcome: type[HookModel]
    reduction: Reduction
    group: str
    default_timeout_ms: int | None = None
    failure: FailurePolicy = FailurePolicy.SKIP
    conversation_gate: bool = False
    prompt_gate: bool = False
    deprecation: Deprecation | None = None
    doc: str = ""
    optional: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def firstresult(self) -> bool:
        """Claim hooks are pluggy ``firstresult`` hookspecs."""
        return self.kind is HookKind.CLAIM

    @property
    def concurrent(self) -> bool:
        """Observation hooks run their handlers concurrently."""
        return self.kind is HookKind.OBSERVE


_DECL_ATTR = "agentplug_decl"


def declare(
    *,
    kind: HookKind,
    event: type[Event],
    ctx: type[Context],
    result: type[Result] | None,
    outcome: type[HookModel],
    reduction: Reduction,
    group: str,
    default_timeout_ms: int | None = 30_000,
    failure: FailurePolicy | None = None,
    conversation_gate: bool = False,
    prompt_gate: bool = False,
    deprecation: Deprecation | None = None,
) -> Callable[[F], F]:
    """Declare a hook: mark ``fn`` as a pluggy hookspec and attach its semantics.

    ``failure`` defaults to ``observe`` for observation hooks and ``skip`` otherwise.
    The function's docstring is the hook's reference text and is required.
    """

    def mark(fn: F) -> F:
        if not (fn.__doc__ or "").strip():
            raise TypeError(f"hookspec {fn.__name__!r} needs a docstring: it is the reference")
        policy = failure or (
            FailurePolicy.OBSERVE if kind is HookKind.OBSERVE else FailurePolicy.SKIP
        )
        decl = HookDecl(
            name=fn.__name__,
            kind=kind,
            event=event,
            ctx=ctx,
            result=result,
            outcome=outcome,
            reduction=reduction,
            group=group,
            default_timeout_ms=None if kind is HookKind.SYNC else default_timeout_ms,
            failure=policy,
            conversation_gate=conversation_gate,
            prompt_gate=prompt_gate,
            deprecation=deprecation,
            doc=(fn.__doc__ or "").strip(),
        )
        setattr(fn, _DECL_ATTR, decl)
        hookspec(firstresult=kind is HookKind.CLAIM)(fn)
        return fn

    return mark


def observe(
    *,
    event: type[Event],
    ctx: type[Context],
    group: str,
    default_timeout_ms: int | None = 30_000,
    conversation_gate: bool = False,
    deprecation: Deprecation | None = None,
) -> Callable[[F], F]:
    """Declare an observation hook: concurrent, results ignored, failures only logged."""
    from .common import ObserveOutcome

    return declare(
        kind=HookKind.OBSERVE,
        event=event,
        ctx=ctx,
        result=None,
        outcome=ObserveOutcome,
        reduction=Observe(),
        group=group,
        default_timeout_ms=default_timeout_ms,
        conversation_gate=conversation_gate,
        deprecation=deprecation,
    )


def declarations_in(namespace: ModuleType | type | object) -> Iterable[HookDecl]:
    """Yield the declarations of every declared hookspec found in ``namespace``."""
    for attr in dir(namespace):
        decl = getattr(getattr(namespace, attr, None), _DECL_ATTR, None)
        if isinstance(decl, HookDecl):
            yield decl
