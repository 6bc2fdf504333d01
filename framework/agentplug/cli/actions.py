"""``agentplug actions ...``: list every action, try a custom one, run the whole flow.

``agentplug actions list [--config FILE] [--json]`` lists every action of a host built from
the config (none needed): built-ins, actions of installed plugins and custom actions
(``customActions``), each with its source, whether it is enabled and, when it is not, why
(``shell disabled: set actions.shell.enabled = true``); malformed custom entries are
reported on stderr.

``agentplug actions test NAME [--config FILE] [--param KEY=VALUE ...] [--json]`` runs one
custom definition's handler through :func:`~agentplug.actions.custom.build_test_handler`
(nothing is registered) and prints ``{ok, output}``; the exit code is 0 when ``ok`` is true,
1 when it is false, 2 for usage errors (unknown action, unreadable config, malformed
``--param``).

Every command finds its config with the one lookup of
:mod:`agentplug.config.lookup` (``--config``, ``$AGENTPLUG_CONFIG``,
``./agentplug.{toml,yaml,json}``, none). The host CLI calls :func:`add_actions_commands`
with its subparsers; every leaf parser sets ``func`` to a callable taking the parsed
namespace and returning the exit code. :func:`run_actions_cli` runs the same commands
standalone (``python -m agentplug.cli.actions``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Sequence
from typing import Any

from agentplug.actions.custom import (
    CustomActionConfigError,
    CustomActionDef,
    CustomActionServices,
    build_test_handler,
    read_custom_action_defs,
)
from agentplug.actions.registry import normalize_action_name
from agentplug.cli.common import EXIT_FAILED, EXIT_OK, EXIT_USAGE, command_config, one_line
from agentplug.config.lookup import CONFIG_HELP
from agentplug.config.model import AgentplugConfig
from agentplug.core.errors import AgentplugError
from agentplug.security.ssrf import SSRFPolicy

__all__ = ["add_actions_commands", "main", "run_actions_cli"]

_SUMMARY = (
    "List every action (built-in, plugin, custom) with why it is off, test one custom "
    "action, or run a message through the whole action flow."
)


def add_actions_commands(subparsers: Any) -> None:
    """Add the ``actions`` command (with ``list`` and ``test``) to a host CLI's subparsers.

    ``subparsers`` is what ``ArgumentParser.add_subparsers()`` returned.
    """
    parser = subparsers.add_parser(
        "actions",
        help="list every action, test a custom one, run the action flow",
        description=_SUMMARY,
    )
    _add_subcommands(parser)


def _add_subcommands(parser: argparse.ArgumentParser) -> None:
    parser.set_defaults(func=lambda args: _usage(parser))
    commands = parser.add_subparsers(dest="actions_command", metavar="{list,test,run}")

    listing = commands.add_parser(
        "list",
        help="list every action: built-in, plugin and custom, enabled or not (and why)",
        description="Every action of a host built from the config (no config needed): "
        "its source (builtin, plugin, custom, host), whether it is enabled and why not.",
    )
    listing.add_argument("--config", metavar="FILE", help=CONFIG_HELP)
    listing.add_argument("--json", action="store_true", help="print JSON")
    listing.set_defaults(func=cmd_list)

    test = commands.add_parser(
        "test", help="run one custom action's handler without registering it"
    )
    test.add_argument("name", metavar="NAME", help="the action's name or id")
    test.add_argument("--config", metavar="FILE", help=CONFIG_HELP)
    test.add_argument(
        "--param",
        metavar="KEY=VALUE",
        action="append",
        default=[],
        help="parameter value (repeatable)",
    )
    test.add_argument("--json", action="store_true", help="print {ok, output} as JSON")
    test.add_argument(
        "--allow-host",
        metavar="HOST[:PORT]",
        action="append",
        default=[],
        help="admit this internal host in the SSRF policy (http and code handlers)",
    )
    test.add_argument(
        "--cwd", metavar="DIR", help="working directory of shell handlers (default: current)"
    )
    test.add_argument(
        "--timeout", metavar="SECONDS", type=float, default=30.0, help="shell handler timeout"
    )
    test.set_defaults(func=cmd_test)

    run = commands.add_parser(
        "run",
        help="run a message through the full action flow of a host",
        description=(
            "Build the host from the config (installed plugins, built-ins, plugin and "
            "custom actions), then select, validate, extract parameters, execute and "
            "deliver: e.g. agentplug actions run 'CORE_STATUS' or "
            'agentplug actions run \'LOG_LEVEL {"level": "debug"}\' --room r1'
        ),
    )
    run.add_argument("message", metavar="TEXT", help="the message (action name + parameters)")
    run.add_argument("--config", metavar="FILE", help=CONFIG_HELP)
    run.add_argument("--room", metavar="ID", help="room id of the message")
    run.add_argument("--json", action="store_true", help="print the result and trace as JSON")
    run.set_defaults(func=cmd_run)


def cmd_run(args: argparse.Namespace) -> int:
    """``actions run``: the whole flow on a real host; exit 1 unless the action succeeded."""
    from agentplug.actions.model import Message
    from agentplug.gateway import Gateway

    try:
        config, _ = command_config(args)
    except AgentplugError as exc:
        return _error(one_line(exc))

    from agentplug.agent.selection import language_aware_flow

    try:
        # With ``agent.model`` configured the model chooses the action and reads its
        # parameters from plain language; without it the deterministic flow runs.
        language_aware_flow(config.agent)
    except AgentplugError as exc:
        return _error(str(exc))

    async def go() -> tuple[Any, list[str]]:
        gateway = Gateway.from_config(config, load_plugins=True)
        # Its calls fire the model-call hooks on this gateway's host.
        language = language_aware_flow(config.agent, gateway.host)
        problems = await gateway.actions.load()
        try:
            message = Message(text=args.message, room_id=args.room)
            if language is None:
                flow = await gateway.actions.run(message)
            else:
                flow = await gateway.actions.run(
                    message, selector=language[0], extractor=language[1]
                )
        finally:
            await gateway.aclose(1.0)
        return flow, problems

    flow, problems = asyncio.run(go())
    result = flow.result
    if args.json:
        print(
            json.dumps(
                {
                    "outcome": flow.outcome,
                    "action": flow.action.name if flow.action else None,
                    "result": result.model_dump(mode="json") if result else None,
                    "trace": flow.trace.model_dump(mode="json"),
                    "problems": problems,
                },
                default=str,
            )
        )
    else:
        for problem in problems:
            print(f"note: {problem}", file=sys.stderr)
        for step in flow.trace.steps:
            detail = f" - {step.detail}" if step.detail else ""
            print(f"  {step.name:<16} {step.status:<8} {step.duration_ms:8.3f} ms{detail}")
        name = flow.action.name if flow.action else "(no action)"
        print(f"{name}: {flow.outcome}")
        if result is not None:
            print(result.text)
    return EXIT_OK if flow.ok else EXIT_FAILED


def _usage(parser: argparse.ArgumentParser) -> int:
    print(
        f"{parser.prog}: error: choose a command: list, test, run (see `{parser.prog} --help`)",
        file=sys.stderr,
    )
    return EXIT_USAGE


def _error(text: str) -> int:
    print(f"agentplug actions: error: {text}", file=sys.stderr)
    return EXIT_USAGE


def _describe(row: Any) -> str:
    if row.source == "custom":
        where = f"id {row.custom_id}, {row.handler}"
    elif row.source == "plugin":
        where = f"plugin {row.owner}"
    else:
        where = row.source
    state = "" if row.enabled else f" [disabled] ({row.reason})"
    return f"{row.name} ({where}){state}"


async def _listing(config: AgentplugConfig) -> tuple[list[Any], list[str]]:
    from agentplug.actions.catalogue import list_actions
    from agentplug.gateway import Gateway
    from agentplug.store import MemoryStore

    # A listing reads no state: the configured store is not opened.
    gateway = Gateway.from_config(config, load_plugins=True, store=MemoryStore())
    try:
        problems = await gateway.actions.load()
        return list_actions(gateway.actions), problems
    finally:
        await gateway.aclose(1.0)


def cmd_list(args: argparse.Namespace) -> int:
    """``actions list``: every action, enabled or not; problems go to stderr."""
    try:
        config, source = command_config(args)
        _, errors = read_custom_action_defs({"customActions": list(config.custom_actions)})
    except (AgentplugError, CustomActionConfigError) as exc:
        return _error(one_line(exc))
    rows, problems = asyncio.run(_listing(config))
    for problem in problems:
        print(f"warning: {problem}", file=sys.stderr)
    if args.json:
        payload = {
            "config": str(source.path) if source.path is not None else None,
            "actions": [
                {**row.model_dump(mode="json", exclude={"custom_id"}), "id": row.custom_id}
                for row in rows
            ],
            "errors": [
                {"index": e.index, "id": e.id, "field": e.field, "message": e.message}
                for e in errors
            ],
        }
        print(json.dumps(payload, indent=2, ensure_ascii=False))
        return EXIT_OK
    for row in rows:
        print(_describe(row))
        print(f"    {row.description}")
        for param in row.parameters:
            need = "required" if param.get("required") else "optional"
            print(f"    - {param['name']} ({need}): {param.get('description', '')}")
    return EXIT_OK


def _find(definitions: Sequence[CustomActionDef], wanted: str) -> CustomActionDef | None:
    for defn in definitions:
        if defn.id == wanted:
            return defn
    key = normalize_action_name(wanted)
    return next((d for d in definitions if normalize_action_name(d.name) == key), None)


def _parse_params(pairs: Sequence[str]) -> dict[str, str]:
    params: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--param {pair!r} must look like KEY=VALUE")
        params[key.strip()] = value
    return params


def _cli_policy(config: AgentplugConfig, source: str | None, extra: list[str]) -> SSRFPolicy:
    """The config's ``security.ssrf`` policy plus ``--allow-host`` entries."""
    from agentplug.actions.runtime import operator_ssrf_policy

    policy = operator_ssrf_policy(config.security, source)
    if not extra:
        return policy
    return policy.model_copy(update={"allow_hosts": [*policy.allow_hosts, *extra]})


