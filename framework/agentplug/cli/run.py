"""``agentplug run SCENARIO.json``: replay a scenario (hook steps and conversation turns)
through real plugins and check it."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import traceback
from pathlib import Path
from typing import Any

from agentplug.cli.common import EXIT_FAILED, EXIT_OK, verbose

__all__ = ["HandlerFailures", "add_run_command", "cmd_run"]


class HandlerFailures:
    """The exceptions handlers raised during a run, in order (``capture_failures`` sink).

    Dispatch traces carry the exception type only; the operator running the scenario
    sees the message, and with ``-v`` the traceback.
    """

    def __init__(self) -> None:
        self._seen: list[tuple[str, str, BaseException]] = []

    def __call__(self, hook: str, plugin_id: str, exc: BaseException) -> None:
        self._seen.append((hook, plugin_id, exc))

    def take(self, hook: str, plugin_id: str) -> BaseException | None:
        """The oldest unreported exception of ``plugin_id``'s handler of ``hook``."""
        for index, (seen_hook, seen_plugin, exc) in enumerate(self._seen):
            if (seen_hook, seen_plugin) == (hook, plugin_id):
                del self._seen[index]
                return exc
        return None


def _exception_text(exc: BaseException) -> str:
    message = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__


def _print_handler(h: dict[str, Any], failures: HandlerFailures, args: argparse.Namespace) -> None:
    error = h.get("error")
    exc = failures.take(h["hook"], h["plugin_id"]) if h["status"] == "error" else None
    if exc is not None:
        error = f"plugin {h['plugin_id']!r}, hook {h['hook']!r} raised {_exception_text(exc)}" + (
            "" if verbose(args) else " (-v for the traceback)"
        )
    extra = f"  - {error}" if error else ""
    print(
        f"  {h['plugin_id']:<24} {h['status']:<16} {h['duration_ms']:>9.3f} ms"
        f"  (priority {h['priority']}){extra}"
    )
    if exc is not None and verbose(args):
        lines = traceback.format_exception(exc)
        print("".join("      " + line for text in lines for line in text.splitlines(True)), end="")


def _print_turns(scenario: Any, turns: list[Any]) -> None:
    """One block per conversation turn: the runner's trace summary, then the reply."""
    from agentplug.agent.trace import summary_lines

    for turn, report in zip(scenario.conversation, turns, strict=False):
        title = f" - {turn.name}" if turn.name else ""
        print(f"turn {report.index + 1}{title}")
        for line in summary_lines(report.result.trace):
            print(f"  {line}")
        result = report.result
        print(f"  => {result.status} (success={result.success}): {result.reply!r}")
        print()


def cmd_run(args: argparse.Namespace) -> int:
    """Replay the scenario; exit 1 when an expectation fails (2: invalid scenario)."""
    from agentplug.core.failures import capture_failures
    from agentplug.testing.scenario import build_host
    from agentplug.testing.scenario_check import (
        check,
        failures_as_json,
        load_checked_scenario,
        preflight,
        render_failures,
        run_checked,
    )

    checked = load_checked_scenario(args.scenario)
    scenario = checked.scenario
    if verbose(args):
        print(
            f"agentplug: config: the `config` of {args.scenario} (a scenario is self-contained:"
            " --config, $AGENTPLUG_CONFIG and ./agentplug.* are not read)",
            file=sys.stderr,
        )
    host = build_host(scenario)  # module: plugins import from the scenario's directory
    preflight(host, checked, source=args.scenario)  # unknown hooks, invalid events
    failures = HandlerFailures()
    interactive = sys.stdin.isatty()
    turns: list[Any] = []
    with capture_failures(failures):
        reports = (
            asyncio.run(run_checked(checked, host, source=args.scenario, interactive=interactive))
            if scenario.steps
            else []
        )
        if scenario.conversation:
            from agentplug.testing.conversation import run_conversation_checked

            turns = asyncio.run(
                run_conversation_checked(
                    scenario, host, source=args.scenario, interactive=interactive
                )
            )
    mismatches = check(checked, reports)
    if turns:
        from agentplug.testing.conversation import check_conversation, turn_has_expectations

        mismatches += check_conversation(scenario, turns)
    expectations = checked.has_expectations or (
        bool(turns) and any(turn_has_expectations(t) for t in scenario.conversation)
    )
    if args.json:
        for report in reports:
            print(json.dumps(report.model_dump(mode="json"), default=str))
        for turn in turns:
            print(json.dumps(turn.to_json(), default=str))
        if expectations:
            summary = {"passed": not mismatches, "failures": failures_as_json(mismatches)}
            print(json.dumps({"expectations": summary}, default=str))
        return EXIT_FAILED if mismatches else EXIT_OK
    if scenario.description:
        print(scenario.description)
        print()
    for number, (step, report) in enumerate(zip(scenario.steps, reports, strict=False), 1):
        title = f" - {step.name}" if step.name else ""
        print(f"step {number}: {report.hook}{title}")
        for h in report.handlers:
            _print_handler(h, failures, args)
        if not report.handlers:
            print("  (no handlers)")
        print(f"  => {json.dumps(report.outcome, default=str)}")
        if report.approval is not None:
            verdict = "allowed" if report.approval["allowed"] else "blocked"
            resolution, reason = report.approval["resolution"], report.approval["reason"]
            print(f"  approval: {resolution} -> {verdict}: {reason}")
        print()
    if turns:
        _print_turns(scenario, turns)
    if mismatches:
        total = len(reports) + len(turns)
        print(render_failures(Path(args.scenario).name, total, mismatches))
        return EXIT_FAILED
    if expectations:
        count = sum(e.checks_something for e in checked.expectations)
        what = f"{count} step{'s' if count != 1 else ''}"
        if turns:
            from agentplug.testing.conversation import turn_has_expectations

            checked_turns = sum(turn_has_expectations(t) for t in scenario.conversation)
            turn_text = f"{checked_turns} turn{'s' if checked_turns != 1 else ''}"
            what = turn_text if not count else f"{what}, {turn_text}"
        print(f"expectations: all met ({what} checked)")
    return EXIT_OK


def add_run_command(sub: Any) -> None:
    """``agentplug run SCENARIO.json [--json]``."""
    p = sub.add_parser(
        "run",
        help="replay a scenario through real plugins and check its expectations",
        description="Replay the hook calls of a scenario file through real plugins, or run its "
        "conversation turns through the agent runner, and check the steps' expect, "
        "expect_handlers and expect_approval keys and the turns' expectations (as the pytest "
        "scenario items do). 'module:' plugins are imported with the scenario file's "
        "directory on sys.path. The scenario's own `config` is the operator config "
        "(no config file is read). A handler that raises is shown with its plugin, hook "
        "and message; -v adds the traceback.",
        epilog="exit status: 0 = ran (and every expectation was met), 1 = an expectation "
        "failed, 2 = the scenario is invalid or cannot run",
    )
    p.add_argument("scenario", metavar="SCENARIO.json", help="the scenario file (JSON)")
    p.add_argument(
        "--json",
        action="store_true",
        help='one JSON object per step and per turn, then {"expectations": {"passed", "failures"}} '
        "when the scenario has expectations",
    )
    p.set_defaults(func=cmd_run)
