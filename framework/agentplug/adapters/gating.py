"""What both framework adapters share: :class:`FrameworkGate`, a gateway's tool-call
pipeline and reply path seen from an outside agent framework."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentplug_hookspecs.common import MessageContext

from agentplug.agent.pipeline import CallIds, ToolCallPipeline
from agentplug.gateway import Gateway, PluginHost
from agentplug.services.toolcalls import ToolCallGate

if TYPE_CHECKING:
    from agentplug.services.approvals import ApprovalBroker
    from agentplug.services.turns import DeliveryResult

__all__ = ["FrameworkGate"]


class FrameworkGate:
    """The gateway's :class:`~agentplug.agent.pipeline.ToolCallPipeline` for one adapter
    (its own ``agent_id``; ``broker`` replaces the gateway's approval broker) and the
    gateway's replies for the framework's final text."""

    def __init__(
        self,
        gateway: Gateway | PluginHost,
        *,
        broker: ApprovalBroker | None = None,
        agent_id: str = "main",
    ) -> None:
        gw = gateway.gateway if isinstance(gateway, PluginHost) else gateway
        if not isinstance(gw, Gateway):
            raise TypeError(
                f"an adapter needs an agentplug.Gateway (or its host), got {type(gw).__name__}"
            )
        self.gateway = gw
        self.agent_id = agent_id
        gate = gw.tool_calls.gate
        if broker is not None:
            gate = ToolCallGate(gw.host, gw.policies, broker)
        self.pipeline = ToolCallPipeline(
            gw.host, gate, limits=gw.tool_calls.limits, agent_id=agent_id
        )
        """Every tool call of the framework runs through this."""

    async def deliver(self, text: str, ids: CallIds | None = None) -> DeliveryResult:
        """``message_sending`` -> ``reply_payload_sending`` over the framework's final text:
        ``result.content`` is what to show, ``result.suppressed`` that a plugin cancelled."""
        ids = ids or CallIds()
        ctx = MessageContext(session_key=ids.session_key, run_id=ids.run_id, channel=ids.channel)
        return await self.gateway.replies.deliver(text, ctx, channel_name=ids.channel)
