"""Reducers: how the results of one hook's handlers combine into its outcome.

Which reducer a hook uses is declared in its hookspec (``HookDecl.reduction``); this
module maps each declaration type to an implementation. A new hook normally reuses a
reducer; a genuinely new combination rule is one new class registered here.
"""

from __future__ import annotations

import hashlib
import logging
from typing import Any

from agentplug_hookspecs import (
    Claim,
    Collect,
    Decide,
    DictMerge,
    Event,
    FieldMerge,
    FrozenDict,
    HookDecl,
    HookModel,
    Observe,
    Pipeline,
    Result,
    Special,
    thaw,
)
from agentplug_hookspecs.agent import AgentFinalizeOutcome, AgentFinalizeResult, AgentRunOutcome
from agentplug_hookspecs.common import ObserveOutcome
from agentplug_hookspecs.tools import (
    ToolCallEvent,
    ToolCallOutcome,
)

from agentplug.core.filters import outcome_filter
from agentplug.core.outcomes import Untouched, assemble, untouched_builder

__all__ = ["MAX_FINALIZE_ATTEMPTS", "Reducer", "reducer_for"]

log = logging.getLogger("agentplug.host")

_ATOMS = frozenset({str, int, float, bool, type(None), bytes})
_NO_PARAMS = FrozenDict()

MAX_FINALIZE_ATTEMPTS = 3
"""The most extra model passes one ``before_agent_finalize`` retry may ask for."""


class Reducer:
    """One reduction run. ``event`` is what the next handler sees (pipelines update it).

    Subclasses implement :meth:`apply` (return ``True`` to stop the chain),
    :meth:`fail_closed` and :meth:`finish`, and may implement :meth:`untouched`.
    """

    __slots__ = ("decl", "event")

    def __init__(self, decl: HookDecl, event: Event) -> None:
        self.decl = decl
        self.event = event

    @classmethod
    def untouched(cls, decl: HookDecl) -> Untouched:
        """``event -> outcome`` for a dispatch in which no handler returned anything or
        failed: what :meth:`finish` gives on a reducer that saw nothing. Built once per
        plan; subclasses avoid allocating a reducer (the hot path of hooks whose
        handlers only watch)."""
        return lambda event: cls(decl, event).finish()

    def apply(self, result: Result, plugin_id: str) -> bool:
        """Fold one handler's (validated, non-None) result in. ``True`` stops the chain."""
        raise NotImplementedError

    def fail_closed(self, plugin_id: str, reason: str) -> None:
        """A failed handler under a ``fail_closed`` policy: record a terminal block."""
        raise TypeError(f"hook {self.decl.name!r} declares no fail-closed decision")

    def finish(self) -> HookModel:
        """The reduced outcome."""
        raise NotImplementedError


class ObserveReducer(Reducer):
    """Observation hooks: nothing to combine."""

    __slots__ = ()

    def apply(self, result: Result, plugin_id: str) -> bool:
        return False

    def finish(self) -> HookModel:
        return ObserveOutcome()


class FieldMergeReducer(Reducer):
    """``first`` fields: first defined value wins; ``concat`` fields: joined in order."""

    __slots__ = ("parts", "spec", "values")

    def __init__(self, decl: HookDecl, event: Event) -> None:
        super().__init__(decl, event)
        assert isinstance(decl.reduction, FieldMerge)
        self.spec = decl.reduction
        self.values: dict[str, Any] = {}
        self.parts: dict[str, list[str]] = {}

    def apply(self, result: Result, plugin_id: str) -> bool:
        for name in self.spec.first:
            value = getattr(result, name, None)
            if value is not None and name not in self.values:
                self.values[name] = value
        for name in self.spec.concat:
            value = getattr(result, name, None)
            if value:
                self.parts.setdefault(name, []).append(value)
        return False

    def finish(self) -> HookModel:
        data = dict(self.values)
        for name, parts in self.parts.items():
            data[name] = self.spec.separator.join(parts)
        return self.decl.outcome.model_validate(data)

    @classmethod
    def untouched(cls, decl: HookDecl) -> Untouched:
        return untouched_builder(decl.outcome, {})


class DictMergeReducer(Reducer):
    """Mappings merged in priority order; a later handler overrides the same key."""

    __slots__ = ("contributors", "merged")

    def __init__(self, decl: HookDecl, event: Event) -> None:
        super().__init__(decl, event)
        self.merged: dict[str, str] = {}
        self.contributors: dict[str, str] = {}

    def apply(self, result: Result, plugin_id: str) -> bool:
        env = getattr(result, "env", {})
        for key, value in env.items():
            self.merged[key] = value
            self.contributors[key] = plugin_id
        return False

    def finish(self) -> HookModel:
        assert isinstance(self.decl.reduction, DictMerge)
        post = self.decl.reduction.post_filter
        if post is not None:
            filtered: HookModel = outcome_filter(post)(self.merged, self.contributors)
            return filtered
        return self.decl.outcome.model_validate({"env": self.merged})


