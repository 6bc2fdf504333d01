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

import enum
import inspect
import json
import logging
import math
import re
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeAlias, TypeVar, runtime_checkable

from pydantic import BaseModel, Field, ValidationError

from agentplug.actions.model import (
    Action,
    ActionParameter,
    ActionResult,
    ActionRuntime,
    HandlerOptions,
    Message,
    State,
)
from agentplug.actions.registry import HOST_OWNER, ActionRegistry

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

logger = logging.getLogger("agentplug.actions")

_T = TypeVar("_T")


async def _maybe_await(value: _T | Awaitable[_T]) -> _T:
    """Await ``value`` when a sync-or-async callable returned an awaitable."""
    if inspect.isawaitable(value):
        return await value
    return value


# ---------------------------------------------------------------------------
# Runtime


class SimpleActionRuntime:
    """A minimal :class:`ActionRuntime`: a service map plus an :class:`ActionRegistry`.

    ``register_action`` registers under ``owner`` (``"host"`` by default), so an action
    registered live clashes like any other.
    """

    def __init__(
        self,
        registry: ActionRegistry | None = None,
        services: Mapping[str, object] | None = None,
        *,
        owner: str = HOST_OWNER,
    ) -> None:
        self.registry = registry if registry is not None else ActionRegistry()
        self.owner = owner
        self._services: dict[str, object] = dict(services or {})

    def get_service(self, name: str) -> object | None:
        """Return the service registered under ``name``, or ``None``."""
        return self._services.get(name)

    def register_service(self, name: str, service: object) -> None:
        """Register (or replace) the service called ``name``."""
        self._services[name] = service

    def register_action(self, action: Action) -> None:
        """Register ``action`` in this runtime's registry under :attr:`owner`."""
        self.registry.register(action, self.owner)


# ---------------------------------------------------------------------------
# Trace

StepStatus: TypeAlias = Literal["ok", "skipped", "failed", "error"]
"""``ok`` done; ``skipped`` not applicable; ``failed`` a rule said no; ``error`` code raised."""


class TraceStep(BaseModel):
    """One step of a flow: what ran, how it ended, why, and how long it took."""

    name: str
    status: StepStatus
    detail: str = ""
    duration_ms: float = 0.0
    action: str | None = None


class ActionTrace(BaseModel):
    """Every step of one flow, in order, under a ``flow_id`` that correlates the log records."""

    flow_id: str = Field(default_factory=lambda: uuid.uuid4().hex[:12])
    steps: list[TraceStep] = Field(default_factory=list)

    def record(
        self,
        name: str,
        status: StepStatus,
        detail: str,
        started: float,
        action: str | None = None,
    ) -> TraceStep:
        """Append a step that started at ``started`` (``time.perf_counter()``) and log it."""
        step = TraceStep(
            name=name,
            status=status,
            detail=detail,
            duration_ms=round((time.perf_counter() - started) * 1000.0, 3),
            action=action,
        )
        self.steps.append(step)
        payload = {"event": "action_step", "flow_id": self.flow_id, **step.model_dump()}
        level = logging.INFO if status in ("ok", "skipped") else logging.WARNING
        # json.dumps escapes newlines, so each record stays on one line for log shippers.
        logger.log(level, json.dumps(payload, default=str), extra={"action_step": payload})
        return step

    def step(self, name: str) -> TraceStep | None:
        """The last step called ``name``, or ``None``."""
        return next((s for s in reversed(self.steps) if s.name == name), None)


# ---------------------------------------------------------------------------
# Selection


class MatchTier(enum.IntEnum):
    """How an action matched; higher wins."""

    KEYWORD = 1
    SUBSTRING = 2
    EXACT_SIMILE = 3
    EXACT_NAME = 4


@dataclass(frozen=True)
class ActionMatch:
    """A candidate action, how it matched, and the sort key that ranked it.

    ``rank`` is compared descending (bigger is better) after ``tier``; ``order`` (registration
    order) ascending is the last tie-break.
    """

    action: Action
    tier: MatchTier
    reason: str
    rank: tuple[float, ...] = ()
    order: int = 0


@runtime_checkable
class ActionSelector(Protocol):
    """Ranks actions against a message; the flow tries the returned candidates in order."""

    async def select(
        self, actions: Sequence[Action], message: Message, state: State | None
    ) -> Sequence[ActionMatch]:
        """Return the matching actions, best first (empty when nothing matches)."""
        ...


_WORD = re.compile(r"[^\W_]+")
_STOPWORDS = frozenset(
    re.split(
        r"\s+",
        "a an and are as at be by can could do does for from get give has have how i in is it "
        "its me my no not of on or our please should so that the their them then there these "
        "this to us want was we what when where which who why will with would you your",
    )
)


