"""How an action looks to a model, and which actions a model may call (``agent.tools``).

:class:`ToolPolicy` is the operator's choice: the actions offered (``allow``, by default
``@safe``, every action that declares no side effects) and the allowed side-effecting
ones that run without an approval (``without_approval``); every other allowed
side-effecting action carries :func:`operator_approval`, which the gate asks before each
call. :func:`action_schema` and :func:`action_description` are what the model reads;
:func:`validate_refusals` runs actions' ``validate()`` for one message, bounded.
:class:`~agentplug.agent.tools.ActionToolSource` puts them together.
"""

from __future__ import annotations

import asyncio
import fnmatch
import inspect
from collections.abc import Awaitable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from agentplug_hookspecs.tools import ApprovalRequest

from agentplug.actions.model import Action, ActionExample, ActionRuntime, Message, State
from agentplug.core.redaction import scrub

__all__ = [
    "SAFE",
    "TOOLS_APPROVER",
    "VALIDATE_TIMEOUT_S",
    "ToolPolicy",
    "action_description",
    "action_schema",
    "operator_approval",
    "validate_refusal",
    "validate_refusals",
]

SAFE = "@safe"
"""``agent.tools.allow`` entry: every action that declares ``side_effects=False``."""
TOOLS_APPROVER = "agentplug.tools"
"""Who requires the approval of an allowed side-effecting action (its ``plugin_id``)."""
VALIDATE_TIMEOUT_S = 5.0
"""How long one ``validate()`` may take when a model lists or calls an action."""

_MAX_EXAMPLES = 3
_MAX_EXAMPLE_TURNS = 4
_MAX_EXAMPLE_TEXT = 120
_MAX_EXAMPLES_CHARS = 600
_MAX_APPROVAL_DESCRIPTION = 1_000


def _is_glob(pattern: str) -> bool:
    return any(ch in pattern for ch in "*?[")


def _matches(name: str, pattern: str) -> bool:
    # Action names compare case-insensitively everywhere else (the registry), so here too.
    return fnmatch.fnmatchcase(name.upper(), pattern.upper())


@dataclass(frozen=True)
class ToolPolicy:
    """Which actions a model is offered and which of them need an approval.

    ``allow``: action names, ``fnmatch`` globs (``"MY_*"``, case-insensitive) and
    :data:`SAFE`; an action is offered when any entry matches it. ``without_approval``:
    names or globs of allowed side-effecting actions that run without asking; any other
    allowed side-effecting action needs an approval at every call (standing
    ``allow-always`` grants answer it). Side-effect-free actions never need one.
    """

    allow: tuple[str, ...] = (SAFE,)
    without_approval: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    """Tool names or globs never offered nor run, whatever their source (wins over
    ``allow``); case-insensitive like the rest."""

    def excludes(self, tool_name: str) -> bool:
        """Whether ``exclude`` names the tool ``tool_name`` (any source)."""
        return any(_matches(tool_name, entry) for entry in self.exclude)

    def offers(self, action: Action) -> bool:
        """Whether the model may be offered ``action``."""
        return any(
            not action.side_effects if entry == SAFE else _matches(action.name, entry)
            for entry in self.allow
        )

    def needs_approval(self, action: Action) -> bool:
        """Whether each call of an offered ``action`` must be approved first."""
        return action.side_effects and not any(
            _matches(action.name, entry) for entry in self.without_approval
        )

    def unmatched(self, names: Iterable[str]) -> list[str]:
        """The plain names (not globs) of ``allow`` and ``without_approval`` that match
        none of ``names``: most likely typos, worth a warning."""
        known = {name.upper() for name in names}
        return [
            entry
            for entry in dict.fromkeys((*self.allow, *self.without_approval))
            if entry != SAFE and not _is_glob(entry) and entry.upper() not in known
        ]

    def unmatched_excludes(self, tool_names: Iterable[str]) -> list[str]:
        """The plain names of ``exclude`` that name no tool of ``tool_names``."""
        known = {name.upper() for name in tool_names}
        return [e for e in self.exclude if not _is_glob(e) and e.upper() not in known]


