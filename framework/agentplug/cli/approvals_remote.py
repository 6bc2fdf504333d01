"""``agentplug approvals pending|resolve``: answer approvals that gateways await.

Without ``--api`` both commands work on the state store directly (``--state-url``, else
``$AGENTPLUG_STATE_URL``, else ``<state-dir>/state.sqlite3``): every gateway sharing that
store publishes its pending approvals there, and a decision recorded here wakes the waiting
turn on whichever gateway asked (exactly once: the first decision recorded wins; a decision
after the timeout is refused). With ``--api URL`` they go through a running host's control
API instead. A host that serves the control API (``agentplug serve``, ``agentplug mcp-proxy
--api-port``) lists its pending approvals at ``GET /api/approvals`` and takes decisions
at ``POST /api/approvals/{id}``. These commands are that round-trip from a terminal. The
bearer token is ``--token-file``, else ``$AGENTPLUG_API_TOKEN``, else
``<state-dir>/api-token`` (where both commands write a generated one).
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentplug.store import STATE_URL_ENV

__all__ = ["STATE_URL_ENV", "TOKEN_ENV", "add_remote_commands", "cmd_pending", "cmd_resolve"]

TOKEN_ENV = "AGENTPLUG_API_TOKEN"
DECISIONS = ("allow-once", "allow-always", "deny")
"""What a person may answer (a plugin may offer fewer: the store refuses the others)."""


def _token(args: argparse.Namespace) -> str | None:
    from agentplug.core.redaction import register_secret

    if args.token_file:
        token: str | None = Path(args.token_file).read_text(encoding="utf-8").strip()
    elif os.environ.get(TOKEN_ENV):
        token = os.environ[TOKEN_ENV].strip()
    else:
        from agentplug.cli.approvals_store import approvals_location

        folder = approvals_location(args).state_dir
        path = folder / "api-token" if folder is not None else None
        token = path.read_text(encoding="utf-8").strip() if path and path.exists() else None
    register_secret(token)
    return token


def _request(args: argparse.Namespace, method: str, path: str, body: Any = None) -> Any:
    import httpx

    try:
        token = _token(args)
    except OSError as exc:
        raise SystemExit(f"agentplug approvals: cannot read the API token: {exc}") from None
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    url = args.api.rstrip("/") + path
    try:
        response = httpx.request(method, url, json=body, headers=headers, timeout=10)
    except httpx.HTTPError as exc:
        raise SystemExit(
            f"agentplug approvals: cannot reach the control API at {args.api} ({exc}); is "
            "`agentplug serve` or `agentplug mcp-proxy --api-port` running?"
        ) from None
    try:
        data = response.json()
    except ValueError:
        data = {"error": response.text[:200]}
    if response.status_code >= 400:
        message = data.get("error") or data.get("detail") or response.reason_phrase
        raise SystemExit(f"agentplug approvals: {response.status_code}: {message}")
    return data


def _store(args: argparse.Namespace) -> Any:
    from agentplug.cli.approvals_store import open_configured_store

    store, where = open_configured_store(args, args.approvals_command)
    if store is None:
        raise SystemExit(
            f"agentplug approvals {args.approvals_command}: error: no state store yet ({where}); "
            "pass --state-dir, --state-url or --api URL (a running host)"
        )
    return store


def _pending_rows(args: argparse.Namespace) -> tuple[list[dict[str, Any]], str]:
    if args.api:
        rows: list[dict[str, Any]] = _request(args, "GET", "/api/approvals")["pending"]
        return rows, f"control API {args.api}"
    from agentplug.cli.approvals_store import open_configured_store
    from agentplug.services.approvals.shared import expire_pending, list_pending
    from agentplug.store import StateStoreUnavailable

    store, where = open_configured_store(args, "pending")
    if store is None:
        return [], where  # a fresh folder: nothing asked yet
    try:
        expire_pending(store, by="cli")
        return list_pending(store), where
    except StateStoreUnavailable as exc:
        raise SystemExit(f"agentplug approvals pending: {exc}") from None
    finally:
        store.close()


def cmd_pending(args: argparse.Namespace) -> int:
    """List the approvals the gateways await."""
    pending, where = _pending_rows(args)
    if args.json:
        print(json.dumps(pending, indent=2))
        return 0
    if not pending:
        print(f"no pending approvals; {where}")
        return 0
    for item in pending:
        offered = "|".join(item.get("allowed_decisions") or [])
        print(
            f"{item['id']}  tool={item.get('tool_name')}  plugin={item.get('plugin_id')}  "
            f"title={item.get('title')!r}  decisions={offered}"
        )
    return 0


def cmd_resolve(args: argparse.Namespace) -> int:
    """Answer one pending approval."""
    if not args.api:
        from agentplug.services.approvals.shared import resolve_pending
        from agentplug.store import StateStoreUnavailable

        store = _store(args)
        try:
            reply = resolve_pending(store, args.approval_id, args.decision, by="cli")
        except StateStoreUnavailable as exc:
            raise SystemExit(f"agentplug approvals resolve: {exc}") from None
        finally:
            store.close()
        if not reply.ok:
            raise SystemExit(f"agentplug approvals resolve: {reply.message}")
        print(reply.message)
        return 0
    data = _request(args, "POST", f"/api/approvals/{args.approval_id}", {"decision": args.decision})
    print(data.get("message") or f"{args.approval_id}: {args.decision}")
    return 0


def add_remote_commands(
    sub: Any, add_state_dir: Callable[[Any], None], state_dir: Callable[[str | None], Path]
) -> None:
    """Add ``pending`` and ``resolve`` to the ``approvals`` subparsers (``state_dir``
    resolves ``--state-dir`` as the other ``approvals`` commands do)."""
    for name, helptext in (
        ("pending", "list the approvals gateways await (in the state store, or --api)"),
        ("resolve", "answer a pending approval (allow-once, allow-always or deny)"),
    ):
        p = sub.add_parser(name, help=helptext)
        if name == "resolve":
            p.add_argument(
                "approval_id",
                metavar="APPROVAL_ID",
                help="the id `agentplug approvals pending` shows",
            )
            p.add_argument(
                "decision",
                metavar="DECISION",
                choices=DECISIONS,
                help="allow-once, allow-always or deny",
            )
            p.set_defaults(func=cmd_resolve)
        else:
            p.add_argument("--json", action="store_true", help="print JSON")
            p.set_defaults(func=cmd_pending)
        p.add_argument(
            "--api",
            default=None,
            metavar="URL",
            help="a running host's control API (http://127.0.0.1:PORT); default: the store",
        )
        p.add_argument(
            "--state-url",
            default=None,
            metavar="URL",
            help=f"state store URL (default: ${STATE_URL_ENV}, else state.url, "
            "else <state-dir>/state.sqlite3)",
        )
        p.add_argument("--token-file", metavar="FILE", help=f"bearer token (else ${TOKEN_ENV})")
        add_state_dir(p)
        p.set_defaults(resolve_state_dir=state_dir)
