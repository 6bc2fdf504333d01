"""``agentplug sessions list|show|reset``: the agent sessions in the state store.

The store is the one ``agentplug chat``, ``serve`` and ``approvals`` use: the config's
``state.url`` (or ``$AGENTPLUG_STATE_URL``), else the SQLite file of the state directory
(``--state-dir``, else ``$AGENTPLUG_STATE_DIR``, else ``runtime.state_dir``, else
``.agentplug-state``). Listing and showing never create a state directory. ``reset``
loads the installed plugins (their ``before_reset``, ``session_end`` / ``session_start``
handlers and session cleanup callbacks run) and starts the session over, as ``/reset``
does in a chat.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentplug.cli.common import EXIT_OK, EXIT_USAGE, command_config, command_gateway, error_line

if TYPE_CHECKING:
    from agentplug.gateway import Gateway

__all__ = ["add_sessions_command"]


def _gateway(args: argparse.Namespace, *, plugins: bool) -> Gateway | None:
    """The gateway on the configured store; ``None`` when there is no store to read (no
    URL configured and no state file: nothing is created)."""
    from agentplug.cli.approvals_store import STORE_FILE, state_dir
    from agentplug.store import configured_state_url

    config, _source = command_config(args)
    folder = state_dir(args.state_dir, config.runtime.state_dir)
    url, _ = configured_state_url(config)
    if not url and not (folder / STORE_FILE).exists() and not plugins:
        return None
    return command_gateway(config, plugins=plugins, state=True, state_dir=folder)


def _where(args: argparse.Namespace) -> str:
    from agentplug.cli.approvals_store import state_dir

    config, _ = command_config(args)
    return str(state_dir(args.state_dir, config.runtime.state_dir))


def _when(ms: int | None) -> str:
    if not ms:
        return "-"
    return f"{datetime.fromtimestamp(ms / 1000, UTC):%Y-%m-%d %H:%M:%S}Z"


def cmd_list(args: argparse.Namespace) -> int:
    """List the sessions, the most recently saved first."""
    gateway = _gateway(args, plugins=False)
    if gateway is None:
        rows: list[Any] = []
    else:
        try:
            rows = gateway.runner.list_sessions()
        finally:
            asyncio.run(gateway.aclose())
    if args.json:
        print(json.dumps([row.to_dict() for row in rows], indent=2))
        return EXIT_OK
    if not rows:
        print(f"no sessions in {_where(args)}")
        return EXIT_OK
    for row in rows:
        last = f"  last: {row.last_user!r}" if row.last_user else ""
        print(f"{row.session_key}  {row.messages} messages  {_when(row.updated_at_ms)}{last}")
    return EXIT_OK


def _line(message: dict[str, Any]) -> str:
    from agentplug.core.redaction import scrub

    role = str(message.get("role") or "?")
    content = " ".join(str(message.get("content") or "").split())
    calls = message.get("tool_calls") or []
    names = [str((c.get("function") or {}).get("name")) for c in calls if isinstance(c, dict)]
    if names:
        content = (content + " " if content else "") + f"[calls {', '.join(names)}]"
    if role == "tool":
        role = f"tool {message.get('name') or ''}".strip()
    return scrub(f"{role}: {content}")


def cmd_show(args: argparse.Namespace) -> int:
    """Print one session's transcript."""
    from agentplug.agent.sessions import UnknownSession, show_session

    gateway = _gateway(args, plugins=False)
    if gateway is None:
        error_line(args, f"no session {args.key!r}: there is no state store in {_where(args)}")
        return EXIT_USAGE
    try:
        record = show_session(gateway.runner, args.key)
    except UnknownSession as exc:
        error_line(args, str(exc))
        return EXIT_USAGE
    finally:
        asyncio.run(gateway.aclose())
    messages = record.messages[-args.last :] if args.last else record.messages
    if args.json:
        from agentplug.core.redaction import scrub_data

        data = {
            "session_key": record.session_key,
            "session_id": record.session_id,
            "updated_at_ms": record.updated_at_ms,
            "summary": record.summary,
            "messages": scrub_data(messages),
        }
        print(json.dumps(data, indent=2, default=str))
        return EXIT_OK
    print(f"session {record.session_key} (id {record.session_id}, {len(record.messages)} messages)")
    for message in messages:
        print(_line(message))
    return EXIT_OK


def cmd_reset(args: argparse.Namespace) -> int:
    """Start one session over (its plugins' hooks run)."""
    from agentplug.agent.sessions import UnknownSession

    gateway = _gateway(args, plugins=not args.no_plugins)
    assert gateway is not None

    async def reset() -> Any:
        try:
            return await gateway.runner.reset_session(args.key, source="cli")
        finally:
            await gateway.aclose()

    try:
        fresh = asyncio.run(reset())
    except UnknownSession as exc:
        error_line(args, str(exc))
        return EXIT_USAGE
    print(f"session {args.key} reset (new session id {fresh.session_id})")
    return EXIT_OK


def _common(parser: argparse.ArgumentParser) -> None:
    from agentplug.cli.approvals_store import DEFAULT_STATE_DIR, STATE_DIR_ENV
    from agentplug.core.config_lookup import CONFIG_HELP

    parser.add_argument(
        "--state-dir",
        default=None,
        type=Path,
        help=f"state directory (default: ${STATE_DIR_ENV}, else the config's "
        f"runtime.state_dir, else {DEFAULT_STATE_DIR})",
    )
    parser.add_argument("--config", metavar="FILE", help=CONFIG_HELP)


def add_sessions_command(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``agentplug sessions list|show|reset`` to the command parser."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "sessions",
        help="list, show or reset agent sessions (transcripts in the state store)",
        description="The agent sessions kept in the state store: the transcripts of chat, "
        "serve and embedded runners.",
    )
    sub = parser.add_subparsers(dest="sessions_command", metavar="{list,show,reset}")
    sub.required = True
    p_list = sub.add_parser("list", help="list the sessions, the most recent first")
    _common(p_list)
    p_list.add_argument("--json", action="store_true", help="print JSON")
    p_list.set_defaults(func=cmd_list)
    p_show = sub.add_parser("show", help="print one session's transcript")
    p_show.add_argument("key", metavar="KEY", help="the session key `sessions list` shows")
    p_show.add_argument("--last", type=int, default=0, metavar="N", help="only the last N messages")
    p_show.add_argument("--json", action="store_true", help="print JSON")
    _common(p_show)
    p_show.set_defaults(func=cmd_show)
    p_reset = sub.add_parser(
        "reset",
        help="start a session over (before_reset, session_end, cleanup, session_start)",
    )
    p_reset.add_argument("key", metavar="KEY", help="the session key `sessions list` shows")
    p_reset.add_argument("--no-plugins", action="store_true", help="do not load installed plugins")
    _common(p_reset)
    p_reset.set_defaults(func=cmd_reset)
    return parser
