"""Checking scenario files: per-step expectations, preflight, readable failure reports.

Shared by ``agentplug run`` and the pytest scenario items (``agentplug.testing.pytest_plugin``);
nothing here imports pytest.

A step of a scenario file may carry:

``expect``
    a subset match on the step's outcome (``outcome.model_dump(mode="json")``);
``expect_handlers``
    per plugin id: a status (``"ok"``: every handler of the plugin has it), a list (the
    plugin's handlers in order: statuses or report patterns), a report pattern (a subset
    match on the handler report: ``status``, ``error``, ``priority``, ``hook``), or
    ``null`` (the plugin did not run);
``expect_approval``
    a subset match on the approval round-trip (``allowed``, ``resolution``, ``reason``);
    ``null``: no approval may be requested.

Subset match: every key of an expected object must be present and match (extra actual
keys are ignored, keys may be camelCase); arrays match item by item; ``null`` matches a
missing field; ``true``/``false`` only match booleans.

Typical use::

    checked = load_checked_scenario(path)         # ScenarioError: invalid file
    host = build_host(checked.scenario)           # PluginLoadError: plugin not loadable
    preflight(host, checked)                      # ScenarioError: unknown hook, bad event
    reports = asyncio.run(run_checked(checked, host))  # ScenarioRunError: a step crashed
    failures = check(checked, reports)
    if failures:
        print(render_failures(path.name, len(reports), failures))
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from pydantic import ValidationError

from agentplug.config.suggest import did_you_mean
from agentplug.gateway import PluginHost
from agentplug.testing.scenario import (
    Scenario,
    ScenarioError,
    StepReport,
    load_scenario,
    run_scenario,
    step_label,
)

__all__ = [
    "MISSING",
    "CheckedScenario",
    "Mismatch",
    "ScenarioError",
    "ScenarioRunError",
    "StepExpectation",
    "StepFailure",
    "check",
    "checked_scenario",
    "failures_as_json",
    "handler_summary",
    "load_checked_scenario",
    "match",
    "match_handlers",
    "preflight",
    "render_failures",
    "run_checked",
]


class _Missing:
    """The marker of an absent value (shown as ``<missing>``)."""

    _instance: _Missing | None = None

    def __new__(cls) -> _Missing:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "<missing>"


MISSING: Final = _Missing()
"""An absent value: an actual field that is not there, or an expectation not given."""


@dataclass(frozen=True)
class StepExpectation:
    """What one step expects (``None`` / :data:`MISSING`: not checked)."""

    index: int
    label: str
    """``step 2 "name" (steps[1])``."""
    hook: str
    name: str | None = None
    outcome: dict[str, Any] | None = None
    handlers: dict[str, Any] | None = None
    approval: Any = MISSING
    """A dict, ``None`` (no approval may be requested), or :data:`MISSING` (not checked)."""

    @property
    def checks_something(self) -> bool:
        return self.outcome is not None or self.handlers is not None or self.approval is not MISSING


@dataclass(frozen=True)
class CheckedScenario:
    """A scenario with the expectations of its steps (one per step, in order)."""

    scenario: Scenario
    expectations: list[StepExpectation]

    @property
    def path(self) -> Path | None:
        return self.scenario.path

    @property
    def has_expectations(self) -> bool:
        """Whether any step carries an ``expect*`` key."""
        return any(e.checks_something for e in self.expectations)


@dataclass
class Mismatch:
    """One expected value that did not match (``actual`` may be :data:`MISSING`)."""

    path: str
    expected: Any
    actual: Any
    note: str | None = None


@dataclass
class StepFailure:
    """A step that missed its expectations."""

    expectation: StepExpectation
    hook: str
    mismatches: list[Mismatch] = field(default_factory=list)
    report: StepReport | None = None


class ScenarioRunError(ScenarioError):
    """A step raised while the scenario ran; ``__cause__`` is the exception.

    ``index`` is the step that was running (``None``: before the first step);
    ``detail`` is the message without the file name.
    """

    def __init__(self, detail: str, source: str | None = None, *, index: int | None = None) -> None:
        self.detail = detail
        self.index = index
        super().__init__([], source, headline=f"{source}: {detail}" if source else detail)


def checked_scenario(scenario: Scenario) -> CheckedScenario:
    """The expectations of an (already validated) scenario."""
    expectations = []
    for index, step in enumerate(scenario.steps):
        expectations.append(
            StepExpectation(
                index=index,
                label=step_label(index, step.name),
                hook=step.hook,
                name=step.name,
                outcome=step.expect,
                handlers=step.expect_handlers,
                approval=step.expect_approval
                if "expect_approval" in step.model_fields_set
                else MISSING,
            )
        )
    return CheckedScenario(scenario, expectations)


def load_checked_scenario(path: str | Path) -> CheckedScenario:
    """Read a scenario file (:class:`ScenarioError` names the key and the step)."""
    return checked_scenario(load_scenario(path))


def preflight(host: PluginHost, checked: CheckedScenario, *, source: str | None = None) -> None:
    """Name the step of an unknown hook or invalid event/ctx before anything runs.

    Raises :class:`ScenarioError` listing every problem (``step 2 (steps[1]): unknown
    hook 'befor_tool_call'; did you mean 'before_tool_call'?``).
    """
    problems: list[tuple[str, str]] = []
    for expectation, step in zip(checked.expectations, checked.scenario.steps, strict=True):
        decl = host.declarations.get(step.hook)
        if decl is None:
            hint = did_you_mean(step.hook, host.declarations)
            problems.append((expectation.label, f"unknown hook {step.hook!r}{hint}"))
            continue
        if decl.deprecation is not None and decl.deprecation.alias_of:
            decl = host.declarations.get(decl.deprecation.alias_of, decl)
        for what, model, value in (("event", decl.event, step.event), ("ctx", decl.ctx, step.ctx)):
            try:
                model.model_validate(value)
            except ValidationError as exc:
                errors = "; ".join(
                    f"{'.'.join(str(p) for p in e['loc']) or '<root>'}: {e['msg']}"
                    for e in exc.errors()
                )
                problems.append((f"{expectation.label} ({step.hook})", f"invalid {what}: {errors}"))
    if problems:
        headline = f"{source} cannot run:" if source else "the scenario cannot run:"
        raise ScenarioError(problems, source, headline=headline)


async def run_checked(
    checked: CheckedScenario,
    host: PluginHost,
    *,
    source: str | None = None,
    interactive: bool = False,
) -> list[StepReport]:
    """``run_scenario``; an exception is re-raised as :class:`ScenarioRunError` naming
    the step that was running (the original is its ``__cause__``)."""
    current: list[int] = []
    try:
        return await run_scenario(
            checked.scenario, host, on_step=current.append, interactive=interactive
        )
    except Exception as exc:
        index = current[-1] if current else None
        where = "before the first step"
        if index is not None and index < len(checked.expectations):
            expectation = checked.expectations[index]
            where = f"at {expectation.label} {expectation.hook}"
        detail = f"running the scenario failed {where}: {type(exc).__name__}: {exc}"
        raise ScenarioRunError(detail, source, index=index) from exc


# -- comparison ------------------------------------------------------------------------

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def _join(path: str, key: object) -> str:
    if isinstance(key, str) and _IDENT.match(key):
        return f"{path}.{key}" if path else key
    return f"{path}[{json.dumps(key)}]"


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def _equal(expected: Any, actual: Any) -> bool:
    if isinstance(expected, bool) or isinstance(actual, bool):
        return type(expected) is type(actual) and expected == actual
    return bool(expected == actual)


def match(expected: Any, actual: Any, path: str, out: list[Mismatch]) -> None:
    """Subset match: every key of an expected dict must match; lists match item by item."""
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            out.append(Mismatch(path, expected, actual))
            return
        for key, value in expected.items():
            name = key if key in actual else _snake(str(key))
            sub = _join(path, key)
            if name not in actual:
                # Outcome dumps leave out None fields: a missing key equals null.
                if value is not None:
                    out.append(Mismatch(sub, value, MISSING))
                continue
            match(value, actual[name], sub, out)
    elif isinstance(expected, list):
        if not isinstance(actual, list) or len(actual) != len(expected):
            out.append(Mismatch(path, expected, actual))
            return
        for index, (want, got) in enumerate(zip(expected, actual, strict=True)):
            match(want, got, f"{path}[{index}]", out)
    elif not _equal(expected, actual):
        out.append(Mismatch(path, expected, actual))


def match_handlers(
    expected: Mapping[str, Any], reports: list[dict[str, Any]], out: list[Mismatch]
) -> None:
    """Check ``expect_handlers`` against a step's handler reports."""
    by_plugin: dict[str, list[dict[str, Any]]] = {}
    for report in reports:
        by_plugin.setdefault(str(report.get("plugin_id")), []).append(report)
    summary = handler_summary(reports)
    for plugin_id, want in expected.items():
        path = f"handlers[{json.dumps(plugin_id)}]"
        got = by_plugin.get(plugin_id, [])
        if want is None:
            if got:
                statuses = [r.get("status") for r in got]
                out.append(Mismatch(path, None, statuses, "the plugin was expected not to run"))
            continue
        if not got:
            out.append(Mismatch(path, want, MISSING, f"no handler of this plugin ran ({summary})"))
            continue
        wants = want if isinstance(want, list) else [want] * len(got)
        if len(wants) != len(got):
            statuses = [r.get("status") for r in got]
            out.append(Mismatch(path, want, statuses, f"{len(got)} handler(s) ran"))
            continue
        for index, (one, report) in enumerate(zip(wants, got, strict=True)):
            where = path if len(got) == 1 else f"{path}[{index}]"
            pattern = {"status": one} if isinstance(one, str) else one
            found: list[Mismatch] = []
            match(pattern, report, where, found)
            for mismatch in found:
                if report.get("error"):
                    mismatch.note = f"error: {report['error']}"
            out.extend(found)


