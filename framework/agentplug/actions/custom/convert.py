"""Turning a definition into something that runs: an :class:`Action` or a test handler.

Both run the definition's handler the same way: declared parameters only, as strings;
a missing required parameter fails before any I/O; a raised error becomes
``Action failed: <error>``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Coroutine, Mapping
from typing import Any

from agentplug.actions.custom.models import CustomActionDef, TestOutput
from agentplug.actions.custom.services import CustomActionServices
from agentplug.actions.handler_output import HandlerOutput
from agentplug.actions.http_handler import HttpHandlerDef
from agentplug.actions.model import (
    Action,
    ActionParameter,
    ActionResult,
    ActionRuntime,
    HandlerOptions,
    Message,
    State,
)
from agentplug.actions.shell_handler import ShellHandlerDef

__all__ = ["build_test_handler", "def_to_action"]


def _string_params(defn: CustomActionDef, raw: Mapping[str, Any]) -> dict[str, str]:
    """Declared parameters only, as strings (custom-action parameters are all strings)."""
    params: dict[str, str] = {}
    for name in defn.declared_names:
        value = raw.get(name)
        if value is None:
            continue
        if isinstance(value, bool):
            params[name] = "true" if value else "false"
        elif isinstance(value, str | int | float):
            params[name] = str(value)
        else:
            params[name] = json.dumps(value, ensure_ascii=False)
    return params


def _missing_required(defn: CustomActionDef, params: Mapping[str, str]) -> str | None:
    for param in defn.parameters:
        if param.required and not params.get(param.name):
            return param.name
    return None


async def _run_handler(
    defn: CustomActionDef, params: Mapping[str, str], services: CustomActionServices
) -> HandlerOutput:
    handler = defn.handler
    declared = defn.declared_names
    if isinstance(handler, HttpHandlerDef):
        return await services.http(handler, params, declared)
    if isinstance(handler, ShellHandlerDef):
        return await services.shell(handler, params, declared)
    return await services.code(handler, params)


async def _invoke(
    defn: CustomActionDef, raw: Mapping[str, Any], services: CustomActionServices
) -> tuple[HandlerOutput, dict[str, str], bool]:
    """Check required parameters, then run the handler; never raises.

    Returns the output, the string parameters used, and whether the handler completed
    (``False`` when a required parameter was missing, i.e. before any I/O, or when it raised).
    """
    params = _string_params(defn, raw)
    missing = _missing_required(defn, params)
    if missing is not None:
        return (
            HandlerOutput(ok=False, output=f"Missing required parameter: {missing}"),
            params,
            False,
        )
    try:
        output = await _run_handler(defn, params, services)
    except Exception as exc:  # a back-end failure is the action's failure, not the host's
        return HandlerOutput(ok=False, output=f"Action failed: {exc}"), params, False
    return output, params, True


def def_to_action(
    defn: CustomActionDef | Mapping[str, Any], *, services: CustomActionServices | None = None
) -> Action:
    """Convert one definition into an :class:`Action`.

    Every parameter is typed ``string``, ``validate`` always passes and ``side_effects``
    is the definition's ``sideEffects`` (``true`` when left out). The handler returns a
    failed ``Missing required parameter: <name>`` before doing any I/O, otherwise
    ``ActionResult(text=output, success=ok, data={"action_id": id, "params": params})``; a
    raised error becomes the failed result ``Action failed: <error>``.
    """
    definition = defn if isinstance(defn, CustomActionDef) else CustomActionDef.model_validate(defn)
    backends = services if services is not None else CustomActionServices.default()

    async def handler(
        runtime: ActionRuntime,
        message: Message,
        state: State | None,
        options: HandlerOptions | None,
    ) -> ActionResult:
        raw = options.parameters if options is not None else {}
        output, params, completed = await _invoke(definition, raw, backends)
        if not completed:
            return ActionResult(success=False, text=output.output)
        return ActionResult(
            text=output.output,
            success=output.ok,
            data={"action_id": definition.id, "params": params},
        )

    async def validate(runtime: ActionRuntime, message: Message, state: State | None) -> bool:
        return True

    return Action(
        name=definition.name,
        description=definition.description,
        similes=definition.similes,
        parameters=[
            ActionParameter(
                name=p.name,
                description=p.description,
                required=p.required,
                schema={"type": "string"},
            )
            for p in definition.parameters
        ],
        validate=validate,
        handler=handler,
        side_effects=definition.side_effects is not False,
        metadata={"custom_action_id": definition.id, "handler_type": definition.handler.type},
    )


def build_test_handler(
    defn: CustomActionDef | Mapping[str, Any], *, services: CustomActionServices | None = None
) -> Callable[[Mapping[str, Any]], Coroutine[Any, Any, TestOutput]]:
    """A callable ``params -> {ok, output}`` that runs the handler without registering it.

    Same rules as the converted action: missing required parameters fail before any I/O and
    a raised error becomes ``Action failed: <error>``.
    """
    definition = defn if isinstance(defn, CustomActionDef) else CustomActionDef.model_validate(defn)
    backends = services if services is not None else CustomActionServices.default()

    async def test(params: Mapping[str, Any]) -> TestOutput:
        output, _, _ = await _invoke(definition, params, backends)
        return output

    return test
