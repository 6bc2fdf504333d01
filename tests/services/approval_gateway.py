"""A gateway process for the cross-process approval tests (run as a script).

``ask URL TIMEOUT_MS``: a host whose plugin requires approval for ``web_search`` checks one
call through the tool-call gate with a shared broker (as ``agentplug serve`` wires it);
prints ``PENDING <id>`` once the approval is published, then one JSON line with the
verdict and the wall-clock time the turn woke.

``sweep URL SECONDS``: another gateway: records timeouts of expired approvals
(``expire_pending``) every 10 ms for SECONDS; prints how many this process recorded.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import Any

from agentplug import PluginApi, PluginHost
from agentplug.api.serve import wire_approvals
from agentplug.services.approvals import ProgrammaticResolver
from agentplug.services.approvals.shared import expire_pending
from agentplug.services.toolcalls import ToolCallGate
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


def ask(url: str, timeout_ms: int) -> None:
    host = PluginHost(store=open_store_url(url))
    host.register(_plugin(timeout_ms), "preflight")
    broker = wire_approvals(host)
    assert isinstance(broker.resolver, ProgrammaticResolver)
    broker.resolver.on_pending = lambda p: print(f"PENDING {p.id}", flush=True)
    gate = ToolCallGate(host, broker)

    async def main() -> Any:
        return await gate.check({"tool_name": "web_search", "params": {"query": "x"}})

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


if __name__ == "__main__":
    if sys.argv[1] == "ask":
        ask(sys.argv[2], int(sys.argv[3]))
    else:
        sweep(sys.argv[2], float(sys.argv[3]))
