"""A gateway process for the cross-process approval tests (run as a script).

``ask URL TIMEOUT_MS``: a gateway whose plugin requires approval for ``web_search`` checks
one call through its tool-call gate; its broker is shared because the store is durable;
prints ``PENDING <id>`` once the approval is published, then one JSON line with the
verdict and the wall-clock time the turn woke.

``ask-cancel URL``: as ``ask`` (one minute to decide) for run ``run-cancelled``; when a
line arrives on stdin the run is cancelled (as the runner does when a turn is aborted).

``sweep URL SECONDS``: another gateway: records timeouts of expired approvals
(``expire_pending``) every 10 ms for SECONDS; prints how many this process recorded.

``race URL ID DECISION BY`` and ``race-api API_URL TOKEN ID DECISION``: a decider that
opens the store (or an HTTP client) first, prints ``READY``, waits for a line on stdin
(so that every racer starts at once), then decides ID through the store
(``resolve_pending``, recorded as BY) or ``POST /api/approvals/ID``; prints one JSON line
with what it was told.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import Any

from agentplug import Gateway, PluginApi
from agentplug.services.approvals import ProgrammaticResolver
from agentplug.services.approvals.shared import (
    PENDING_NAMESPACE,
    expire_pending,
    resolve_pending,
)
from agentplug.store import open_store_url


def _plugin(timeout_ms: int) -> Any:
    def register(api: PluginApi) -> None:
        def before_tool_call(event: Any, ctx: Any) -> dict[str, Any] | None:
            return {
                "require_approval": {
                    "title": "Run web search",
                    "description": "Allow search query x",
                    "timeout_ms": timeout_ms,
                }
            }

        api.on("before_tool_call", before_tool_call, priority=50)

    return register


def ask(url: str, timeout_ms: int, *, cancel_on_input: bool = False) -> None:
    resolver = ProgrammaticResolver(on_pending=lambda p: print(f"PENDING {p.id}", flush=True))
    # As `agentplug serve` builds it: a durable store, so the broker is shared.
    gateway = Gateway(store=open_store_url(url), resolver=resolver)
    gateway.host.register(_plugin(timeout_ms), "preflight")
    broker = gateway.approvals
    assert broker.shared
    gate = gateway.tool_calls.gate
    run_id = "run-cancelled"

    async def cancel_on_line() -> None:
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
        broker.cancel_run(run_id)

    async def main() -> Any:
        canceller = asyncio.ensure_future(cancel_on_line()) if cancel_on_input else None
        try:
            return await gate.check(
                {"tool_name": "web_search", "params": {"query": "x"}, "run_id": run_id}
            )
        finally:
            if canceller is not None:
                canceller.cancel()

    decision = asyncio.run(main())
    woke_at = time.time()
    print(
        json.dumps(
            {
                "allowed": decision.allowed,
                "reason": decision.reason,
                "resolution": decision.approval_resolution,
                "approval_id": decision.approval_id,
                "woke_at": woke_at,
            }
        ),
        flush=True,
    )


def sweep(url: str, seconds: float) -> None:
    store = open_store_url(url)
    fired = 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        fired += expire_pending(store, by=f"sweeper-{id(store)}")
        time.sleep(0.01)
    print(json.dumps({"fired": fired}), flush=True)


def race(url: str, approval_id: str, decision: str, by: str) -> None:
    store = open_store_url(url)
    store.get(PENDING_NAMESPACE, approval_id)  # connected before the start line
    print("READY", flush=True)
    sys.stdin.readline()
    reply = resolve_pending(store, approval_id, decision, by=by)
    print(json.dumps({"ok": reply.ok, "message": reply.message}), flush=True)


def race_api(api_url: str, token: str, approval_id: str, decision: str) -> None:
    import httpx

    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=api_url, headers=headers, timeout=60) as client:
        client.get("/api/health")  # connected before the start line
        print("READY", flush=True)
        sys.stdin.readline()
        answer = client.post(f"/api/approvals/{approval_id}", json={"decision": decision})
    body = answer.json()
    message = body.get("message") or body.get("error")
    print(json.dumps({"status": answer.status_code, "message": message}), flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "ask":
        ask(sys.argv[2], int(sys.argv[3]))
    elif sys.argv[1] == "ask-cancel":
        ask(sys.argv[2], 60_000, cancel_on_input=True)
    elif sys.argv[1] == "race":
        race(*sys.argv[2:6])
    elif sys.argv[1] == "race-api":
        race_api(*sys.argv[2:6])
    else:
        sweep(sys.argv[2], float(sys.argv[3]))
