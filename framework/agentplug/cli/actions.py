"""``agentplug actions ...``: list and try custom actions from a config file.

``agentplug actions list [--config FILE] [--json]`` shows the definitions of ``customActions``
(enabled and disabled) and reports malformed entries on stderr.

``agentplug actions test NAME --config FILE [--param KEY=VALUE ...] [--json]`` runs one
definition's handler through :func:`~agentplug.actions.custom.build_test_handler` (nothing is
registered) and prints ``{ok, output}``; the exit code is 0 when ``ok`` is true, 1 when it is
false, 2 for usage errors (unknown action, unreadable config, malformed ``--param``).

The host CLI calls :func:`add_actions_commands` with its subparsers; every leaf parser sets
``func`` to a callable taking the parsed namespace and returning the exit code.
:func:`run_actions_cli` runs the same commands standalone (``python -m agentplug.cli.actions``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agentplug.actions.custom import (
    CustomActionConfigError,
    CustomActionDef,
    CustomActionServices,
    build_test_handler,
    read_custom_action_defs,
)
from agentplug.actions.registry import normalize_action_name
from agentplug.core.datafiles import read_data_file
from agentplug.core.errors import AgentplugError
from agentplug.security.ssrf import SSRFPolicy

__all__ = ["DEFAULT_CONFIG", "add_actions_commands", "main", "run_actions_cli"]

_SUMMARY = "List and test the custom actions (customActions) of a config file."

DEFAULT_CONFIG = "agentplug.json"
"""Config file looked up in the current directory when ``--config`` is not given."""

_EXIT_OK = 0
_EXIT_NOT_OK = 1
_EXIT_USAGE = 2


def add_actions_commands(subparsers: Any) -> None:
    """Add the ``actions`` command (with ``list`` and ``test``) to a host CLI's subparsers.

    ``subparsers`` is what ``ArgumentParser.add_subparsers()`` returned.
    """
    parser = subparsers.add_parser(
        "actions", help="list and test custom actions", description=_SUMMARY
    )
    _add_subcommands(parser)


def _add_subcommands(parser: argparse.ArgumentParser) -> None:
    parser.set_defaults(func=lambda args: _usage(parser))
    commands = parser.add_subparsers(dest="actions_command", metavar="{list,test,run}")

    listing = commands.add_parser("list", help="list the custom actions of a config file")
    listing.add_argument(
        "--config", metavar="FILE", help=f"config file (default: ./{DEFAULT_CONFIG})"
    )
    listing.add_argument("--json", action="store_true", help="print JSON")
    listing.set_defaults(func=cmd_list)

    test = commands.add_parser(
        "test", help="run one custom action's handler without registering it"
    )
    test.add_argument("name", metavar="NAME", help="the action's name or id")
    test.add_argument("--config", metavar="FILE", required=True, help="config file")
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
    run.add_argument("--config", metavar="FILE", help="operator config file")
    run.add_argument("--room", metavar="ID", help="room id of the message")
    run.add_argument("--json", action="store_true", help="print the result and trace as JSON")
    run.set_defaults(func=cmd_run)


def cmd_run(args: argparse.Namespace) -> int:
    """``actions run``: the whole flow on a real host; exit 1 unless the action succeeded."""
    import asyncio

    from agentplug.actions.model import Message
    from agentplug.core.config import AgentplugConfig, load_config
    from agentplug.core.errors import AgentplugError
    from agentplug.core.host import PluginHost

    try:
        config = load_config(args.config) if args.config else AgentplugConfig()
    except AgentplugError as exc:
        return _error(str(exc))

    from agentplug.agent.selection import language_aware_flow

    try:
        # With ``agent.model`` configured the model chooses the action and reads its
        # parameters from plain language; without it the deterministic flow runs.
        language = language_aware_flow(config.agent)
    except AgentplugError as exc:
        return _error(str(exc))
    chooser = {"selector": language[0], "extractor": language[1]} if language else {}

    async def go() -> tuple[Any, list[str]]:
        host = PluginHost(config)
        host.load_installed()
        problems = await host.actions.load()
        try:
            flow = await host.actions.run(Message(text=args.message, room_id=args.room), **chooser)
        finally:
            await host.aclose(1.0)
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
    return 0 if flow.ok else 1


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_help(sys.stderr)
    return _EXIT_USAGE


def _error(text: str) -> int:
    print(f"agentplug actions: error: {text}", file=sys.stderr)
    return _EXIT_USAGE


def _config_path(value: str | None) -> Path:
    if value:
        return Path(value)
    return Path(os.getcwd()) / DEFAULT_CONFIG


def _describe(defn: CustomActionDef) -> dict[str, Any]:
    return {
        "id": defn.id,
        "name": defn.name,
        "description": defn.description,
        "similes": defn.similes,
        "enabled": defn.enabled,
        "handler": defn.handler.type,
        "parameters": [p.model_dump() for p in defn.parameters],
    }


def cmd_list(args: argparse.Namespace) -> int:
    """``actions list``: print every valid definition; malformed entries go to stderr."""
    path = _config_path(args.config)
    if args.config is None and not path.exists():
        return _error(f"no {DEFAULT_CONFIG} in the current directory; pass --config FILE")
    try:
        definitions, errors = read_custom_action_defs(path)
    except CustomActionConfigError as exc:
        return _error(str(exc))
    for error in errors:
        print(f"warning: {error}", file=sys.stderr)
    if args.json:
        payload = {
            "config": str(path),
            "actions": [_describe(d) for d in definitions],
            "errors": [
                {"index": e.index, "id": e.id, "field": e.field, "message": e.message}
                for e in errors
            ],
        }
        print(json.dumps(payload, indent=2, ensure_ascii=False))
        return _EXIT_OK
    if not definitions:
        print(f"no custom actions in {path}")
        return _EXIT_OK
    for defn in definitions:
        state = "" if defn.enabled else " [disabled]"
        print(f"{defn.name} (id {defn.id}, {defn.handler.type}){state}")
        print(f"    {defn.description}")
        for param in defn.parameters:
            need = "required" if param.required else "optional"
            print(f"    - {param.name} ({need}): {param.description}")
    return _EXIT_OK


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


def _cli_policy(path: Path | str, extra_hosts: list[str]) -> SSRFPolicy:
    """The config file's ``security.ssrf`` policy plus ``--allow-host`` entries."""
    from agentplug.actions.runtime import operator_ssrf_policy

    data = read_data_file(path)  # DataFileError (one line naming the file) when unreadable
    security = data.get("security", {}) if isinstance(data, dict) else {}
    policy = operator_ssrf_policy(security if isinstance(security, dict) else {}, str(path))
    if not extra_hosts:
        return policy
    return policy.model_copy(update={"allow_hosts": [*policy.allow_hosts, *extra_hosts]})


