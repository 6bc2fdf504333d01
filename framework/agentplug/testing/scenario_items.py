"""Scenario files as pytest items: :class:`ScenarioFile` and :class:`ScenarioItem`.

Reading, preflight, comparison and the failure report live in agentplug.testing.scenario_check
(shared with ``agentplug run``); these classes only adapt them to pytest.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from _pytest._code.code import TerminalRepr

    from agentplug.testing.scenario_check import CheckedScenario


class ScenarioFailure(AssertionError):
    """A scenario file did not meet its expectations (the message is the diff)."""


class _ScenarioBroken(Exception):
    """The scenario could not run (bad plugin, unknown hook, invalid event)."""


class ScenarioFile(pytest.File):
    """A ``scenario_*.json`` file: one :class:`ScenarioItem` running every step."""

    def collect(self) -> Iterator[ScenarioItem]:
        from agentplug.core.errors import AgentplugError
        from agentplug.testing.scenario_check import load_checked_scenario

        try:
            spec = load_checked_scenario(self.path)
        except AgentplugError as exc:
            raise self.CollectError(f"{self.path.name}: {exc}") from None
        yield ScenarioItem.from_parent(self, name="scenario", spec=spec)


class ScenarioItem(pytest.Item):
    """Runs a scenario file (its steps, then its conversation) and checks it."""

    def __init__(self, *, spec: CheckedScenario, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.spec = spec
        description = spec.scenario.description
        if description:
            self.user_properties.append(("description", description))

    def runtest(self) -> None:
        import asyncio

        from agentplug.core.errors import AgentplugError
        from agentplug.testing.scenario import build_host
        from agentplug.testing.scenario_check import (
            ScenarioError,
            ScenarioRunError,
            check,
            preflight,
            render_failures,
            run_checked,
        )

        try:
            host = build_host(self.spec.scenario)
        except AgentplugError as exc:
            raise _ScenarioBroken(f"the scenario's plugins could not be loaded: {exc}") from exc
        try:
            preflight(host, self.spec)
        except ScenarioError as exc:
            raise _ScenarioBroken(str(exc)) from None
        scenario = self.spec.scenario
        try:
            reports = asyncio.run(run_checked(self.spec, host)) if scenario.steps else []
            turns = []
            if scenario.conversation:
                from agentplug.testing.conversation import run_conversation_checked

                turns = asyncio.run(run_conversation_checked(scenario, host))
        except ScenarioRunError as exc:
            raise _ScenarioBroken(exc.detail) from exc.__cause__
        failures = check(self.spec, reports)
        if turns:
            from agentplug.testing.conversation import check_conversation

            failures += check_conversation(scenario, turns)
        if failures:
            total = len(reports) + len(turns)
            raise ScenarioFailure(render_failures(self.path.name, total, failures))

    def repr_failure(
        self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None
    ) -> str | TerminalRepr:
        if isinstance(excinfo.value, ScenarioFailure):
            return str(excinfo.value)
        if isinstance(excinfo.value, _ScenarioBroken):
            text = f"{self.path.name}: {excinfo.value}"
            cause = excinfo.value.__cause__
            if cause is not None and not isinstance(cause, _expected_errors()):
                import traceback

                text += "\n\n" + "".join(traceback.format_exception(cause)).rstrip()
            return text
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, None, f"agentplug scenario {self.path.name}"


def _expected_errors() -> tuple[type[BaseException], ...]:
    from agentplug.core.errors import AgentplugError

    return (AgentplugError,)
