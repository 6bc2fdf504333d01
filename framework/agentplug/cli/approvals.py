"""``agentplug approvals list|revoke``: standing ``allow-always`` grants.

(``approvals pending|resolve --api URL`` answer a running host's pending approvals:
:mod:`agentplug.cli.approvals_remote`.)

The store is ``--state-url`` (``pending``/``resolve``), else ``$AGENTPLUG_STATE_URL``, else
the config's ``state.url`` (a PostgreSQL store several gateways share), else the SQLite
file of the state directory. The state directory is ``--state-dir``, else the environment variable
``AGENTPLUG_STATE_DIR``, else the config's ``runtime.state_dir`` (the config found by the
one lookup: ``--config``, ``$AGENTPLUG_CONFIG``, ``./agentplug.{toml,yaml,json}``), else
``.agentplug-state``, as ``agentplug serve`` chooses it (the store file is
``<dir>/state.sqlite3``, as :func:`agentplug.store.open_store` uses it). Listing never
creates a state directory. Also runnable as ``python -m agentplug.cli.approvals``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from agentplug.cli.approvals_store import (
    DEFAULT_STATE_DIR,
    STATE_DIR_ENV,
    open_configured_store,
    state_dir,
)
from agentplug.services.approvals.grants import list_grants, revoke_grant

__all__ = ["DEFAULT_STATE_DIR", "STATE_DIR_ENV", "add_approvals_commands", "main", "state_dir"]


def cmd_list(args: argparse.Namespace) -> int:
    store, folder = open_configured_store(args, "list")
    try:
        grants = list_grants(store) if store is not None else []
    finally:
        if store is not None:
            store.close()
    if args.json:
        print(json.dumps([g.to_dict() for g in grants], indent=2))
        return 0
    if not grants:
        print(f"no standing approval grants; {folder}")
        return 0
    for g in grants:
        created = datetime.fromtimestamp(g.created_at, UTC).strftime("%Y-%m-%d %H:%M:%SZ")
        print(
            f"{g.grant_id}  plugin={g.plugin_id}  tool={g.tool_name}  "
            f"severity={g.severity}  created={created}  title={g.title!r}"
        )
    return 0


def cmd_revoke(args: argparse.Namespace) -> int:
    store, folder = open_configured_store(args, "revoke")
    if store is None:
        print(
            f"agentplug approvals revoke: error: no grant {args.grant_id!r}: there is no state "
            f"store yet ({folder}); pass --state-dir or set runtime.state_dir",
            file=sys.stderr,
        )
        return 1
    try:
        removed = revoke_grant(store, args.grant_id)
    finally:
        store.close()
    if not removed:
        print(
            f"agentplug approvals revoke: error: no grant {args.grant_id!r}; run "
            "`agentplug approvals list` for the grant ids",
            file=sys.stderr,
        )
        return 1
    print(f"revoked {args.grant_id}; the next matching request will ask again")
    return 0


def _add_state_dir(parser: argparse.ArgumentParser) -> None:
    from agentplug.config.lookup import CONFIG_HELP
    from agentplug.store.location import STATE_DIR_HELP

    parser.add_argument("--state-dir", default=None, metavar="DIR", help=STATE_DIR_HELP)
    parser.add_argument("--config", metavar="FILE", help=CONFIG_HELP)


def add_approvals_commands(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``approvals list`` and ``approvals revoke`` to an argparse subparsers object.

    Each leaf parser sets ``func`` (``func(args) -> int`` exit code).
    """
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "approvals",
        help="list or revoke standing allow-always grants; list or answer pending approvals",
    )
    sub = parser.add_subparsers(dest="approvals_command", metavar="{list,revoke,pending,resolve}")
    sub.required = True
    p_list = sub.add_parser("list", help="list standing grants")
    _add_state_dir(p_list)
    p_list.add_argument("--json", action="store_true", help="print JSON")
    p_list.set_defaults(func=cmd_list)
    p_revoke = sub.add_parser("revoke", help="revoke one grant (the next request asks again)")
    p_revoke.add_argument(
        "grant_id", metavar="GRANT_ID", help="the grant id `agentplug approvals list` shows"
    )
    _add_state_dir(p_revoke)
    p_revoke.set_defaults(func=cmd_revoke)
    from agentplug.cli.approvals_remote import add_remote_commands

    add_remote_commands(sub, _add_state_dir, state_dir)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Stand-alone entry point: ``python -m agentplug.cli.approvals approvals list``.

    The leading ``approvals`` word is optional here.
    """
    args_in = list(sys.argv[1:] if argv is None else argv)
    if args_in[:1] != ["approvals"]:
        args_in = ["approvals", *args_in]
    parser = argparse.ArgumentParser(prog="agentplug")
    add_approvals_commands(parser.add_subparsers(dest="command"))
    args = parser.parse_args(args_in)
    code: int = args.func(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
