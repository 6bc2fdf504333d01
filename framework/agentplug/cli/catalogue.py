"""``agentplug hooks``, ``agentplug plugins`` and ``agentplug doctor``: what is declared,
what is installed, and whether the config and the plugins agree."""

from __future__ import annotations

import argparse
import json
import traceback
from typing import Any

from agentplug.cli.common import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    command_config,
    command_gateway,
    one_line,
    verbose,
)
from agentplug.config.lookup import CONFIG_HELP, ConfigSource, locate_config
from agentplug.config.model import AgentplugConfig
from agentplug.config.suggest import did_you_mean
from agentplug.core.catalogue import hook_summary, plugin_rows
from agentplug.core.errors import ConfigError, load_error_line
from agentplug.core.overruns import overrun_notes
from agentplug.store.location import STATE_DIR_HELP

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
    print(f"{'HOOK':<32} {'KIND':<9} {'TIMEOUT':>8} {'ON FAILURE':<12} GATES")
    for r in rows:
        gates = ",".join(g for g in ("conversation", "prompt") if r[f"{g}_gate"]) or "-"
        removal = f"removed in {r['removed_in']}; " if r["removed_in"] else ""
        dep = f"  DEPRECATED ({removal}use {r['replacement']})" if r["deprecated"] else ""
        timeout = f"{r['default_timeout_ms']}ms" if r["default_timeout_ms"] else "-"
        print(f"{r['name']:<32} {r['kind']:<9} {timeout:>8} {r['failure']:<12} {gates}{dep}")
    return EXIT_OK


def cmd_plugins(args: argparse.Namespace) -> int:
    """Discovered plugins, their handlers (priority, timeout, gate) and load errors."""
    config, _ = command_config(args)
    host = command_gateway(config, use_cache=not args.no_cache).host
    rows = plugin_rows(host)
    failed = EXIT_FAILED if host.load_errors else EXIT_OK  # a plugin that did not load
    if args.json:
        _print_json(rows)
        return failed
    if not rows:
        print(_no_plugins_line())
    causes = {err.plugin_id: err.__cause__ for err in host.load_errors}
    where = {err.plugin_id: load_error_line(err) for err in host.load_errors}
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
            line = where.get(r["plugin_id"]) or f"plugin {r['plugin_id']!r}: {r['error']}"
            print(f"  LOAD ERROR: {line}{hint}")
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
        for note in r.get("notes", []):
            print(f"  note: {note}")
        for w in r.get("warnings", []):
            if w not in gates:  # a refused hook is shown once, on its BLOCKED line
                print(f"  warning: {w}")
    return failed


def _no_plugins_line() -> str:
    from agentplug.core.loader import DISABLE_PLUGINS_ENV, installed_plugins_disabled

    if installed_plugins_disabled():
        return (
            f"no plugins loaded: installed plugins are off (--no-plugins or ${DISABLE_PLUGINS_ENV})"
        )
    return "no plugins found (entry-point group 'agentplug')"


def _doctor_config(
    source: ConfigSource, problems: list[str]
) -> tuple[AgentplugConfig, dict[str, Any]]:
    """The config file's problems, every one (added to ``problems`` as ``file: key:
    problem``), and the config made of its sections that have none (so that the plugins
    and the store are checked too)."""
    from agentplug.config.datafiles import DataFileError, read_data_file
    from agentplug.gateway.operator_config import config_problems

    if source.path is None:
        return AgentplugConfig(), {}
    where = str(source.path)
    try:
        data = read_data_file(source.path)
    except DataFileError as exc:
        problems.append(one_line(exc))
        return AgentplugConfig(), {}
    if not isinstance(data, dict):
        problems.append(f"{where}: the config must be an object (a table)")
        return AgentplugConfig(), {}
    issues = config_problems(data)
    problems += [f"{where}: {key}: {problem}" for key, problem in issues]
    bad = {key.split(".")[0].split("[")[0] for key, _ in issues}
    kept = {k: v for k, v in data.items() if k not in bad}
    try:
        return AgentplugConfig.parse(kept, where), data
    except ConfigError:  # cannot happen: every bad section was left out
        return AgentplugConfig(), data


def cmd_doctor(args: argparse.Namespace) -> int:
    """Validate the config (every section, every problem), the plugins and the store."""
    from agentplug.gateway.operator_config import model_problems, unknown_sections

    config_found: list[str] = []
    problems: list[str] = []
    notes: list[str] = []
    source = locate_config(args.config)
    print(source.describe())
    config, data = _doctor_config(source, config_found)
    where = f"{source.path}: " if source.path is not None else ""
    notes += [
        f"{where}top-level key {key!r} is not an agentplug section (kept for the host)"
        for key in unknown_sections(data)
    ]
    config_found += [f"{where}{key}: {problem}" for key, problem in model_problems(data)]
    from agentplug.cli.common import command_state
    from agentplug.cli.state import store_status

    # The state store: reachable, its schema version and the failures seen (read only).
    store_lines, store_problems = store_status(command_state(args, config))
    for line in store_lines:
        print(line)
    problems += store_problems
    folder = command_state(args, config).state_dir
    host = command_gateway(config, use_cache=False, state_dir=folder).host
    problems += [load_error_line(err) for err in host.load_errors]
    known = set(host.declarations)
    for pid, entry in config.plugins.entries.items():
        for hook in entry.hooks.timeouts:
            if hook not in known:
                hint = did_you_mean(hook, sorted(known), otherwise=" (see `agentplug hooks`)")
                config_found.append(
                    f"{where}plugins.entries.{pid}.hooks.timeouts.{hook}: unknown hook{hint}"
                )
        if pid not in {r.plugin_id for r in host.plugins} and entry.enabled:
            notes.append(f"plugins.entries.{pid}: configured but no such plugin is installed")
    for record in host.plugins:
        notes += [f"{record.plugin_id}: {n}" for n in record.notes]
        notes += [f"{record.plugin_id}: {w}" for w in record.warnings]
        notes += [f"{record.plugin_id}: warning: {w}" for w in overrun_notes(record.plugin_id)]
    print(f"hooks declared: {len(host.declarations)}; plugins loaded: {len(host.plugins)}")
    for n in notes:
        print(f"note: {n}")
    for p in config_found + problems:
        print(f"PROBLEM: {p}")
    total = len(config_found) + len(problems)
    print("doctor: OK" if not total else f"doctor: {total} problem(s)")
    if config_found:
        return EXIT_USAGE  # an invalid config: the code every command exits with for it
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
        "errors with the file and line that raised (-v adds the traceback).",
        epilog="exit status: 0 = every plugin loaded, 1 = a plugin failed to load",
    )
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument("--config", metavar="FILE", help=CONFIG_HELP)
    p.add_argument("--no-cache", action="store_true", help="rescan the environment")
    p.set_defaults(func=cmd_plugins, reports_load_errors=True)

    p = sub.add_parser(
        "doctor",
        help="validate config and plugins",
        description="Say which config file is used and validate every section of it (every "
        "problem in one run, each with the file, the key and a did-you-mean), the installed "
        "plugins and the state store (reachable, schema version, failures seen).",
        epilog="exit status: 0 = no problem, 1 = problems with plugins or the state store, "
        "2 = problems in the config file (each one line; the code every command exits with "
        "on an invalid config)",
    )
    p.add_argument("--config", metavar="FILE", help=CONFIG_HELP)
    p.add_argument("--state-dir", metavar="DIR", help=STATE_DIR_HELP)
    p.set_defaults(func=cmd_doctor, reports_load_errors=True)
