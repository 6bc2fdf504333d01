"""Outcome filters: functions a hookspec's reduction names, provided by a layer above.

A reduction may declare a post-filter by name (``resolve_exec_env`` declares
``DictMerge(post_filter="exec_env")``: the merged environment is filtered before anyone
sees it). The core reduces; the filter itself belongs to the layer that owns the rule (the
security layer's exec-env filter), which registers the function here when it is imported.
A dispatch whose filter was never registered fails with a clear error rather than return
an unfiltered outcome.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["OutcomeFilter", "outcome_filter", "register_outcome_filter"]

OutcomeFilter = Callable[..., Any]
"""``filter(merged_outcome, contributors) -> outcome``."""

_FILTERS: dict[str, OutcomeFilter] = {}


def register_outcome_filter(name: str, function: OutcomeFilter) -> None:
    """Provide the post-filter ``name`` that a hookspec's reduction declares."""
    _FILTERS[name] = function


def outcome_filter(name: str) -> OutcomeFilter:
    """The post-filter registered under ``name``."""
    function = _FILTERS.get(name)
    if function is None:
        raise LookupError(
            f"no outcome filter named {name!r} is registered (a hookspec's reduction names "
            "it); hosts built by agentplug.Gateway or agentplug.PluginHost register the "
            "framework's filters"
        )
    return function