class CollectReducer(Reducer):
    """Keep every plugin's result, keyed by plugin id."""

    __slots__ = ("by_plugin",)

    def __init__(self, decl: HookDecl, event: Event) -> None:
        super().__init__(decl, event)
        self.by_plugin: dict[str, list[Any]] = {}

    def apply(self, result: Result, plugin_id: str) -> bool:
        self.by_plugin.setdefault(plugin_id, []).extend(getattr(result, "actions", []))
        return False

    def finish(self) -> HookModel:
        return self.decl.outcome.model_validate({"by_plugin": self.by_plugin})

    @classmethod
    def untouched(cls, decl: HookDecl) -> Untouched:
        return untouched_builder(decl.outcome, {}, {"by_plugin": dict})


class DecideReducer(Reducer):
    """``terminal: true`` stops the chain; ``accumulate`` fields concatenate."""

    __slots__ = ("accumulated", "blocked", "by", "reason", "spec")

    def __init__(self, decl: HookDecl, event: Event) -> None:
        super().__init__(decl, event)
        assert isinstance(decl.reduction, Decide)
        self.spec = decl.reduction
        self.blocked = False
        self.reason: str | None = None
        self.by: str | None = None
        self.accumulated: dict[str, list[Any]] = {name: [] for name in self.spec.accumulate}

    def apply(self, result: Result, plugin_id: str) -> bool:
        for name in self.spec.accumulate:
            for item in getattr(result, name, None) or ():
                if isinstance(item, HookModel) and "plugin_id" in type(item).model_fields:
                    item = item.model_copy(update={"plugin_id": plugin_id})
                self.accumulated[name].append(item)
        if getattr(result, self.spec.terminal, None) is True:
            self.blocked = True
            self.reason = getattr(result, self.spec.reason, None)
            self.by = plugin_id
            return True
        return False

    def fail_closed(self, plugin_id: str, reason: str) -> None:
        self.blocked, self.reason, self.by = True, reason, plugin_id

    def finish(self) -> HookModel:
        past = _PAST[self.spec.terminal]
        data: dict[str, Any] = {
            past[0]: self.blocked,
            past[1]: self.reason,
            past[2]: self.by,
            **self.accumulated,
        }
        return self.decl.outcome.model_validate(data)

    @classmethod
    def untouched(cls, decl: HookDecl) -> Untouched:
        spec = decl.reduction
        assert isinstance(spec, Decide)
        flag, reason, who = _PAST[spec.terminal]
        return untouched_builder(
            decl.outcome,
            {flag: False, reason: None, who: None},
            dict.fromkeys(spec.accumulate, list),
        )


# Outcome field names for a terminal verb: (flag, reason, who).
_PAST = {
    "block": ("blocked", "block_reason", "blocked_by"),
    "cancel": ("cancelled", "cancel_reason", "cancelled_by"),
}


class PipelineReducer(Reducer):
    """Each handler sees the latest ``value``; ``terminal: true`` stops the chain."""

    __slots__ = ("by", "changed_by", "metadata", "reason", "spec", "stopped", "value")

    def __init__(self, decl: HookDecl, event: Event) -> None:
        super().__init__(decl, event)
        assert isinstance(decl.reduction, Pipeline)
        self.spec = decl.reduction
        self.value: Any = getattr(event, self.spec.value)
        self.changed_by: list[str] = []
        self.stopped = False
        self.reason: str | None = None
        self.by: str | None = None
        self.metadata: Any = None

    def apply(self, result: Result, plugin_id: str) -> bool:
        terminal = self.spec.terminal
        if terminal is not None and getattr(result, terminal, None) is True:
            self.stopped, self.by = True, plugin_id
            self.reason = getattr(result, f"{terminal}_reason", None)
            self.metadata = getattr(result, "metadata", None)
            return True
        value = getattr(result, self.spec.value, None)
        if value is not None:
            self.changed_by.append(plugin_id)
            self.event = self.event.replace(**{self.spec.value: value})
            # Keep the event's frozen copy, not the plugin's object: the outcome is then
            # exactly what later handlers saw, whatever the plugin does with its own.
            self.value = getattr(self.event, self.spec.value)
        return False

    def finish(self) -> HookModel:
        data: dict[str, Any] = {self.spec.value: thaw_model(self.value)}
        data["changed_by"] = self.changed_by
        if self.spec.terminal is not None:
            flag, reason, who = _PAST[self.spec.terminal]
            data.update({flag: self.stopped, reason: self.reason, who: self.by})
            if self.metadata is not None:
                data["metadata"] = self.metadata
        fields = self.decl.outcome.model_fields
        return self.decl.outcome.model_validate({k: v for k, v in data.items() if k in fields})

    @classmethod
    def untouched(cls, decl: HookDecl) -> Untouched:
        spec = decl.reduction
        assert isinstance(spec, Pipeline)
        constants: dict[str, Any] = {}
        if spec.terminal is not None:
            flag, reason, who = _PAST[spec.terminal]
            constants = {flag: False, reason: None, who: None}
        return untouched_builder(
            decl.outcome, constants, {"changed_by": list}, (spec.value, spec.value, thaw_model)
        )


