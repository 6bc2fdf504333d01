"""The ``agentplug plugin ...`` command line."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

from agentplug.config.lookup import CONFIG_HELP
from agentplug.config.model import AgentplugConfig
from agentplug.plugins.ejected import plugin_settings
from agentplug.plugins.manager.facade import PluginManager
from agentplug.plugins.manager.reports import PluginManagerError, UnknownPluginError
from agentplug.store.location import STATE_DIR_HELP

_CHANGES_CODE = {"install", "eject", "sync", "reinject", "eject-core", "sync-core", "reinject-core"}
"""Operations that bring code onto disk or make it importable: they need a host, whose
install policy and before_install handlers check the code first."""

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def _config(args: argparse.Namespace) -> AgentplugConfig:
    loaded = getattr(args, "loaded_config", None)  # read and checked by the command line
    if isinstance(loaded, AgentplugConfig):
        return loaded
    from agentplug.config.lookup import resolve_config

    config, _ = resolve_config(
        getattr(args, "config", None), verbose=bool(getattr(args, "verbose", 0))
    )
    return config


def _cli_manager(args: argparse.Namespace, with_host: bool) -> PluginManager:
    from agentplug.core.host import PluginHost
    from agentplug.store.location import DEFAULT_STATE_DIR, state_location

    config = _config(args)
    actions = dict(config.actions)
    overrides = {
        key: getattr(args, key)
        for key in ("index_url", "find_links", "no_index", "target")
        if getattr(args, key, None)
    }
    settings = plugin_settings({"plugins": {**dict(actions.get("plugins") or {}), **overrides}})
    # The one rule (--state-dir, $AGENTPLUG_STATE_DIR, runtime.state_dir, .agentplug-state).
    location = state_location(config, state_dir=args.state_dir, default_dir=DEFAULT_STATE_DIR)
    state_dir = location.state_dir or DEFAULT_STATE_DIR
    host: PluginHost | None = None
    if with_host:
        host = PluginHost(config)
        host.load_installed()  # before_install handlers of installed plugins take part
    return PluginManager(host, state_dir, settings=settings)


def _emit(args: argparse.Namespace, payload: Any, text: str) -> None:
    if args.json:
        print(json.dumps(payload, indent=2, default=str))
    else:
        print(text)


def _plugin_list(args: argparse.Namespace) -> int:
    from agentplug.core.host import PluginHost

    print(
        "agentplug plugin list: note: deprecated; `agentplug plugins` lists the plugins "
        "(with their handlers, --json for this list's fields); this alias goes in the next "
        "release",
        file=sys.stderr,
    )
    host = PluginHost(_config(args))
    host.load_installed()
    rows = [
        {
            "plugin_id": r.plugin_id,
            "name": r.name,
            "description": r.description,
            "distribution": r.distribution,
            "version": r.version,
            "error": r.error,
        }
        for r in [*host.plugins, *host.failed_plugins]
    ]
    lines = []
    for row in rows:
        title = f"{row['plugin_id']}" + (f"  {row['name']!r}" if row["name"] else "")
        dist = f"{row['distribution'] or '?'} {row['version'] or ''}".strip()
        lines.append(f"{title}  [{dist}]")
        if row["description"]:
            lines.append(f"  {row['description']}")
        if row["error"]:
            lines.append(f"  LOAD ERROR: {row['error']}")
    _emit(args, rows, "\n".join(lines) or "no plugins installed (entry-point group 'agentplug')")
    return EXIT_OK


def _cmd_plugin(args: argparse.Namespace) -> int:
    op: str = args.plugin_command
    if op == "list":
        return _plugin_list(args)
    manager = _cli_manager(args, with_host=op in _CHANGES_CODE)
    try:
        if op == "install":
            install = asyncio.run(manager.install(args.spec, requested_by="cli"))
            text = (
                f"installed {install.name} {install.version}; restart the agent to load it"
                if install.installed
                else f"install of {install.name} {install.version} blocked by "
                f"{install.blocked_by}: {install.reason}"
            )
            _emit(args, install.model_dump(mode="json"), text)
            return EXIT_OK if install.installed else EXIT_FAILED
        if op in ("eject", "eject-core"):
            eject = asyncio.run(
                manager.eject(args.plugin_id, requested_by="cli")
                if op == "eject"
                else manager.eject_core(requested_by="cli")
            )
            text = (
                f"ejected {eject.plugin_id} ({eject.distribution} {eject.version}, from "
                f"{eject.source_kind}) to {eject.path} on branch {eject.branch}; "
                "restart the agent to use it"
            )
            _emit(args, eject.model_dump(mode="json"), text)
            return EXIT_OK
        if op in ("sync", "sync-core"):
            sync = asyncio.run(
                manager.sync(args.plugin_id, requested_by="cli")
                if op == "sync"
                else manager.sync_core(requested_by="cli")
            )
            _emit(args, sync.model_dump(mode="json"), f"{sync.plugin_id}: {sync.message}")
            return EXIT_OK if sync.merged else EXIT_FAILED
        if op in ("reinject", "reinject-core"):
            reinject = asyncio.run(
                manager.reinject(args.plugin_id, requested_by="cli")
                if op == "reinject"
                else manager.reinject_core(requested_by="cli")
            )
            text = f"removed {reinject.path}; restart the agent to load the installed package"
            _emit(args, reinject.model_dump(mode="json"), text)
            return EXIT_OK
        if op == "ejected":
            rows = manager.ejected()
            lines = [f"{r.name}  [{r.branch}]  {r.path}" for r in rows] or ["no ejected plugins"]
            _emit(args, [r.model_dump(mode="json") for r in rows], "\n".join(lines))
            return EXIT_OK
        status = manager.core_status()
        text = (
            f"{status.distribution} {status.version or '?'} runs from the {status.running_from} "
            f"{'source' if status.running_from == 'ejected' else 'package'} at "
            f"{status.location} (commit {status.commit or 'unknown'})"
        )
        if status.restart_required:
            text += "; restart the agent to switch to the other copy"
        _emit(args, status.model_dump(mode="json"), text)
        return EXIT_OK
    except PluginManagerError as exc:
        message = " ".join(str(exc).split())
        if args.json:
            print(json.dumps({"error": message}))
        else:
            print(f"agentplug plugin {op}: error: {message}", file=sys.stderr)
        return EXIT_USAGE if isinstance(exc, UnknownPluginError) else EXIT_FAILED


def _add_index_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--index-url", dest="index_url", help="package index (default: actions.plugins.index_url)"
    )
    parser.add_argument(
        "--find-links",
        dest="find_links",
        action="append",
        help="extra folder or URL of distributions (repeatable)",
    )
    parser.add_argument(
        "--no-index", dest="no_index", action="store_true", help="use --find-links only"
    )


def add_plugin_management_commands(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``agentplug plugin install|eject|sync|reinject|ejected|core-status|...``."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--state-dir", default=None, metavar="DIR", help=STATE_DIR_HELP)
    common.add_argument("--json", action="store_true", help="machine-readable output")
    common.add_argument("--config", metavar="FILE", help=CONFIG_HELP)
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "plugin", help="install, eject, sync and reinject plugins (and agentplug itself)"
    )
    sub = parser.add_subparsers(dest="plugin_command", required=True)
    p = sub.add_parser(
        "install", parents=[common], help="download, check (install policy), install"
    )
    p.add_argument("spec", help="requirement such as my-plugin or my-plugin==1.2")
    _add_index_options(p)
    p.add_argument("--target", help="install into this folder (pip --target)")
    for name, help_text in (
        ("eject", "put a plugin's source under <state-dir>/plugins/<id> (git)"),
        ("sync", "fetch and merge upstream into an ejected plugin"),
        ("reinject", "remove an ejected plugin so the installed package loads"),
    ):
        p = sub.add_parser(
            name,
            parents=[common],
            help=help_text,
            description=f"{help_text[0].upper()}{help_text[1:]}. The code goes through "
            "security.install_policy and before_install first; a block changes nothing.",
        )
        p.add_argument(
            "plugin_id", metavar="PLUGIN_ID", help="the plugin id `agentplug plugins` shows"
        )
        if name != "reinject":
            _add_index_options(p)
    sub.add_parser("ejected", parents=[common], help="list ejected plugins")
    sub.add_parser(
        "list",
        parents=[common],
        help="deprecated: `agentplug plugins` lists the installed plugins",
    )
    for name, help_text in (
        ("eject-core", "put agentplug's own source under <state-dir>/core (git)"),
        ("sync-core", "fetch and merge upstream into the ejected core"),
        ("reinject-core", "remove the ejected core"),
        ("core-status", "installed package or ejected source, version, commit"),
    ):
        sub.add_parser(name, parents=[common], help=help_text)
    parser.set_defaults(func=_cmd_plugin)
    return parser
