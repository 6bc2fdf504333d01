"""``agentplug approvals pending|resolve --api URL``: answer approvals a running host awaits.

A host that serves the control API (``agentplug serve``, ``agentplug mcp-proxy
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

__all__ = ["TOKEN_ENV", "add_remote_commands", "cmd_pending", "cmd_resolve"]

TOKEN_ENV = "AGENTPLUG_API_TOKEN"


def _token(args: argparse.Namespace) -> str | None:
    if args.token_file:
        return Path(args.token_file).read_text(encoding="utf-8").strip()
    if os.environ.get(TOKEN_ENV):
        return os.environ[TOKEN_ENV].strip()
    path = args.resolve_state_dir(args.state_dir) / "api-token"
    return path.read_text(encoding="utf-8").strip() if path.exists() else None


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


def cmd_pending(args: argparse.Namespace) -> int:
    """List the approvals the host awaits."""
    pending = _request(args, "GET", "/api/approvals")["pending"]
    if args.json:
        print(json.dumps(pending, indent=2))
        return 0
    if not pending:
        print("no pending approvals")
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
    data = _request(args, "POST", f"/api/approvals/{args.approval_id}", {"decision": args.decision})
    print(data.get("message") or f"{args.approval_id}: {args.decision}")
    return 0


def add_remote_commands(
    sub: Any, add_state_dir: Callable[[Any], None], state_dir: Callable[[str | None], Path]
) -> None:
    """Add ``pending`` and ``resolve`` to the ``approvals`` subparsers (``state_dir``
    resolves ``--state-dir`` as the other ``approvals`` commands do)."""
    for name, helptext in (
        ("pending", "list the approvals a running host awaits (through its control API)"),
        ("resolve", "answer a pending approval (allow-once, allow-always or deny)"),
    ):
        p = sub.add_parser(name, help=helptext)
        if name == "resolve":
            p.add_argument("approval_id", metavar="APPROVAL_ID")
            p.add_argument("decision", metavar="DECISION", help="allow-once, allow-always, deny")
            p.set_defaults(func=cmd_resolve)
        else:
            p.add_argument("--json", action="store_true", help="print JSON")
            p.set_defaults(func=cmd_pending)
        p.add_argument("--api", required=True, metavar="URL", help="http://127.0.0.1:PORT")
        p.add_argument("--token-file", metavar="FILE", help=f"bearer token (else ${TOKEN_ENV})")
        add_state_dir(p)
        p.set_defaults(resolve_state_dir=state_dir)