def thaw_model(value: Any) -> Any:
    """Plain (mutable) copy of a frozen JSON-like value; models are returned as is."""
    if type(value) in _ATOMS:
        return value
    return value if isinstance(value, HookModel) else thaw(value)


class ClaimReducer(Reducer):
    """The first ``handled`` result wins; unhandled ones may rewrite a field."""

    __slots__ = ("by", "rewritten", "spec", "winner")

    def __init__(self, decl: HookDecl, event: Event) -> None:
        super().__init__(decl, event)
        assert isinstance(decl.reduction, Claim)
        self.spec = decl.reduction
        self.winner: Result | None = None
        self.by: str | None = None
        self.rewritten: Any = None

    def apply(self, result: Result, plugin_id: str) -> bool:
        if getattr(result, self.spec.flag, False) is True:
            self.winner, self.by = result, plugin_id
            return True
        rewrite = self.spec.rewrite
        if rewrite is not None:
            value = getattr(result, rewrite, None)
            if value is not None:
                self.rewritten = value
                self.event = self.event.replace(**{rewrite: value})
        return False

    def finish(self) -> HookModel:
        fields = self.decl.outcome.model_fields
        data: dict[str, Any] = {}
        if self.winner is not None:
            data = {k: v for k, v in self.winner.model_dump().items() if k in fields}
            data.update(handled=True, plugin_id=self.by)
        if self.spec.rewrite is not None and self.spec.rewrite in fields:
            latest = getattr(self.event, self.spec.rewrite, None)
            if data.get(self.spec.rewrite) is None:
                data[self.spec.rewrite] = latest
        return self.decl.outcome.model_validate(data)


class ToolCallReducer(Reducer):
    """``before_tool_call``: params rewrite, terminal block, first approval wins."""

    __slots__ = ("approval", "blocked", "by", "params", "reason", "rewritten")

    def __init__(self, decl: HookDecl, event: Event) -> None:
        super().__init__(decl, event)
        self.params: Any = getattr(event, "params", {})
        self.blocked = False
        self.reason: str | None = None
        self.by: str | None = None
        self.approval: Any = None

    def apply(self, result: Result, plugin_id: str) -> bool:
        if getattr(result, "block", None) is True:
            self.blocked, self.by = True, plugin_id
            self.reason = (
                getattr(result, "block_reason", None) or f"blocked by plugin {plugin_id!r}"
            )
            return True
        params = getattr(result, "params", None)
        # Once an approval was requested the parameters are frozen: the person deciding
        # must approve exactly what will run.
        if params is not None and self.approval is None:
            rewritten: ToolCallEvent = self.event.replace(params=params)
            self.event = rewritten
            self.params = rewritten.params  # the frozen copy later handlers see
        request = getattr(result, "require_approval", None)
        if request is not None and self.approval is None:
            # The runtime, not the plugin, says who asked.
            self.approval = request.model_copy(update={"plugin_id": plugin_id})
        return False

    def fail_closed(self, plugin_id: str, reason: str) -> None:
        self.blocked, self.by, self.reason = True, plugin_id, reason

    @classmethod
    def untouched(cls, decl: HookDecl) -> Untouched:
        fields = {"params", "blocked", "block_reason", "blocked_by", "approval"}
        new, put = object.__new__, object.__setattr__

        def untouched(event: Event) -> HookModel:
            # ``assemble`` inlined: this runs once per tool call whose handlers all passed.
            outcome = new(ToolCallOutcome)
            put(
                outcome,
                "__dict__",
                {
                    "params": getattr(event, "params", _NO_PARAMS),
                    "blocked": False,
                    "block_reason": None,
                    "blocked_by": None,
                    "approval": None,
                },
            )
            put(outcome, "__pydantic_fields_set__", fields.copy())
            put(outcome, "__pydantic_extra__", None)
            put(outcome, "__pydantic_private__", None)
            return outcome

        return untouched

    def finish(self) -> HookModel:
        # Every value here comes from validated models, so the outcome is assembled
        # without a second validation (the hot path of every tool call). ``params`` is
        # the read-only copy the last handler saw; ``thaw()`` gives a mutable one.
        return assemble(
            ToolCallOutcome,
            {
                "params": self.params,
                "blocked": self.blocked,
                "block_reason": self.reason,
                "blocked_by": self.by,
                "approval": self.approval,
            },
        )


