"""``agentplug hooks``, ``agentplug plugins`` and ``agentplug doctor``: what is declared,
what is installed, and whether the config and the plugins agree."""

from __future__ import annotations

import argparse
import difflib
import json
import traceback
from typing import Any

from agentplug.cli.common import (
    EXIT_FAILED,
    EXIT_OK,
    command_config,
    command_gateway,
    one_line,
    verbose,
)
from agentplug.cli.reference import hook_summary
from agentplug.config.lookup import CONFIG_HELP, locate_config
from agentplug.config.model import AgentplugConfig, load_config
from agentplug.core.errors import ConfigError
from agentplug.core.host import HookHost
from agentplug.core.overruns import overrun_notes

__all__ = ["add_catalogue_commands", "cmd_doctor", "cmd_hooks", "cmd_plugins", "plugin_rows"]


def _print_json(obj: Any) -> None:
    print(json.dumps(obj, indent=2, sort_keys=False, default=str))


def cmd_hooks(args: argparse.Namespace) -> int:
    """Every declared hook, one line each (``--json``: the machine-readable summary)."""
    config, _ = command_config(args)
    host = command_gateway(config, plugins=not args.builtin_only).host
    rows = [hook_summary(d) for d in host.declarations.values()]
    if args.json:
        _print_json(rows)
        return EXIT_OK
    for r in rows:
        gates = ",".join(g for g in ("conversation", "prompt") if r[f"{g}_gate"]) or "-"
        removal = f"removed in {r['removed_in']}; " if r["removed_in"] else ""
        dep = f"  DEPRECATED ({removal}use {r['replacement']})" if r["deprecated"] else ""
        timeout = f"{r['default_timeout_ms']}ms" if r["default_timeout_ms"] else "-"
        print(f"{r['name']:<32} {r['kind']:<9} {timeout:>8} {r['failure']:<12} {gates}{dep}")
    return EXIT_OK


def plugin_rows(host: HookHost) -> list[dict[str, Any]]:
    """One row per registered or failed plugin, with its handlers' effective settings."""
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
        row = {**record.model_dump(mode="json", exclude={"hooks"}), "hooks": hooks}
        row["warnings"] = row["warnings"] + overrun_notes(record.plugin_id)
        rows.append(row)
    rows += [r.model_dump(mode="json") for r in host.failed_plugins]
    return rows


def cmd_plugins(args: argparse.Namespace) -> int:
    """Discovered plugins, their handlers (priority, timeout, gate) and load errors."""
    config, _ = command_config(args)
    host = command_gateway(config, use_cache=not args.no_cache).host
    rows = plugin_rows(host)
    if args.json:
        _print_json(rows)
        return EXIT_OK
    if not rows:
        print("no plugins found (entry-point group 'agentplug')")
    causes = {err.plugin_id: err.__cause__ for err in host.load_errors}
    for r in rows:
        kind = "bundled" if r["bundled"] else "installed"
        dist = f"{r.get('distribution') or '?'} {r.get('version') or ''}".strip()
        name = f"  {r['name']!r}" if r.get("name") else ""
        print(f"{r['plugin_id']}{name}  [{kind}; {dist}]")
        if r.get("description"):
            print(f"  {r['description']}")
        if r.get("error"):
            cause = causes.get(r["plugin_id"])
            hint = " (-v for the traceback)" if cause is not None and not verbose(args) else ""
            print(f"  LOAD ERROR: plugin {r['plugin_id']!r}: {r['error']}{hint}")
            if cause is not None and verbose(args):
                text = "".join(traceback.format_exception(cause))
                print("".join(f"      {line}" for line in text.splitlines(True)), end="")
        gates = set()
        for h in r.get("hooks", []):
            gate = f"  BLOCKED: {h['gate']}" if h.get("gate") else ""
            gates.add(h.get("gate"))
            print(
                f"  {h['hook']:<30} priority {h['priority']:>4}  timeout {h['timeout_ms']} ms"
                f" ({h['timeout_source']}){gate}"
            )
        for w in r.get("warnings", []):
            if w not in gates:  # a refused hook is shown once, on its BLOCKED line
                print(f"  warning: {w}")
    return EXIT_OK


def cmd_doctor(args: argparse.Namespace) -> int:
    """Validate config and plugins; exit 1 with a readable report when something is wrong."""
    problems: list[str] = []
    notes: list[str] = []
    source = locate_config(args.config)
    try:
        config = load_config(source.path) if source.path is not None else AgentplugConfig()
    except ConfigError as exc:  # the problem names the file: one line, not two
        print(f"PROBLEM: {one_line(exc)}")
        print("doctor: 1 problem(s)")
        return EXIT_FAILED
    print(source.describe())
    from agentplug.cli.state import store_status

    # The state store: reachable, its schema version and the failures seen (read only).
    store_lines, store_problems = store_status(config)
    for line in store_lines:
        print(line)
    problems += store_problems
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
    host = command_gateway(config, use_cache=False).host
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
        notes += [f"{record.plugin_id}: warning: {w}" for w in overrun_notes(record.plugin_id)]
    print(f"hooks declared: {len(host.declarations)}; plugins loaded: {len(host.plugins)}")
    for n in notes:
        print(f"note: {n}")
    for p in problems:
        print(f"PROBLEM: {p}")
    print("doctor: OK" if not problems else f"doctor: {len(problems)} problem(s)")
    return EXIT_OK if not problems else EXIT_FAILED


def add_catalogue_commands(sub: Any) -> None:
    """``hooks``, ``plugins`` and ``doctor``."""
    p = sub.add_parser("hooks", help="list every declared hook")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument("--config", metavar="FILE", help=CONFIG_HELP)
    p.add_argument("--builtin-only", action="store_true", help="skip installed hookspecs")
    p.set_defaults(func=cmd_hooks)

    p = sub.add_parser(
        "plugins",
        help="list discovered plugins and their handlers",
        description="Discovered plugins (display name and description when the plugin "
        "gives them), each handler's effective priority, timeout and gate, and load "
        "errors (-v adds the traceback).",
    )
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument("--config", metavar="FILE", help=CONFIG_HELP)
    p.add_argument("--no-cache", action="store_true", help="rescan the environment")
    p.set_defaults(func=cmd_plugins)

    p = sub.add_parser(
        "doctor",
        help="validate config and plugins",
        description="Say which config file is used, validate it and the installed plugins, "
        "and check the state store (reachable, schema version, failures seen).",
        epilog="exit status: 0 = no problem, 1 = problems (each one line)",
    )
    p.add_argument("--config", metavar="FILE", help=CONFIG_HELP)
    p.set_defaults(func=cmd_doctor)