def handler_summary(reports: list[dict[str, Any]]) -> str:
    """``handlers: a=ok, b=error`` (or ``no handler ran``)."""
    if not reports:
        return "no handler ran"
    return "handlers: " + ", ".join(f"{r.get('plugin_id')}={r.get('status')}" for r in reports)


def check(checked: CheckedScenario, reports: list[StepReport]) -> list[StepFailure]:
    """Every step (of those that ran) that missed its expectations, in order."""
    failures = []
    for expectation, report in zip(checked.expectations, reports, strict=False):
        failure = StepFailure(expectation, report.hook, report=report)
        if expectation.outcome is not None:
            match(expectation.outcome, report.outcome, "outcome", failure.mismatches)
        if expectation.handlers is not None:
            match_handlers(expectation.handlers, report.handlers, failure.mismatches)
        if expectation.approval is not MISSING:
            want = expectation.approval
            if want is None:
                if report.approval is not None:
                    failure.mismatches.append(
                        Mismatch("approval", None, report.approval, "no approval was expected")
                    )
            elif report.approval is None:
                failure.mismatches.append(
                    Mismatch("approval", want, MISSING, "no approval was requested")
                )
            else:
                match(want, report.approval, "approval", failure.mismatches)
                if failure.mismatches and report.approval.get("reason"):
                    for mismatch in failure.mismatches:
                        if mismatch.path.startswith("approval") and mismatch.note is None:
                            mismatch.note = f"reason: {report.approval['reason']}"
        if failure.mismatches:
            failures.append(failure)
    return failures


