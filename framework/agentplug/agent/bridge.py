"""The runner's tool-call path for agents agentplug does not drive: :class:`GateBridge`.

An MCP client behind ``agentplug mcp-proxy``, a PydanticAI agent or a LangChain agent
runs its own loop; what it hands agentplug is one tool call at a time, with the
framework's run id, session id and tool-call id. :meth:`GateBridge.call` runs that call
exactly as :mod:`~agentplug.agent.toolrun` does for the runner's own model: the
:class:`~agentplug.services.toolcalls.ToolCallGate` (trusted policies,
``before_tool_call``, exec env, approvals with durable grants), the tool, then
``after_tool_call`` and ``tool_result_persist`` + ``before_message_write``. The ids land
on the same hook fields the runner fills (``run_id``, ``tool_call_id``, ``session_key``,
``session_id``), so approvals, grants and audit lines line up across both paths.

:meth:`GateBridge.deliver` runs the outbound path (``message_sending``,
``reply_payload_sending``) over a framework's final output.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agentplug_hookspecs.common import MessageContext
from agentplug_hookspecs.tools import ApprovalRequest, ToolContext

from agentplug.agent.tools import ToolOutput
from agentplug.services.replies import ReplyDispatcher
from agentplug.services.toolcalls import ToolCallDecision, ToolCallGate
from agentplug.services.toolresults import persist_tool_result
from agentplug.services.turns import DeliveryResult

if TYPE_CHECKING:
    from agentplug.core.host import PluginHost
    from agentplug.services.approvals import ApprovalBroker

__all__ = ["WITHHELD", "BridgedCall", "CallIds", "GateBridge"]

log = logging.getLogger("agentplug.agent.bridge")

WITHHELD = "(this tool result was withheld by a plugin)"

RunTool = Callable[[dict[str, Any]], Awaitable[Any] | Any]
"""Runs the framework's tool with the parameters the gate decided on."""


@dataclass(frozen=True)
class CallIds:
    """The framework's ids of one call, as the hook contexts carry them."""

    run_id: str | None = None
    session_key: str | None = None
    session_id: str | None = None
    tool_call_id: str | None = None
    agent_id: str | None = None
    channel: str | None = None


@dataclass
class BridgedCall:
    """What :meth:`GateBridge.call` did: whether the tool ran, and what to hand back."""

    allowed: bool
    output: ToolOutput
    """The result for the framework: the tool's (as persisted) or a readable error."""
    params: dict[str, Any] = field(default_factory=dict)
    """The parameters the tool ran with (after rewrites)."""
    decision: ToolCallDecision | None = None
    """The gate's decision (``None`` when the call never reached it)."""
    value: Any = None
    """What the tool itself returned (``None`` when it did not run)."""
    rewritten: bool = False
    """``tool_result_persist`` / ``before_message_write`` changed or withheld the result:
    hand back ``output``, not ``value``."""

    @property
    def reason(self) -> str:
        """The public reason of the decision (what the model reads on a block)."""
        return self.decision.reason if self.decision is not None else self.output.content


