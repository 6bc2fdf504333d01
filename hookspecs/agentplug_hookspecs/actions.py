"""Hooks through which plugins contribute agent actions (ACTIONS.md §1)."""

from __future__ import annotations

from typing import Any

from pydantic import Field, model_validator

from ._model import Context, Event, HookModel, Result
from ._semantics import Collect, HookKind, declare

GROUP = "Actions"


class ActionsContext(Context):
    """Context of action hooks."""

    agent_id: str | None = None


class ProvideActionsEvent(Event):
    """The runtime collecting actions (at start-up and after a reload)."""

    reason: str = "startup"


class ProvideActionsResult(Result):
    """The actions a plugin contributes (``agentplug.Action`` objects)."""

    actions: list[Any] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _accept_plain_list(cls, data: Any) -> Any:
        if isinstance(data, list | tuple):
            return {"actions": list(data)}
        return data


class ProvideActionsOutcome(HookModel):
    """Every plugin's contribution, keyed by plugin id, in priority order."""

    by_plugin: dict[str, list[Any]] = Field(default_factory=dict)


@declare(
    kind=HookKind.MERGE,
    event=ProvideActionsEvent,
    ctx=ActionsContext,
    result=ProvideActionsResult,
    outcome=ProvideActionsOutcome,
    reduction=Collect(),
    group=GROUP,
)
def provide_actions(event: ProvideActionsEvent, ctx: ActionsContext) -> list[Any] | None:
    """Contribute agent actions (``agentplug.Action``) to the runtime's registry.

    Return a list of actions. Every plugin's list is collected with its plugin id; a
    name clash between two owners is an error naming both.
    """