def _words(text: str) -> list[str]:
    """Case-folded alphanumeric words; ``_`` and punctuation separate words."""
    return [w.casefold() for w in _WORD.findall(text)]


def _compact(text: str) -> str:
    """Words glued together: ``Restart_Agent``, ``restart agent`` and ``RESTARTAGENT`` agree."""
    return "".join(_words(text))


def _keywords(text: str) -> set[str]:
    return {w for w in _words(text) if len(w) >= 3 and w not in _STOPWORDS}


def _contains_phrase(words: Sequence[str], target: str) -> bool:
    """Whether consecutive ``words`` glue together into exactly ``target``.

    Matching whole words (not raw characters) keeps ``AGE`` from matching inside ``message``
    while still letting ``check weather`` and ``check_weather`` match ``CHECK_WEATHER``.
    """
    for start in range(len(words)):
        glued = ""
        for word in words[start:]:
            glued += word
            if len(glued) >= len(target):
                break
        if glued == target:
            return True
    return False


class DeterministicActionSelector:
    """The built-in, rule-based selector.

    Names and similes are compared case-insensitively with ``_`` (and any other separator)
    ignored. An action matches in its best tier only:

    1. **exact name** - the *command* equals the name. Commands are, in this order of
       preference: ``message.content["action"]``, the whole message text, the first
       whitespace-separated token of the text (so ``CHECK_WEATHER city=Paris`` works).
    2. **exact simile** - the command equals one of the similes (same preference order).
    3. **substring** - the name or a simile (at least ``min_substring`` characters once
       glued) appears as consecutive whole words of the text. Tie-break: the longer matched
       name/simile first (more specific), then a name before a simile.
    4. **description keyword overlap** - words of three or more letters, minus common
       stopwords, shared by the text and the description. Tie-break: more shared keywords,
       then a larger share of the description's keywords. At least ``min_overlap`` needed.

    Remaining ties go to the action registered first, so a given registry and message always
    produce the same ranking.
    """

    def __init__(self, *, min_substring: int = 3, min_overlap: int = 1) -> None:
        self.min_substring = min_substring
        self.min_overlap = min_overlap

    async def select(
        self, actions: Sequence[Action], message: Message, state: State | None
    ) -> list[ActionMatch]:
        """Rank ``actions`` against ``message`` (see the class docstring for the rules)."""
        return self.rank(actions, message)

    def rank(self, actions: Sequence[Action], message: Message) -> list[ActionMatch]:
        """Synchronous ranking used by :meth:`select`."""
        commands = self._commands(message)
        words = _words(message.text)
        text_keywords = _keywords(message.text)
        matches: list[ActionMatch] = []
        for order, action in enumerate(actions):
            match = self._match(action, order, commands, words, text_keywords)
            if match is not None:
                matches.append(match)
        matches.sort(key=lambda m: (-m.tier, tuple(-r for r in m.rank), m.order))
        return matches

    @staticmethod
    def _commands(message: Message) -> list[tuple[str, str]]:
        commands: list[tuple[str, str]] = []
        content_action = (message.content or {}).get("action")
        if isinstance(content_action, str) and _compact(content_action):
            commands.append(("content action", _compact(content_action)))
        text = message.text.strip()
        if text:
            commands.append(("message text", _compact(text)))
            first = text.split()[0]
            if first != text:
                commands.append(("first word", _compact(first)))
        return commands

    def _match(
        self,
        action: Action,
        order: int,
        commands: Sequence[tuple[str, str]],
        words: Sequence[str],
        text_keywords: set[str],
    ) -> ActionMatch | None:
        name = _compact(action.name)
        similes = [(s, _compact(s)) for s in action.similes if _compact(s)]
        for preference, (source, command) in enumerate(commands):
            if command == name:
                return ActionMatch(
                    action, MatchTier.EXACT_NAME, f"{source} is the name", (-preference,), order
                )
        for preference, (source, command) in enumerate(commands):
            for simile, key in similes:
                if command == key:
                    return ActionMatch(
                        action,
                        MatchTier.EXACT_SIMILE,
                        f"{source} is the simile {simile!r}",
                        (-preference,),
                        order,
                    )
        best: tuple[int, int, str] | None = None
        for is_name, label, key in [(1, action.name, name)] + [(0, s, k) for s, k in similes]:
            if len(key) >= self.min_substring and _contains_phrase(words, key):
                candidate = (len(key), is_name, label)
                if best is None or candidate[:2] > best[:2]:
                    best = candidate
        if best is not None:
            kind = "name" if best[1] else "simile"
            return ActionMatch(
                action,
                MatchTier.SUBSTRING,
                f"text contains the {kind} {best[2]!r}",
                (float(best[0]), float(best[1])),
                order,
            )
        description_keywords = _keywords(action.description)
        shared = text_keywords & description_keywords
        if len(shared) >= max(1, self.min_overlap):
            return ActionMatch(
                action,
                MatchTier.KEYWORD,
                f"description shares {sorted(shared)}",
                (float(len(shared)), len(shared) / len(description_keywords)),
                order,
            )
        return None


