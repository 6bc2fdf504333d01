"""The ``agentplug`` command line."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agentplug.cli.reference import hook_summary, render_hook_reference
from agentplug.core.config import AgentplugConfig, load_config
from agentplug.core.errors import AgentplugError
from agentplug.core.host import PluginHost

__all__ = ["main"]


def _config(path: str | None) -> AgentplugConfig:
    path = path or os.environ.get("AGENTPLUG_CONFIG")
    return load_config(path) if path else AgentplugConfig()


def _print_json(obj: Any) -> None:
    print(json.dumps(obj, indent=2, sort_keys=False, default=str))


def cmd_run(args: argparse.Namespace) -> int:
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
    host = build_host(scenario)  # module: plugins import from the scenario's directory
    preflight(host, checked, source=args.scenario)  # unknown hooks, invalid events
    interactive = sys.stdin.isatty()
    reports = (
        asyncio.run(run_checked(checked, host, source=args.scenario, interactive=interactive))
        if scenario.steps
        else []
    )
    turns: list[Any] = []
    if scenario.conversation:
        from agentplug.testing.conversation import run_conversation_checked

        turns = asyncio.run(
            run_conversation_checked(scenario, host, source=args.scenario, interactive=interactive)
        )
    failures = check(checked, reports)
    if turns:
        from agentplug.testing.conversation import check_conversation, turn_has_expectations

        failures += check_conversation(scenario, turns)
    expectations = checked.has_expectations or (
        bool(turns) and any(turn_has_expectations(t) for t in scenario.conversation)
    )
    if args.json:
        for report in reports:
            print(json.dumps(report.model_dump(mode="json"), default=str))
        for turn in turns:
            print(json.dumps(turn.to_json(), default=str))
        if expectations:
            summary = {"passed": not failures, "failures": failures_as_json(failures)}
            print(json.dumps({"expectations": summary}, default=str))
        return 1 if failures else 0
    if scenario.description:
        print(scenario.description)
        print()
    for number, (step, report) in enumerate(zip(scenario.steps, reports, strict=False), 1):
        title = f" - {step.name}" if step.name else ""
        print(f"step {number}: {report.hook}{title}")
        for h in report.handlers:
            extra = f"  - {h['error']}" if h.get("error") else ""
            print(
                f"  {h['plugin_id']:<24} {h['status']:<16} {h['duration_ms']:>9.3f} ms"
                f"  (priority {h['priority']}){extra}"
            )
        if not report.handlers:
            print("  (no handlers)")
        print(f"  => {json.dumps(report.outcome, default=str)}")
        if report.approval is not None:
            verdict = "allowed" if report.approval["allowed"] else "blocked"
            resolution, reason = report.approval["resolution"], report.approval["reason"]
            print(f"  approval: {resolution} -> {verdict}: {reason}")
        print()
    if turns:
        from agentplug.agent.trace import summary_lines

        for turn, report in zip(scenario.conversation, turns, strict=False):
            title = f" - {turn.name}" if turn.name else ""
            print(f"turn {report.index + 1}{title}")
            for line in summary_lines(report.result.trace):
                print(f"  {line}")
            result = report.result
            print(f"  => {result.status} (success={result.success}): {result.reply!r}")
            print()
    total = len(reports) + len(turns)
    if failures:
        print(render_failures(Path(args.scenario).name, total, failures))
        return 1
    if expectations:
        count = sum(e.checks_something for e in checked.expectations)
        what = f"{count} step{'s' if count != 1 else ''}"
        if turns:
            checked_turns = sum(turn_has_expectations(t) for t in scenario.conversation)
            turn_text = f"{checked_turns} turn{'s' if checked_turns != 1 else ''}"
            what = turn_text if not count else f"{what}, {turn_text}"
        print(f"expectations: all met ({what} checked)")
    return 0


def cmd_hooks(args: argparse.Namespace) -> int:
    host = PluginHost(_config(args.config))
    if not args.builtin_only:
        host.load_installed()
    rows = [hook_summary(d) for d in host.declarations.values()]
    if args.json:
        _print_json(rows)
        return 0
    for r in rows:
        gates = ",".join(g for g in ("conversation", "prompt") if r[f"{g}_gate"]) or "-"
        dep = f" (deprecated: use {r['replacement']})" if r["deprecated"] else ""
        timeout = f"{r['default_timeout_ms']}ms" if r["default_timeout_ms"] else "-"
        print(f"{r['name']:<32} {r['kind']:<9} {timeout:>8} {r['failure']:<12} {gates}{dep}")
    return 0


def _plugin_rows(host: PluginHost) -> list[dict[str, Any]]:
    rows = []
    for record in host.plugins:
        hooks = []
        for hook in record.hooks + record.refused_hooks:
            decl = host.declarations[hook]
            target = (
                decl.deprecation.alias_of
                if decl.deprecation and decl.deprecation.alias_of
                else hook
            )
            for h in host.plan(target):
                if h.plugin_id == record.plugin_id and h.hook == hook:
                    hooks.append(
                        {
                            "hook": hook,
                            "priority": h.priority,
                            "timeout_ms": None
                            if h.timeout_s is None
                            else round(h.timeout_s * 1000),
                            "timeout_source": h.timeout_source,
                            "gate": h.gate,
                        }
                    )
        rows.append({**record.model_dump(mode="json", exclude={"hooks"}), "hooks": hooks})
    rows += [r.model_dump(mode="json") for r in host.failed_plugins]
    return rows


def cmd_plugins(args: argparse.Namespace) -> int:
    host = PluginHost(_config(args.config))
    host.load_installed(use_cache=not args.no_cache)
    rows = _plugin_rows(host)
    if args.json:
        _print_json(rows)
        return 0
    if not rows:
        print("no plugins found (entry-point group 'agentplug')")
    for r in rows:
        kind = "bundled" if r["bundled"] else "installed"
        dist = f"{r.get('distribution') or '?'} {r.get('version') or ''}".strip()
        print(f"{r['plugin_id']}  [{kind}; {dist}]")
        if r.get("error"):
            print(f"  LOAD ERROR: {r['error']}")
        for h in r.get("hooks", []):
            gate = f"  BLOCKED: {h['gate']}" if h.get("gate") else ""
            print(
                f"  {h['hook']:<30} priority {h['priority']:>4}  timeout {h['timeout_ms']} ms"
                f" ({h['timeout_source']}){gate}"
            )
        for w in r.get("warnings", []):
            print(f"  warning: {w}")
    return 0


def cmd_doctor(args: argparse.Namespace) -> int:
    """Validate config and plugins; exit 1 with a readable report when something is wrong."""
    import difflib

    problems: list[str] = []
    notes: list[str] = []
    source = args.config or os.environ.get("AGENTPLUG_CONFIG")
    try:
        config = _config(args.config)
    except AgentplugError as exc:
        print(f"config: {exc}")
        return 1
    if source:
        print(f"config: {source}")
    else:
        print("config: defaults (pass --config FILE or set AGENTPLUG_CONFIG)")
    known_top = set(AgentplugConfig.model_fields) | {
        f.alias for f in AgentplugConfig.model_fields.values() if f.alias
    }
    for key in config.model_extra or {}:
        close = difflib.get_close_matches(key, sorted(known_top), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else " (kept for the host)"
        notes.append(f"top-level key {key!r} is not an agentplug setting{hint}")
    from agentplug.actions.config_check import check_config

    # Every section, with the models the runtime reads it with.
    problems += [f"{key}: {problem}" for key, problem in check_config(config)]
    host = PluginHost(config)
    host.load_installed(use_cache=False)
    for err in host.load_errors:
        problems.append(str(err))
    known = set(host.declarations)
    for pid, entry in config.plugins.entries.items():
        for hook in entry.hooks.timeouts:
            if hook not in known:
                close = difflib.get_close_matches(hook, sorted(known), n=1)
                hint = f"; did you mean {close[0]!r}?" if close else " (see `agentplug hooks`)"
                problems.append(f"plugins.entries.{pid}.hooks.timeouts.{hook}: unknown hook{hint}")
        if pid not in {r.plugin_id for r in host.plugins} and entry.enabled:
            notes.append(f"plugins.entries.{pid}: configured but no such plugin is installed")
    for record in host.plugins:
        notes += [f"{record.plugin_id}: {w}" for w in record.warnings]
    print(f"hooks declared: {len(host.declarations)}; plugins loaded: {len(host.plugins)}")
    for n in notes:
        print(f"note: {n}")
    for p in problems:
        print(f"PROBLEM: {p}")
    print("doctor: OK" if not problems else f"doctor: {len(problems)} problem(s)")
    return 0 if not problems else 1


def cmd_config_schema(args: argparse.Namespace) -> int:
    _print_json(AgentplugConfig.model_json_schema(by_alias=True))
    return 0


def cmd_docs_hooks(args: argparse.Namespace) -> int:
    from agentplug_hookspecs import builtin_declarations

    text = render_hook_reference(builtin_declarations())
    if args.check:
        current = Path(args.check).read_text(encoding="utf-8") if Path(args.check).exists() else ""
        if current != text:
            print(f"{args.check} is out of date: run `agentplug docs hooks --write {args.check}`")
            return 1
        return 0
    if args.write:
        Path(args.write).write_text(text, encoding="utf-8")
        print(f"wrote {args.write}")
        return 0
    sys.stdout.write(text)
    return 0


def cmd_codegen(args: argparse.Namespace) -> int:
    from agentplug.cli.codegen import FACADE_PATH, render_facade, write_facade

    if args.check:
        ok = FACADE_PATH.read_text(encoding="utf-8") == render_facade()
        print("facade up to date" if ok else "facade.py is stale: run `agentplug dev codegen`")
        return 0 if ok else 1
    print("facade.py regenerated" if write_facade() else "facade.py already up to date")
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (exposed for documentation and tests)."""
    parser = argparse.ArgumentParser(prog="agentplug", description="The agentplug command line.")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser(
        "run",
        help="replay a scenario through real plugins and check its expectations",
        description="Replay the hook calls of a scenario file through real plugins and "
        "check the steps' expect, expect_handlers and expect_approval keys (as the pytest "
        "scenario items do). 'module:' plugins are imported with the scenario file's "
        "directory on sys.path.",
        epilog="exit status: 0 = ran (and every expectation was met), 1 = an expectation "
        "failed, 2 = the scenario is invalid or cannot run",
    )
    p.add_argument("scenario", metavar="SCENARIO.json")
    p.add_argument(
        "--json",
        action="store_true",
        help='one JSON object per step, then {"expectations": {"passed", "failures"}} '
        "when the scenario has expectations",
    )
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("hooks", help="list every declared hook")
    p.add_argument("--json", action="store_true")
    p.add_argument("--config")
    p.add_argument("--builtin-only", action="store_true", help="skip installed hookspecs")
    p.set_defaults(func=cmd_hooks)

    p = sub.add_parser("plugins", help="list discovered plugins and their handlers")
    p.add_argument("--json", action="store_true")
    p.add_argument("--config")
    p.add_argument("--no-cache", action="store_true", help="rescan the environment")
    p.set_defaults(func=cmd_plugins)

    p = sub.add_parser("doctor", help="validate config and plugins")
    p.add_argument("--config")
    p.set_defaults(func=cmd_doctor)

    p = sub.add_parser("config", help="operator config tools")
    csub = p.add_subparsers(dest="config_command", required=True)
    c = csub.add_parser("schema", help="print the JSON Schema of the operator config")
    c.set_defaults(func=cmd_config_schema)

    p = sub.add_parser("docs", help="documentation generators")
    dsub = p.add_subparsers(dest="docs_command", required=True)
    d = dsub.add_parser("hooks", help="the hook reference (Markdown)")
    d.add_argument("--write", metavar="PATH")
    d.add_argument("--check", metavar="PATH", help="exit 1 when PATH is out of date")
    d.set_defaults(func=cmd_docs_hooks)

    p = sub.add_parser("dev", help="maintainer tools")
    vsub = p.add_subparsers(dest="dev_command", required=True)
    v = vsub.add_parser("codegen", help="regenerate the typed facade")
    v.add_argument("--check", action="store_true")
    v.set_defaults(func=cmd_codegen)

    from agentplug.api.serve import add_serve_command
    from agentplug.cli.actions import add_actions_commands
    from agentplug.cli.approvals import add_approvals_commands
    from agentplug.cli.chat import add_chat_command
    from agentplug.cli.mcp_proxy import add_mcp_proxy_command
    from agentplug.plugins.manager import add_plugin_management_commands
    from agentplug.plugins.supervisor import add_supervisor_command

    add_actions_commands(sub)
    add_approvals_commands(sub)
    add_chat_command(sub)
    add_mcp_proxy_command(sub)
    add_serve_command(sub)
    add_plugin_management_commands(sub)
    add_supervisor_command(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``agentplug`` console script."""
    from agentplug.testing.scenario import ScenarioError

    parser = build_parser()
    args = parser.parse_args(argv)
    # Commands report problems themselves (handler reports, doctor notes); runtime log
    # records are shown from AGENTPLUG_LOG_LEVEL (default ERROR) so output stays readable.
    import logging

    logging.basicConfig(
        level=os.environ.get("AGENTPLUG_LOG_LEVEL", "ERROR").upper(),
        format="agentplug %(levelname)s %(name)s: %(message)s",
    )
    try:
        code: int = args.func(args)
    except ScenarioError as exc:
        print(f"agentplug: {exc}", file=sys.stderr)
        cause = exc.__cause__
        if cause is not None and not isinstance(cause, AgentplugError):  # a step crashed
            import traceback

            traceback.print_exception(cause, file=sys.stderr)
        return 2
    except AgentplugError as exc:
        print(f"agentplug: {exc}", file=sys.stderr)
        return 2
    except LookupError as exc:
        print(f"agentplug: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # output piped into `head` and the like
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    return code


if __name__ == "__main__":
    raise SystemExit(main())