class GateBridge:
    """Runs outside frameworks' tool calls through agentplug's one gate path.

    ``broker`` resolves approvals (default: none connected, so approvals block as
    ``no-resolver``); pass the host's wired broker (``agentplug.api.serve.wire_approvals``)
    to resolve them from the control API or chat, or a ``gate`` to share one with an
    :class:`~agentplug.agent.AgentRunner` (``runner.gate``).
    """

    def __init__(
        self,
        host: PluginHost,
        *,
        broker: ApprovalBroker | None = None,
        gate: ToolCallGate | None = None,
        agent_id: str = "main",
    ) -> None:
        self.host = host
        self.gate = gate if gate is not None else ToolCallGate(host, broker)
        self.agent_id = agent_id
        self.replies = ReplyDispatcher(host)

    @property
    def broker(self) -> ApprovalBroker:
        """The approval broker of the gate."""
        return self.gate.broker

    def tool_ctx(self, ids: CallIds, tool_kind: str | None = None) -> ToolContext:
        """The tool-hook context of a call with ``ids``."""
        return ToolContext(
            agent_id=ids.agent_id or self.agent_id,
            session_key=ids.session_key,
            session_id=ids.session_id,
            run_id=ids.run_id,
            tool_kind=tool_kind,
            channel_id=ids.channel,
        )

    async def call(
        self,
        tool_name: str,
        params: Mapping[str, Any],
        run: RunTool,
        ids: CallIds | None = None,
        *,
        tool_kind: str | None = None,
        approval: ApprovalRequest | None = None,
    ) -> BridgedCall:
        """Gate ``tool_name(params)``, run it when allowed, fire the after-call hooks.

        ``approval`` is one the host requires for this call whatever the plugins say
        (:meth:`~agentplug.services.toolcalls.ToolCallGate.check`), as the runner does for
        the side-effecting actions ``agent.tools`` allows (``Tool.approval``).
        """
        ids = ids or CallIds()
        ctx = self.tool_ctx(ids, tool_kind)
        event = {
            "tool_name": tool_name,
            "params": dict(params),
            "tool_kind": tool_kind,
            "run_id": ids.run_id,
            "tool_call_id": ids.tool_call_id,
        }
        started = time.perf_counter()
        decision = await self.gate.check(event, ctx, approval=approval)
        ran = dict(decision.params)
        returned: list[Any] = []
        if not decision.allowed:
            output = ToolOutput(f"tool call blocked: {decision.reason}", is_error=True)
        else:
            output = await self._run(tool_name, run, ran, returned)
        await self.host.dispatch(
            "after_tool_call",
            {
                "tool_name": tool_name,
                "params": ran,
                "result": output.content if not output.is_error else None,
                "error": output.content if output.is_error else None,
                "duration_ms": (time.perf_counter() - started) * 1000,
                "run_id": ids.run_id,
                "tool_call_id": ids.tool_call_id,
            },
            ctx,
        )
        persisted = self._persist(tool_name, ids, ctx, output)
        return BridgedCall(
            decision.allowed,
            persisted,
            ran,
            decision,
            returned[0] if returned else None,
            persisted.content != output.content,
        )

    async def _run(
        self, tool_name: str, run: RunTool, params: dict[str, Any], returned: list[Any]
    ) -> ToolOutput:
        try:
            value = run(params)
            if asyncio.iscoroutine(value) or isinstance(value, asyncio.Future):
                value = await value
            returned.append(value)
        except Exception as exc:  # a failing tool is an error result, not a crash
            log.warning("tool %s raised %s", tool_name, type(exc).__name__)
            return ToolOutput(
                f"tool {tool_name!r} failed: {type(exc).__name__}: {exc}", is_error=True
            )
        if isinstance(value, ToolOutput):
            return value
        return ToolOutput(value if isinstance(value, str) else _json(value))

    def _persist(
        self, tool_name: str, ids: CallIds, ctx: ToolContext, output: ToolOutput
    ) -> ToolOutput:
        message: dict[str, Any] = {
            "role": "tool",
            "tool_call_id": ids.tool_call_id,
            "name": tool_name,
            "content": output.content,
        }
        if output.is_error:
            message["is_error"] = True
        if output.details is not None:
            message["details"] = json.loads(json.dumps(output.details, default=str))
        persisted = persist_tool_result(
            self.host,
            message,
            ctx,
            tool_name=tool_name,
            tool_call_id=ids.tool_call_id,
            session_key=ids.session_key,
        )
        if persisted.message is None:
            return ToolOutput(WITHHELD, is_error=output.is_error)
        content = persisted.message.get("content", output.content)
        details = persisted.message.get("details")
        return ToolOutput(
            content if isinstance(content, str) else _json(content),
            details if isinstance(details, dict) else None,
            output.is_error,
        )

    async def deliver(self, text: str, ids: CallIds | None = None) -> DeliveryResult:
        """``message_sending`` -> ``reply_payload_sending`` over a framework's final text.

        ``result.content`` is the text to show (rewritten by plugins);
        ``result.suppressed`` means a plugin cancelled it.
        """
        ids = ids or CallIds()
        ctx = MessageContext(session_key=ids.session_key, run_id=ids.run_id, channel=ids.channel)
        return await self.replies.deliver(text, ctx, channel_name=ids.channel)


def _json(value: Any) -> str:
    try:
        return json.dumps(value, default=str)
    except (TypeError, ValueError):
        return str(value)