# ---------------------------------------------------------------------------
# Parameter extraction


@runtime_checkable
class ParameterExtractor(Protocol):
    """Reads raw values for an action's declared parameters from the conversation."""

    async def extract(
        self, action: Action, message: Message, state: State | None
    ) -> Mapping[str, Any]:
        """Return raw values by parameter name (unvalidated; strings are fine)."""
        ...


_KEY_VALUE = re.compile(
    r"""(?<!\S)(?P<key>[A-Za-z_][A-Za-z0-9_.-]*)=
        (?P<value>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|\S*)""",
    re.VERBOSE,
)


def _unquote(raw: str) -> str:
    if len(raw) >= 2 and raw[0] == raw[-1] == '"':
        try:
            value = json.loads(raw)
        except json.JSONDecodeError:
            return raw[1:-1]
        return value if isinstance(value, str) else raw[1:-1]
    if len(raw) >= 2 and raw[0] == raw[-1] == "'":
        return re.sub(r"\\(.)", r"\1", raw[1:-1])
    return raw


def _first_json_object(text: str) -> tuple[dict[str, Any], int, int] | None:
    """The first JSON object embedded in ``text`` with its span, or ``None``."""
    decoder = json.JSONDecoder()
    start = text.find("{")
    while start != -1:
        try:
            value, end = decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            start = text.find("{", start + 1)
            continue
        if isinstance(value, dict):
            return value, start, end
        start = text.find("{", end)
    return None


class StructuredParameterExtractor:
    """Default extractor: structured input only, no guessing from prose.

    Sources, first one that has a parameter wins:

    1. ``message.content["parameters"]`` (or ``["params"]``) when it is an object; otherwise
       the top-level keys of ``message.content`` (except ``action``).
    2. The first JSON object embedded in the message text.
    3. ``key=value`` pairs in the rest of the text; values may be quoted with ``"..."``
       (JSON escapes) or ``'...'`` (backslash escapes) to contain spaces.

    Only declared parameter names are returned: a handler never sees undeclared input.
    """

    async def extract(
        self, action: Action, message: Message, state: State | None
    ) -> dict[str, Any]:
        """Return raw values for ``action``'s declared parameters found in ``message``."""
        return self.extract_sync(action, message)

    def extract_sync(self, action: Action, message: Message) -> dict[str, Any]:
        """Synchronous extraction used by :meth:`extract`."""
        sources: list[Mapping[str, Any]] = []
        content = message.content or {}
        nested = content.get("parameters", content.get("params"))
        if isinstance(nested, Mapping):
            sources.append(nested)
        else:
            sources.append({k: v for k, v in content.items() if k != "action"})
        text = message.text
        found = _first_json_object(text)
        if found is not None:
            obj, start, end = found
            sources.append(obj)
            # Pairs inside the JSON object's strings are not key=value input.
            text = text[:start] + " " + text[end:]
        pairs: dict[str, str] = {}
        for match in _KEY_VALUE.finditer(text):
            pairs.setdefault(match.group("key"), _unquote(match.group("value")))
        sources.append(pairs)
        values: dict[str, Any] = {}
        for param in action.parameters:
            for source in sources:
                if param.name in source:
                    values[param.name] = source[param.name]
                    break
        return values


# ---------------------------------------------------------------------------
# Parameter validation


class ParameterValidationError(ValueError):
    """A parameter value is missing or does not satisfy its schema."""

    def __init__(self, action: str, parameter: str, reason: str, message: str) -> None:
        self.action = action
        self.parameter = parameter
        self.reason = reason
        super().__init__(message)


_TRUE = frozenset({"true", "yes", "y", "on", "1"})
_FALSE = frozenset({"false", "no", "n", "off", "0"})
_INT_TEXT = re.compile(r"[+-]?\d+")
_ABSENT = object()


def _is_absent(value: object) -> bool:
    return value is None or value is _ABSENT or (isinstance(value, str) and value == "")


