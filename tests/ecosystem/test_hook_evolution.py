"""Maintainers add and deprecate hooks the documented way (docs/maintainers.md).

Adding: a hookspec declared with ``declare`` (semantics as data) dispatches with its
reduction, appears in the hook reference (its docstring as text) and in the generated
facade, and the catalogue checks catch a field without a description. Deprecating: the
``Deprecation`` marker carries the replacement and the removal release; each plugin that
implements the hook is warned once, at registration, naming both; ``agentplug hooks`` and
the reference show them.
"""

from __future__ import annotations

import asyncio
import re
import types
import warnings
from pathlib import Path
from typing import Any

import pytest
from agentplug import PluginHost, hookimpl
from agentplug.cli.codegen import render_facade
from agentplug.cli.main import main
from agentplug.cli.reference import render_hook_reference
from agentplug_hookspecs import (
    Context,
    Deprecation,
    Event,
    FieldMerge,
    HookKind,
    HookModel,
    Result,
    builtin_declarations,
    declarations_in,
    declare,
)

ROOT = Path(__file__).resolve().parents[2]


class TicketEvent(Event):
    """A support ticket was opened."""

    title: str
    """The ticket's title."""


class TicketContext(Context):
    """Correlation context of ticket hooks."""

    queue: str | None = None
    """The queue the ticket landed in."""


class TicketResult(Result):
    """Triage a ticket."""

    priority: str | None = None
    """The priority to give it (the first defined value wins)."""
    note: str | None = None
    """A note for the agent (notes are concatenated)."""


class TicketOutcome(HookModel):
    """Reduced ``ticket_opened``: the priority and the notes."""

    priority: str | None = None
    """The winning priority."""
    note: str | None = None
    """Every note, in priority order."""


@declare(
    kind=HookKind.MERGE,
    event=TicketEvent,
    ctx=TicketContext,
    result=TicketResult,
    outcome=TicketOutcome,
    reduction=FieldMerge(first=("priority",), concat=("note",)),
    group="Tickets",
    default_timeout_ms=5_000,
)
def ticket_opened(event: TicketEvent, ctx: TicketContext) -> TicketResult | None:
    """Triage a ticket as it is opened.

    Return ``priority`` (the first defined value wins) and/or ``note`` (notes are
    concatenated in priority order).
    """


@declare(
    kind=HookKind.OBSERVE,
    event=TicketEvent,
    ctx=TicketContext,
    result=None,
    outcome=TicketOutcome,
    reduction=FieldMerge(),
    group="Tickets",
    deprecation=Deprecation(replacement="ticket_opened", removed_in="2.0"),
)
def ticket_created(event: TicketEvent, ctx: TicketContext) -> None:
    """Deprecated: observe a new ticket; use ``ticket_opened``."""


TICKET_HOOKS = types.ModuleType("ticket_hooks")
TICKET_HOOKS.ticket_opened = ticket_opened  # type: ignore[attr-defined]
TICKET_HOOKS.ticket_created = ticket_created  # type: ignore[attr-defined]


class Triage:
    @hookimpl(priority=10)
    def ticket_opened(self, event: TicketEvent) -> TicketResult:
        return TicketResult(priority="high", note=f"looked at {event.title}")


class Notes:
    @hookimpl
    def ticket_opened(self) -> dict[str, Any]:
        return {"priority": "low", "note": "second opinion"}


class OldStyle:
    @hookimpl
    def ticket_created(self, event: TicketEvent) -> None:
        return None


def _declarations() -> dict[str, Any]:
    return {**builtin_declarations(), **{d.name: d for d in declarations_in(TICKET_HOOKS)}}


# -- adding a hook -----------------------------------------------------------------------


def test_an_added_hook_dispatches_with_its_declared_reduction() -> None:
    host = PluginHost()
    host.add_hookspecs(TICKET_HOOKS)
    host.register(Triage(), "triage")
    host.register(Notes(), "notes")

    result = asyncio.run(host.dispatch("ticket_opened", {"title": "printer on fire"}))

    assert result.outcome.priority == "high"
    assert result.outcome.note == "looked at printer on fire\n\nsecond opinion"


def test_an_added_hook_gets_a_reference_entry_with_its_docstring_as_text() -> None:
    text = render_hook_reference(_declarations())

    assert "### ticket_opened" in text
    assert "\nReturn `priority` (the first defined value wins) and/or `note` (notes are\n" in text
    assert "| `note` (`note`) | `str \\| None` | A note for the agent" in text


def test_an_added_hook_gets_typed_methods_in_the_generated_facade() -> None:
    text = render_facade(_declarations())

    assert "async def ticket_opened(self, event: TicketEvent | _Payload = None" in text
    assert "-> DispatchResult[TicketOutcome]:" in text


def test_hookspec_docstrings_render_as_text_not_code_blocks() -> None:
    text = (ROOT / "docs" / "hooks.md").read_text(encoding="utf-8")
    outside_fences = re.sub(r"```.*?```", "", text, flags=re.S)

    assert [line for line in outside_fences.splitlines() if line.startswith("    ")] == []
    assert "``" not in outside_fences


# -- deprecating a hook ------------------------------------------------------------------


def test_a_deprecated_hook_warns_each_plugin_once_naming_replacement_and_removal() -> None:
    host = PluginHost()
    host.add_hookspecs(TICKET_HOOKS)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first = host.register(OldStyle(), "old-one")
        host.register(OldStyle(), "old-two")
        asyncio.run(host.dispatch("ticket_created", {"title": "x"}))

    messages = [str(w.message) for w in caught if issubclass(w.category, DeprecationWarning)]
    assert messages == [
        "plugin 'old-one' uses deprecated hook 'ticket_created': removed in "
        "agentplug-hookspecs 2.0; use ticket_opened instead",
        "plugin 'old-two' uses deprecated hook 'ticket_created': removed in "
        "agentplug-hookspecs 2.0; use ticket_opened instead",
    ]
    assert messages[0] in first.warnings


def test_every_builtin_deprecation_names_its_replacement_and_removal_release() -> None:
    deprecated = {n: d.deprecation for n, d in builtin_declarations().items() if d.deprecation}

    assert sorted(deprecated) == ["before_agent_start", "deactivate", "subagent_spawning"]
    assert [n for n, dep in deprecated.items() if not (dep.replacement and dep.removed_in)] == []


def test_a_removal_release_must_be_a_release_number() -> None:
    with pytest.raises(ValueError, match="removed_in must be a release number"):
        Deprecation(replacement="ticket_opened", removed_in="someday")


def test_the_hook_reference_shows_the_replacement_and_the_removal_release() -> None:
    text = render_hook_reference(_declarations())

    assert "| [`ticket_created`](#ticket_created) (deprecated, removed in 2.0) |" in text
    assert "- **deprecated**: use ticket_opened instead; removed in agentplug-hookspecs 2.0" in text


def test_agentplug_hooks_marks_deprecated_hooks_with_removal_and_replacement(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["hooks", "--builtin-only"]) == 0
    lines = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()}

    assert lines["deactivate"].endswith("DEPRECATED (removed in 1.0; use gateway_stop)")
    assert "DEPRECATED" not in lines["gateway_stop"]


def test_agentplug_hooks_json_carries_the_removal_release(
    capsys: pytest.CaptureFixture[str],
) -> None:
    import json

    assert main(["hooks", "--builtin-only", "--json"]) == 0
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)}

    assert rows["deactivate"]["removed_in"] == "1.0"
    assert rows["deactivate"]["replacement"] == "gateway_stop"