# -- reports ---------------------------------------------------------------------------


def _show(value: Any, limit: int = 600) -> str:
    if value is MISSING:
        return "<missing>"
    text = json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def render_failures(name: str, steps: int, failures: list[StepFailure]) -> str:
    """The failure report: per failing step, each field with expected vs actual."""
    count = len(failures)
    plural = "s" if steps != 1 else ""
    lines = [f"{name}: {count} of {steps} step{plural} did not meet expectations"]
    for failure in failures:
        lines.append("")
        lines.append(f"{failure.expectation.label} {failure.hook}:")
        for mismatch in failure.mismatches:
            lines.append(f"  {mismatch.path}")
            lines.append(f"    expected: {_show(mismatch.expected)}")
            lines.append(f"    actual:   {_show(mismatch.actual)}")
            if mismatch.note:
                lines.append(f"    ({mismatch.note})")
        if failure.report is not None:
            lines.append(f"  actual outcome: {_show(failure.report.outcome, 400)}")
            lines.append(f"  {handler_summary(failure.report.handlers)}")
    return "\n".join(lines)


def failures_as_json(failures: list[StepFailure]) -> list[dict[str, Any]]:
    """The failures as JSON-ready dicts (``actual`` is left out when it is missing)."""
    rows = []
    for failure in failures:
        expectation = failure.expectation
        mismatches = []
        for m in failure.mismatches:
            row: dict[str, Any] = {"path": m.path, "expected": m.expected}
            if m.actual is MISSING:
                row["missing"] = True
            else:
                row["actual"] = m.actual
            if m.note:
                row["note"] = m.note
            mismatches.append(row)
        rows.append(
            {
                "step": expectation.index + 1,
                "index": expectation.index,
                "name": expectation.name,
                "label": expectation.label,
                "hook": failure.hook,
                "mismatches": mismatches,
            }
        )
    return rows