def coerce_parameter(param: ActionParameter, value: Any) -> Any:
    """Coerce ``value`` to ``param``'s schema type and check enum, pattern and bounds.

    Strings are converted for ``number``, ``integer``, ``boolean`` (``true/false``,
    ``yes/no``, ``on/off``, ``1/0``), ``object`` and ``array`` (JSON text). Raises
    ``ValueError`` with the reason (without the parameter name; the caller adds it).
    """
    schema = param.schema_
    kind = schema.type
    converted: Any
    if kind == "string":
        if isinstance(value, str):
            converted = value
        elif isinstance(value, bool):
            converted = "true" if value else "false"
        elif isinstance(value, int | float):
            converted = str(value)
        else:
            raise ValueError(f"expected a string, got {type(value).__name__} {value!r}")
    elif kind == "integer":
        if isinstance(value, bool):
            raise ValueError(f"expected an integer, got boolean {value!r}")
        if isinstance(value, int):
            converted = value
        elif isinstance(value, float) and value.is_integer():
            converted = int(value)
        elif isinstance(value, str) and _INT_TEXT.fullmatch(value.strip()):
            converted = int(value.strip())
        else:
            raise ValueError(f"expected an integer (a whole number such as 3), got {value!r}")
    elif kind == "number":
        if isinstance(value, bool):
            raise ValueError(f"expected a number, got boolean {value!r}")
        if isinstance(value, int | float):
            converted = value
        elif isinstance(value, str):
            text = value.strip()
            try:
                converted = int(text) if _INT_TEXT.fullmatch(text) else float(text)
            except ValueError:
                raise ValueError(f"expected a number (such as 2.5), got {value!r}") from None
        else:
            raise ValueError(f"expected a number (such as 2.5), got {value!r}")
        if isinstance(converted, float) and not math.isfinite(converted):
            raise ValueError(f"expected a finite number, got {value!r}")
    elif kind == "boolean":
        if isinstance(value, bool):
            converted = value
        elif isinstance(value, int) and value in (0, 1):
            converted = bool(value)
        elif isinstance(value, str) and value.strip().casefold() in _TRUE | _FALSE:
            converted = value.strip().casefold() in _TRUE
        else:
            raise ValueError(f"expected a boolean (true or false), got {value!r}")
    else:
        python_type: type[Any] = dict if kind == "object" else list
        converted = value
        if isinstance(value, str):
            try:
                converted = json.loads(value)
            except json.JSONDecodeError:
                converted = value
        if not isinstance(converted, python_type):
            raise ValueError(f"expected a JSON {kind}, got {value!r}")
    if schema.enum is not None and converted not in schema.enum:
        allowed = ", ".join(repr(v) for v in schema.enum)
        raise ValueError(f"{converted!r} is not one of the allowed values: {allowed}")
    pattern = schema.pattern
    if pattern is not None and isinstance(converted, str) and not re.search(pattern, converted):
        raise ValueError(f"{converted!r} does not match the pattern {pattern!r}")
    if isinstance(converted, int | float) and not isinstance(converted, bool):
        if schema.minimum is not None and converted < schema.minimum:
            raise ValueError(f"{converted!r} is below the minimum {schema.minimum:g}")
        if schema.maximum is not None and converted > schema.maximum:
            raise ValueError(f"{converted!r} is above the maximum {schema.maximum:g}")
    return converted


def check_parameters(action: Action, raw: Mapping[str, Any]) -> dict[str, Any]:
    """Validate ``raw`` values against ``action``'s declared parameters.

    Missing or empty values take the schema ``default`` when there is one; a required
    parameter without value or default raises :class:`ParameterValidationError` with the text
    ``Missing required parameter: <name>``. Undeclared keys are dropped. Returns the coerced
    values (optional parameters without value or default are left out).
    """
    values: dict[str, Any] = {}
    for param in action.parameters:
        value = raw.get(param.name, _ABSENT)
        if _is_absent(value):
            if param.schema_.has_default:
                value = param.schema_.default
            elif param.required:
                hint = f" ({param.description})" if param.description else ""
                raise ParameterValidationError(
                    action.name,
                    param.name,
                    "missing",
                    f"Missing required parameter: {param.name}{hint}. Action {action.name} "
                    f"needs it: send {param.name}=<value> or a JSON object with "
                    f'"{param.name}".',
                )
            else:
                continue
        try:
            values[param.name] = coerce_parameter(param, value)
        except ValueError as exc:
            raise ParameterValidationError(
                action.name,
                param.name,
                "invalid",
                f"Invalid parameter {param.name} for action {action.name}: {exc}.",
            ) from exc
    return values


# ---------------------------------------------------------------------------
# Execution


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