def cmd_test(args: argparse.Namespace) -> int:
    """``actions test``: run one definition's handler and print ``{ok, output}``."""
    try:
        config, source = command_config(args)
        where = str(source.path) if source.path is not None else "the config (none found)"
        definitions, errors = read_custom_action_defs(
            {"customActions": list(config.custom_actions)}
        )
        params = _parse_params(args.param)
        policy = _cli_policy(config, where, list(args.allow_host))
    except (CustomActionConfigError, ValueError, AgentplugError) as exc:
        return _error(one_line(exc))
    defn = _find(definitions, args.name)
    if defn is None:
        known = ", ".join(f"{d.name} (id {d.id})" for d in definitions) or "none"
        broken = f"; {len(errors)} malformed entries skipped" if errors else ""
        return _error(
            f"unknown action {args.name!r} in {where}; known actions: {known}{broken} "
            "(see `agentplug actions list`)"
        )
    undeclared = sorted(set(params) - set(defn.declared_names))
    if undeclared:
        print(
            f"warning: {defn.name} does not declare {', '.join(undeclared)}; ignored "
            f"(declared: {', '.join(defn.declared_names) or 'none'})",
            file=sys.stderr,
        )
    services = CustomActionServices.default(
        ssrf_policy=policy, shell_cwd=args.cwd, shell_timeout_s=args.timeout
    )
    output = asyncio.run(build_test_handler(defn, services=services)(params))
    if args.json:
        print(json.dumps({"ok": output.ok, "output": output.output}, ensure_ascii=False))
    else:
        print(f"{'ok' if output.ok else 'FAILED'}: {defn.name}")
        print(output.output)
    return EXIT_OK if output.ok else EXIT_FAILED


def run_actions_cli(argv: Sequence[str] | None = None) -> int:
    """Run ``actions`` subcommands standalone: ``run_actions_cli(["list", "--config", f])``."""
    from agentplug.cli.common import AgentplugArgumentParser, add_verbose_options

    parser = AgentplugArgumentParser(prog="agentplug actions", description=_SUMMARY)
    _add_subcommands(parser)
    add_verbose_options(parser)
    args = parser.parse_args(list(argv) if argv is not None else None)
    code: int = args.func(args)
    return code


def main() -> None:
    """Console entry point for ``python -m agentplug.cli.actions``."""
    raise SystemExit(run_actions_cli())


if __name__ == "__main__":
    main()