class AgentRunReducer(Reducer):
    """``before_agent_run``: the first block wins; invalid shapes already failed closed."""

    __slots__ = ("outcome",)

    def __init__(self, decl: HookDecl, event: Event) -> None:
        super().__init__(decl, event)
        self.outcome = AgentRunOutcome()

    def apply(self, result: Result, plugin_id: str) -> bool:
        if getattr(result, "outcome", None) == "block":
            self.outcome = AgentRunOutcome(
                outcome="block",
                reason=getattr(result, "reason", None),
                message=getattr(result, "message", None),
                blocked_by=plugin_id,
            )
            return True
        return False

    def fail_closed(self, plugin_id: str, reason: str) -> None:
        self.outcome = AgentRunOutcome(outcome="block", reason=reason, blocked_by=plugin_id)

    def finish(self) -> HookModel:
        return self.outcome


class AgentFinalizeReducer(Reducer):
    """``before_agent_finalize``: any finalize wins; else revise reasons concatenate."""

    __slots__ = ("finalize_reasons", "finalizers", "reasons", "retry", "revisers")

    def __init__(self, decl: HookDecl, event: Event) -> None:
        super().__init__(decl, event)
        self.finalizers: list[str] = []
        self.finalize_reasons: list[str] = []
        self.revisers: list[str] = []
        self.reasons: list[str] = []
        self.retry: Any = None

    def apply(self, result: Result, plugin_id: str) -> bool:
        assert isinstance(result, AgentFinalizeResult)
        if result.action == "finalize":
            self.finalizers.append(plugin_id)
            if result.reason:
                self.finalize_reasons.append(result.reason)
        else:
            self.revisers.append(plugin_id)
            if result.reason:
                self.reasons.append(result.reason)
            if self.retry is None and result.retry is not None:
                retry = result.retry
                key = (
                    retry.idempotency_key
                    or hashlib.sha256(retry.instruction.encode("utf-8")).hexdigest()[:16]
                )
                wanted = retry.max_attempts or 1
                if wanted > MAX_FINALIZE_ATTEMPTS:
                    log.warning(
                        "hook before_agent_finalize: plugin %s asked for max_attempts=%d; "
                        "capped at %d (the most a retry may ask for)",
                        plugin_id,
                        wanted,
                        MAX_FINALIZE_ATTEMPTS,
                    )
                    wanted = MAX_FINALIZE_ATTEMPTS
                self.retry = retry.model_copy(
                    update={"idempotency_key": key, "max_attempts": wanted}
                )
        return False

    def finish(self) -> HookModel:
        if self.finalizers:
            return AgentFinalizeOutcome(
                action="finalize",
                reason="\n\n".join(self.finalize_reasons) or None,
                decided_by=self.finalizers,
            )
        if self.revisers:
            return AgentFinalizeOutcome(
                action="revise",
                reason="\n\n".join(self.reasons) or None,
                retry=self.retry,
                decided_by=self.revisers,
            )
        return AgentFinalizeOutcome()


_BY_TYPE: dict[type, type[Reducer]] = {
    Observe: ObserveReducer,
    FieldMerge: FieldMergeReducer,
    DictMerge: DictMergeReducer,
    Collect: CollectReducer,
    Decide: DecideReducer,
    Pipeline: PipelineReducer,
    Claim: ClaimReducer,
}
_SPECIAL: dict[str, type[Reducer]] = {
    "tool_call": ToolCallReducer,
    "agent_run": AgentRunReducer,
    "agent_finalize": AgentFinalizeReducer,
}


def reducer_for(decl: HookDecl) -> type[Reducer]:
    """The reducer class implementing ``decl.reduction``."""
    red = decl.reduction
    if isinstance(red, Special):
        try:
            return _SPECIAL[red.name]
        except KeyError:
            raise LookupError(
                f"hook {decl.name!r} declares special reducer {red.name!r}, which the runtime "
                f"does not provide; known: {sorted(_SPECIAL)}"
            ) from None
    for cls in type(red).__mro__:
        if cls in _BY_TYPE:
            return _BY_TYPE[cls]
    raise LookupError(f"hook {decl.name!r}: no reducer for {type(red).__name__}")
