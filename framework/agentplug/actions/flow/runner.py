"""The flow runner: execute the chosen action and run the five steps for one message.

:func:`execute_action` runs one handler (an exception becomes a failed result);
:func:`run_action_flow` selects, validates, extracts and checks parameters, executes and
delivers, recording every step in the :class:`~agentplug.actions.flow.trace.ActionTrace`
of its :class:`FlowResult`.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias, TypeVar

from pydantic import ValidationError

from agentplug.actions.flow.extraction import ParameterExtractor, StructuredParameterExtractor
from agentplug.actions.flow.parameters import ParameterValidationError, check_parameters
from agentplug.actions.flow.selection import ActionSelector, DeterministicActionSelector
from agentplug.actions.flow.trace import ActionTrace, StepStatus
from agentplug.actions.model import (
    Action,
    ActionResult,
    ActionRuntime,
    HandlerOptions,
    Message,
    State,
)
from agentplug.actions.registry import ActionRegistry

__all__ = [
    "DeliverCallback",
    "FlowOutcome",
    "FlowResult",
    "execute_action",
    "run_action_flow",
]

_T = TypeVar("_T")


async def _maybe_await(value: _T | Awaitable[_T]) -> _T:
    """Await ``value`` when a sync-or-async callable returned an awaitable."""
    if inspect.isawaitable(value):
        return await value
    return value


def _to_result(action: Action, value: object) -> ActionResult:
    """Turn what a handler returned into an :class:`ActionResult`, or explain why not."""
    if isinstance(value, ActionResult):
        return value
    if isinstance(value, Mapping):
        if "success" not in value:
            return ActionResult.failure(
                f"Action {action.name} returned a result without 'success'; every result "
                "must say whether it worked (return ActionResult(success=..., text=...))."
            )
        try:
            return ActionResult.model_validate(dict(value))
        except ValidationError as exc:
            return ActionResult.failure(
                f"Action {action.name} returned an invalid result: "
                f"{exc.errors()[0]['msg']} at {'.'.join(map(str, exc.errors()[0]['loc']))}."
            )
    return ActionResult.failure(
        f"Action {action.name} returned {type(value).__name__}, not an ActionResult; "
        "handlers must return ActionResult(success=..., text=...)."
    )


async def execute_action(
    action: Action,
    runtime: ActionRuntime,
    message: Message,
    state: State | None,
    parameters: Mapping[str, Any],
) -> ActionResult:
    """Run ``action``'s handler (sync or async); an exception becomes a failed result.

    The failed result reads ``Action failed: <error>`` and carries the exception type in
    ``data["error_type"]``.
    """
    options = HandlerOptions(parameters=dict(parameters))
    try:
        returned = await _maybe_await(action.handler(runtime, message, state, options))
    except Exception as exc:  # a handler's failure is a result, not a crash
        return ActionResult(
            success=False,
            text=f"Action failed: {exc}",
            data={"action": action.name, "error_type": type(exc).__name__},
        )
    return _to_result(action, returned)


DeliverCallback: TypeAlias = Callable[[ActionResult], Awaitable[None] | None]
"""Receives the result to send back to the user (sync or async)."""

FlowOutcome: TypeAlias = Literal["success", "failed", "no_match", "not_valid", "error"]
"""``success``/``failed``: a result was produced; ``no_match``: no action matched;
``not_valid``: every candidate's ``validate`` said no; ``error``: the selector raised."""


@dataclass
class FlowResult:
    """What one run of the flow produced, with its trace."""

    outcome: FlowOutcome
    trace: ActionTrace
    action: Action | None = None
    result: ActionResult | None = None
    parameters: dict[str, Any] = field(default_factory=dict)
    delivered: bool = False

    @property
    def ok(self) -> bool:
        """Whether an action ran and reported success."""
        return self.outcome == "success"


