"""The action execution flow: select, validate, extract parameters, execute, deliver.

:func:`run_action_flow` runs the five steps of the specification for one message:

1. **select**: an :class:`ActionSelector` ranks the registered actions against the message.
   The default, :class:`DeterministicActionSelector`, is rule based (see its docstring for the
   tiers and tie-breaks); an LLM-backed selector is a plugin implementing the same protocol.
2. **validate**: candidates are tried best first; the first whose ``validate()`` returns true
   is chosen, the others are recorded as skipped.
3. **extract**: a :class:`ParameterExtractor` reads raw values for the declared parameters
   (default: :class:`StructuredParameterExtractor`), then :func:`check_parameters` coerces and
   validates them against each parameter's schema. A bad value yields a failed
   :class:`ActionResult` naming the parameter, and the handler is not called.
4. **execute**: the handler runs (sync or async); an exception becomes the failed result
   ``Action failed: <error>``.
5. **deliver**: the result goes to the ``deliver`` callback.

Every step is appended to an :class:`ActionTrace` (returned in the :class:`FlowResult`) and
logged on the ``agentplug.actions`` logger as one single-line JSON record. Parameter *values*
are never logged (they may carry secrets); only their names are.
"""

from __future__ import annotations

from agentplug.actions.flow.extraction import ParameterExtractor, StructuredParameterExtractor
from agentplug.actions.flow.parameters import (
    ParameterValidationError,
    check_parameters,
    coerce_parameter,
)
from agentplug.actions.flow.runner import (
    DeliverCallback,
    FlowOutcome,
    FlowResult,
    execute_action,
    run_action_flow,
)
from agentplug.actions.flow.selection import (
    ActionMatch,
    ActionSelector,
    DeterministicActionSelector,
    MatchTier,
)
from agentplug.actions.flow.simple_runtime import SimpleActionRuntime
from agentplug.actions.flow.trace import ActionTrace, StepStatus, TraceStep
from agentplug.actions.model import ActionRuntime

__all__ = [
    "ActionMatch",
    "ActionRuntime",
    "ActionSelector",
    "ActionTrace",
    "DeliverCallback",
    "DeterministicActionSelector",
    "FlowOutcome",
    "FlowResult",
    "MatchTier",
    "ParameterExtractor",
    "ParameterValidationError",
    "SimpleActionRuntime",
    "StepStatus",
    "StructuredParameterExtractor",
    "TraceStep",
    "check_parameters",
    "coerce_parameter",
    "execute_action",
    "run_action_flow",
]
