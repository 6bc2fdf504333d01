"""Did-you-mean: the one helper every "unknown name" message uses.

A name the operator or a plugin author wrote (a config key, a hook, a command, a
provider, an action) is compared with the names that exist after folding the ways the
same name is commonly written: case, ``-`` / ``_`` / spaces, and camelCase against
snake_case (``baseUrl``, ``base-url`` and ``BASE_URL`` are one name). Then:

* a name that differs only in that spelling is always suggested (``Before_Tool_Call``);
* otherwise the closest names by :class:`difflib.SequenceMatcher` ratio of the folded
  forms, at or above ``cutoff`` (``max_step`` -> ``max_steps``, ``base_ur`` ->
  ``base_url``, ``runtim`` -> ``runtime``);
* among names that fold to the same form (a field and its camelCase alias), the one
  written in the style of the typed name is shown.

:func:`closest` returns the names; :func:`did_you_mean` the phrase for a message.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable

__all__ = ["closest", "did_you_mean", "fold"]

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_SEPARATORS = re.compile(r"[-_\s]+")


def fold(name: str) -> str:
    """``name`` in one spelling: camelCase split, lower case, separators dropped."""
    return _SEPARATORS.sub("", _CAMEL.sub("_", name).lower())


def _style_score(candidate: str, typed: str) -> int:
    """How closely ``candidate`` follows the spelling style of ``typed`` (higher: closer)."""
    score = 0
    if ("_" in candidate) == ("_" in typed):
        score += 2
    if ("-" in candidate) == ("-" in typed):
        score += 1
    if any(c.isupper() for c in candidate) == any(c.isupper() for c in typed):
        score += 1
    return score


def closest(word: str, choices: Iterable[str], *, n: int = 1, cutoff: float = 0.6) -> list[str]:
    """Up to ``n`` of ``choices`` that ``word`` most likely meant, best first (none when
    nothing is close enough; ``word`` itself is never suggested)."""
    by_fold: dict[str, list[str]] = {}
    for choice in choices:
        if choice != word:
            by_fold.setdefault(fold(choice), []).append(choice)
    if not by_fold:
        return []
    folded = fold(word)
    if folded in by_fold:
        ranked = [folded]
    else:
        matcher = difflib.SequenceMatcher(b=folded, autojunk=False)
        scored = []
        for key in by_fold:
            matcher.set_seq1(key)
            if (
                matcher.real_quick_ratio() >= cutoff
                and matcher.quick_ratio() >= cutoff
                and (ratio := matcher.ratio()) >= cutoff
            ):
                scored.append((-ratio, key))
        ranked = [key for _, key in sorted(scored)]
    picked = []
    for key in ranked[:n]:
        spellings = by_fold[key]
        picked.append(max(spellings, key=lambda s: _style_score(s, word)))
    return picked


def did_you_mean(
    word: str,
    choices: Iterable[str],
    *,
    lead: str = "; ",
    otherwise: str = "",
    cutoff: float = 0.6,
) -> str:
    """``"; did you mean 'x'?"`` when a choice is close to ``word`` (``lead`` joins it to
    the message before), else ``otherwise``."""
    found = closest(word, choices, cutoff=cutoff)
    return f"{lead}did you mean {found[0]!r}?" if found else otherwise
