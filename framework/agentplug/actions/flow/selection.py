"""Selecting actions: the selector protocol, matches and the rule-based default."""

from __future__ import annotations

import enum
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from agentplug.actions.model import Action, Message, State

__all__ = ["ActionMatch", "ActionSelector", "DeterministicActionSelector", "MatchTier"]


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
