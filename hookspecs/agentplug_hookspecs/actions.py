"""Hooks through which plugins contribute agent actions (ACTIONS.md §1)."""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_serializer, model_validator

from ._model import Context, Event, HookModel, Result
from ._semantics import Collect, HookKind, declare

GROUP = "Actions"


class ActionsContext(Context):
    """Context of action hooks."""

    agent_id: str | None = None
    """Id of the agent (persona) the run belongs to."""


class ProvideActionsEvent(Event):
    """The runtime collecting actions (at start-up and after a reload)."""

    reason: str = "startup"
    """Why actions are collected: ``startup`` or ``reload``."""


class ProvideActionsResult(Result):
    """The actions a plugin contributes (``agentplug.Action`` objects)."""

    actions: list[Any] = Field(default_factory=list)
    """The plugin's ``agentplug.Action`` objects (a bare list is accepted)."""

    @model_validator(mode="before")
    @classmethod
    def _accept_plain_list(cls, data: Any) -> Any:
        if isinstance(data, list | tuple):
            return {"actions": list(data)}
        return data


class ProvideActionsOutcome(HookModel):
    """Every plugin's contribution, keyed by plugin id, in priority order."""

    by_plugin: dict[str, list[Any]] = Field(default_factory=dict)
    """Each plugin's actions, keyed by plugin id, in priority order."""

    @field_serializer("by_plugin", when_used="json")
    def _describe_actions(self, value: dict[str, list[Any]]) -> dict[str, list[Any]]:
        # Actions hold callables: in JSON, show what an action is, not its functions.
        return {
            plugin: [a.describe() if hasattr(a, "describe") else repr(a) for a in actions]
            for plugin, actions in value.items()
        }


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