async def run_action_flow(
    runtime: ActionRuntime,
    registry: ActionRegistry,
    message: Message | str,
    state: State | None = None,
    *,
    selector: ActionSelector | None = None,
    extractor: ParameterExtractor | None = None,
    deliver: DeliverCallback | None = None,
) -> FlowResult:
    """Select, validate, parameterise, execute and deliver one action for ``message``.

    A plain string is treated as ``Message(text=...)``. Parameter and handler failures produce
    a failed :class:`ActionResult` that is delivered like any other (the user learns what to
    fix); when nothing matches or validates, nothing is delivered and ``result`` is ``None``.
    """
    msg = Message(text=message) if isinstance(message, str) else message
    chooser: ActionSelector = selector or DeterministicActionSelector()
    reader: ParameterExtractor = extractor or StructuredParameterExtractor()
    trace = ActionTrace()

    started = time.perf_counter()
    try:
        candidates = list(await chooser.select(registry.all(), msg, state))
    except Exception as exc:  # a faulty selector must not crash the gateway
        trace.record("select", "error", f"{type(chooser).__name__} raised: {exc}", started)
        return FlowResult("error", trace)
    if not candidates:
        trace.record("select", "skipped", f"no action matches among {len(registry)}", started)
        return FlowResult("no_match", trace)
    summary = ", ".join(f"{m.action.name} ({m.tier.name.lower()})" for m in candidates[:5])
    trace.record("select", "ok", f"candidates: {summary}", started, candidates[0].action.name)

    chosen: Action | None = None
    for candidate in candidates:
        action = candidate.action
        started = time.perf_counter()
        try:
            allowed = bool(await _maybe_await(action.validate(runtime, msg, state)))
        except Exception as exc:  # treated as "may not run"
            trace.record("validate", "error", f"validate raised: {exc}", started, action.name)
            continue
        if allowed:
            trace.record("validate", "ok", candidate.reason, started, action.name)
            chosen = action
            break
        trace.record("validate", "skipped", "validate returned false", started, action.name)
    if chosen is None:
        return FlowResult("not_valid", trace)

    started = time.perf_counter()
    try:
        raw = await reader.extract(chosen, msg, state)
    except Exception as exc:  # reported to the user as a failed result
        trace.record("extract", "error", f"{type(reader).__name__} raised: {exc}", started)
        result = ActionResult.failure(f"Could not read the parameters of {chosen.name}: {exc}")
        return await _deliver(FlowResult("failed", trace, chosen, result), deliver)
    trace.record("extract", "ok", f"found: {sorted(raw)}", started, chosen.name)

    started = time.perf_counter()
    try:
        parameters = check_parameters(chosen, raw)
    except ParameterValidationError as exc:
        trace.record("check_parameters", "failed", str(exc), started, chosen.name)
        result = ActionResult.failure(
            str(exc), action=chosen.name, parameter=exc.parameter, reason=exc.reason
        )
        return await _deliver(FlowResult("failed", trace, chosen, result), deliver)
    trace.record("check_parameters", "ok", f"valid: {sorted(parameters)}", started, chosen.name)

    started = time.perf_counter()
    result = await execute_action(chosen, runtime, msg, state, parameters)
    status: StepStatus = "ok" if result.success else "failed"
    # Result text may echo parameter values, so only its shape is logged.
    detail = f"success={result.success}, text of {len(result.text)} characters"
    trace.record("execute", status, detail, started, chosen.name)
    outcome: FlowOutcome = "success" if result.success else "failed"
    return await _deliver(FlowResult(outcome, trace, chosen, result, parameters), deliver)


async def _deliver(flow: FlowResult, deliver: DeliverCallback | None) -> FlowResult:
    started = time.perf_counter()
    name = flow.action.name if flow.action else None
    if deliver is None or flow.result is None:
        flow.trace.record("deliver", "skipped", "no deliver callback", started, name)
        return flow
    try:
        await _maybe_await(deliver(flow.result))
    except Exception as exc:  # the result exists even if delivery failed
        flow.trace.record("deliver", "error", f"deliver raised: {exc}", started, name)
        return flow
    flow.delivered = True
    flow.trace.record("deliver", "ok", "result delivered", started, name)
    return flow