def operator_approval(action: Action) -> ApprovalRequest:
    """The approval the gate asks before an allowed side-effecting ``action`` runs.

    Title and severity are the same for every call of the action, so an ``allow-always``
    answer becomes one standing grant for it (``agentplug approvals revoke`` ends it).
    """
    what = action.description.strip()
    if len(what) > _MAX_APPROVAL_DESCRIPTION:
        what = what[: _MAX_APPROVAL_DESCRIPTION - 3] + "..."
    return ApprovalRequest(
        title=f"Run the action {action.name}",
        description=(
            f"The model asks to run {action.name}: {what} It declares side effects, so "
            "agent.tools asks before it runs (agent.tools.without_approval lists the "
            "actions that run without asking)."
        ),
        severity="warning",
        plugin_id=TOOLS_APPROVER,
    )


def action_schema(action: Action) -> dict[str, Any]:
    """The JSON schema of an action's parameters (type, description, enum, bounds)."""
    properties: dict[str, Any] = {}
    required: list[str] = []
    for param in action.parameters:
        schema = param.schema_
        prop: dict[str, Any] = {"type": schema.type}
        if param.description:
            prop["description"] = param.description
        for key in ("enum", "default", "pattern", "minimum", "maximum"):
            value = getattr(schema, key)
            if value is not None:
                prop[key] = value
        properties[param.name] = prop
        if param.required and not schema.has_default:
            required.append(param.name)
    out: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        out["required"] = required
    out["additionalProperties"] = False
    return out


def _clip(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def _example_turn(turn: ActionExample) -> str:
    out = f'{_clip(turn.name, 32)}: "{_clip(turn.text, _MAX_EXAMPLE_TEXT)}"'
    if turn.actions:
        out += f" ({', '.join(_clip(a, 64) for a in turn.actions[:_MAX_EXAMPLE_TURNS])})"
    return out


def _examples(action: Action) -> str:
    # Few, short and one line each: a description is re-sent with every model call.
    lines: list[str] = []
    used = 0
    for turns in action.examples[:_MAX_EXAMPLES]:
        line = " -> ".join(_example_turn(t) for t in list(turns)[:_MAX_EXAMPLE_TURNS])
        if not line or used + len(line) > _MAX_EXAMPLES_CHARS:
            continue
        lines.append(line)
        used += len(line)
    if not lines:
        return ""
    return ("Example: " if len(lines) == 1 else "Examples: ") + "; ".join(lines) + "."


def action_description(action: Action) -> str:
    """What the model reads: the description, the similes and up to three short examples."""
    parts = [action.description]
    if action.similes:
        parts.append("Also known as: " + ", ".join(action.similes) + ".")
    examples = _examples(action)
    if examples:
        parts.append(examples)
    return " ".join(parts)


def _raised(exc: Exception) -> str:
    return f"its validate() raised {type(exc).__name__}: {_clip(scrub(str(exc)), 200)}"


def _answer(value: object) -> str | None:
    return None if value else "its validate() returned false for this message"


async def _awaited(pending: Awaitable[object]) -> str | None:
    try:
        async with asyncio.timeout(VALIDATE_TIMEOUT_S):
            value = await pending
    except TimeoutError:
        return f"its validate() did not answer within {VALIDATE_TIMEOUT_S:g} s"
    except Exception as exc:  # a broken validate means "may not run", never a crash
        return _raised(exc)
    return _answer(value)


async def validate_refusals(
    actions: Sequence[Action], runtime: ActionRuntime, message: Message
) -> list[str | None]:
    """Why each of ``actions`` may not run for ``message`` (``None`` where its
    ``validate()`` agrees), in order.

    A ``validate()`` that raises, or does not answer within :data:`VALIDATE_TIMEOUT_S`,
    refuses, as it does in the action flow. Async ones run concurrently; sync ones (most:
    the default always agrees) are answered at once, without a task.
    """
    answers: list[str | None] = []
    pending: dict[int, Awaitable[object]] = {}
    for index, action in enumerate(actions):
        try:
            value = action.validate(runtime, message, State())
        except Exception as exc:  # a broken validate means "may not run", never a crash
            answers.append(_raised(exc))
            continue
        if inspect.isawaitable(value):
            pending[index] = value
            answers.append(None)
        else:
            answers.append(_answer(value))
    if pending:
        done = await asyncio.gather(*(_awaited(p) for p in pending.values()))
        for index, answer in zip(pending, done, strict=True):
            answers[index] = answer
    return answers


async def validate_refusal(action: Action, runtime: ActionRuntime, message: Message) -> str | None:
    """Why ``action`` may not run for ``message`` (see :func:`validate_refusals`)."""
    (answer,) = await validate_refusals([action], runtime, message)
    return answer