def cmd_test(args: argparse.Namespace) -> int:
    """``actions test``: run one definition's handler and print ``{ok, output}``."""
    path = _config_path(args.config)
    try:
        definitions, errors = read_custom_action_defs(path)
        params = _parse_params(args.param)
        policy = _cli_policy(path, list(args.allow_host))
    except (CustomActionConfigError, ValueError, AgentplugError) as exc:
        return _error(str(exc))
    defn = _find(definitions, args.name)
    if defn is None:
        known = ", ".join(f"{d.name} (id {d.id})" for d in definitions) or "none"
        broken = f"; {len(errors)} malformed entries skipped" if errors else ""
        return _error(f"unknown action {args.name!r} in {path}; known actions: {known}{broken}")
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
    return _EXIT_OK if output.ok else _EXIT_NOT_OK


def run_actions_cli(argv: Sequence[str] | None = None) -> int:
    """Run ``actions`` subcommands standalone: ``run_actions_cli(["list", "--config", f])``."""
    parser = argparse.ArgumentParser(prog="agentplug actions", description=_SUMMARY)
    _add_subcommands(parser)
    args = parser.parse_args(list(argv) if argv is not None else None)
    code: int = args.func(args)
    return code


def main() -> None:
    """Console entry point for ``python -m agentplug.cli.actions``."""
    raise SystemExit(run_actions_cli())


if __name__ == "__main__":
    main()
