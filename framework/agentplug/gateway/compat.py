"""Deprecated names kept for one release: :class:`GateBridge`.

``GateBridge(host)`` ran an outside framework's tool calls through the gate; every
entrance now shares the gateway's :class:`~agentplug.agent.pipeline.ToolCallPipeline`
(``gateway.tool_calls``), and replies go through ``gateway.replies``.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

from agentplug_hookspecs.common import MessageContext
from agentplug_hookspecs.tools import ApprovalRequest, ToolContext

from agentplug.agent.pipeline import CallIds, RunTool, ToolCallPipeline, ToolCallRecord
from agentplug.gateway.assembly import PluginHost
from agentplug.services.approvals import ApprovalBroker
from agentplug.services.toolcalls import ToolCallGate
from agentplug.services.turns import DeliveryResult

__all__ = ["BridgedCall", "GateBridge"]

BridgedCall = ToolCallRecord
"""Deprecated name of :class:`~agentplug.agent.pipeline.ToolCallRecord`."""


class GateBridge:
    """Deprecated: use ``gateway.tool_calls.call(...)`` and ``gateway.replies.deliver(...)``."""

    def __init__(
        self,
        host: PluginHost,
        *,
        broker: ApprovalBroker | None = None,
        gate: ToolCallGate | None = None,
        agent_id: str = "main",
    ) -> None:
        warnings.warn(
            "GateBridge is deprecated; use gateway.tool_calls (agentplug.ToolCallPipeline) "
            "and gateway.replies",
            DeprecationWarning,
            stacklevel=2,
        )
        gateway = host.gateway
        if gate is None:
            gate = ToolCallGate(host, gateway.policies, broker or gateway.approvals)
        self.host = host
        self.agent_id = agent_id
        self.pipeline = ToolCallPipeline(
            host, gate, limits=gateway.tool_calls.limits, agent_id=agent_id
        )
        self.replies = gateway.replies

    @property
    def gate(self) -> ToolCallGate:
        """The gate of the pipeline."""
        return self.pipeline.gate

    @property
    def broker(self) -> ApprovalBroker:
        """The approval broker of the gate."""
        return self.pipeline.broker

    def tool_ctx(self, ids: CallIds, tool_kind: str | None = None) -> ToolContext:
        """The tool-hook context of a call with ``ids``."""
        return self.pipeline.tool_ctx(ids, tool_kind)

    async def call(
        self,
        tool_name: str,
        params: Mapping[str, Any],
        run: RunTool,
        ids: CallIds | None = None,
        *,
        tool_kind: str | None = None,
        approval: ApprovalRequest | None = None,
    ) -> ToolCallRecord:
        """``gateway.tool_calls.call(...)``."""
        return await self.pipeline.call(
            tool_name, params, run, ids, tool_kind=tool_kind, approval=approval
        )

    async def deliver(self, text: str, ids: CallIds | None = None) -> DeliveryResult:
        """``message_sending`` -> ``reply_payload_sending`` over a framework's final text."""
        ids = ids or CallIds()
        ctx = MessageContext(session_key=ids.session_key, run_id=ids.run_id, channel=ids.channel)
        return await self.replies.deliver(text, ctx, channel_name=ids.channel)
