"""action-pack: two small agent actions, contributed through ``provide_actions``.

- ``ROLL_DICE`` (``sides``: integer, at least 2, default 6, at most ``config.max_sides``)
  rolls one die. It uses the runtime's ``random`` service when the host registered a
  ``random.Random`` (reproducible rolls in tests and replays), else the system RNG.
- ``WORD_COUNT`` (``text``: required string) counts words, characters and lines.

Both declare ``side_effects=False``: they change nothing, so ``agent.tools`` offers them to
a model by default (an action that declares nothing counts as side-effecting).

Handlers check their parameters themselves and answer with a helpful failed result, even
though the action flow validates them against the schema first (ACTIONS.md §1).
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

from agentplug import hookimpl
from agentplug.actions.model import (
    Action,
    ActionExample,
    ActionParameter,
    ActionResult,
    ActionRuntime,
    Message,
    ParameterSchema,
    State,
)
from agentplug.actions.model import HandlerOptions as ActionOptions
from agentplug_hookspecs.actions import ProvideActionsEvent

__all__ = [
    "DEFAULT_MAX_SIDES",
    "DEFAULT_SIDES",
    "PLUGIN_ID",
    "build_actions",
    "provide_actions",
    "roll_dice",
    "word_count",
]

PLUGIN_ID = "action-pack"
DEFAULT_SIDES = 6
DEFAULT_MAX_SIDES = 1_000
_SYSTEM_RANDOM = random.SystemRandom()


def _parameters(options: ActionOptions | None) -> Mapping[str, Any]:
    return options.parameters if options is not None else {}


def roll_dice(
    runtime: ActionRuntime, message: Message, state: State | None, options: ActionOptions | None
) -> ActionResult:
    """Handler of ``ROLL_DICE``: roll one die with ``sides`` faces."""
    sides = _parameters(options).get("sides", DEFAULT_SIDES)
    if isinstance(sides, bool) or not isinstance(sides, int) or sides < 2:
        return ActionResult.failure(
            f"ROLL_DICE needs sides to be a whole number of at least 2 (got {sides!r}); "
            "try sides=6 or sides=20.",
            action="ROLL_DICE",
        )
    service = runtime.get_service("random")
    rng = service if isinstance(service, random.Random) else _SYSTEM_RANDOM
    roll = rng.randint(1, sides)
    return ActionResult(
        success=True, text=f"Rolled a d{sides}: {roll}.", data={"sides": sides, "roll": roll}
    )


def word_count(
    runtime: ActionRuntime, message: Message, state: State | None, options: ActionOptions | None
) -> ActionResult:
    """Handler of ``WORD_COUNT``: count the words, characters and lines of ``text``."""
    text = _parameters(options).get("text")
    if not isinstance(text, str) or not text.strip():
        return ActionResult.failure(
            'Missing required parameter: text. Send text="..." with the words to count.',
            action="WORD_COUNT",
        )
    words, characters, lines = len(text.split()), len(text), len(text.splitlines())
    plural = "" if words == 1 else "s"
    return ActionResult(
        success=True,
        text=f"{words} word{plural}, {characters} characters.",
        data={"words": words, "characters": characters, "lines": lines},
    )


def _max_sides(config: Mapping[str, Any]) -> int:
    value = config.get("max_sides", DEFAULT_MAX_SIDES)
    valid = isinstance(value, int) and not isinstance(value, bool) and value >= 2
    return value if valid else DEFAULT_MAX_SIDES


def build_actions(max_sides: int = DEFAULT_MAX_SIDES) -> list[Action]:
    """The pack's actions (new objects on each call: the registry keys them by identity)."""
    roll = Action(
        name="ROLL_DICE",
        similes=("ROLL_DIE", "THROW_DICE", "DICE_ROLL"),
        description="Roll one die with the given number of sides (a d6 unless told otherwise) "
        "and report the result. Use for games, random picks and tie-breaks.",
        handler=roll_dice,
        side_effects=False,  # nothing changes: a model may be offered it without asking
        parameters=(
            ActionParameter(
                name="sides",
                description="number of faces of the die",
                schema=ParameterSchema(
                    type="integer", minimum=2, maximum=max_sides, default=DEFAULT_SIDES
                ),
            ),
        ),
        examples=(
            (
                ActionExample(name="user", text="roll a d20 for initiative"),
                ActionExample(name="agent", text="Rolled a d20: 14.", actions=["ROLL_DICE"]),
            ),
        ),
    )
    count = Action(
        name="WORD_COUNT",
        similes=("COUNT_WORDS", "WORDCOUNT"),
        description="Count the words, characters and lines of a piece of text.",
        handler=word_count,
        side_effects=False,
        parameters=(
            ActionParameter(
                name="text",
                description="the text to count",
                required=True,
                schema=ParameterSchema(type="string"),
            ),
        ),
        examples=(
            (
                ActionExample(name="user", text='how many words is "to be or not to be"?'),
                ActionExample(name="agent", text="6 words, 18 characters.", actions=["WORD_COUNT"]),
            ),
        ),
    )
    return [roll, count]


@hookimpl
def provide_actions(event: ProvideActionsEvent) -> list[Action]:
    """Contribute ``ROLL_DICE`` and ``WORD_COUNT`` (``config.max_sides`` bounds the die)."""
    return build_actions(_max_sides(event.context.plugin_config))
