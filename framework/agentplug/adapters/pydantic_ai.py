"""PydanticAI: agentplug's plugins in front of an ``Agent``'s tools and output.

```python
from pydantic_ai import Agent
from agentplug import PluginHost
from agentplug.adapters.pydantic_ai import AgentplugCapability

host = PluginHost(config)
host.load_installed()
agent = Agent("openai:gpt-5", tools=[web_search], capabilities=[AgentplugCapability(host)])
```

:class:`AgentplugCapability` is a PydanticAI capability:

* ``wrap_tool_execute``: every tool call of the agent (its own tools, toolsets, MCP
  servers) goes through :class:`~agentplug.agent.bridge.GateBridge`: trusted policies,
  ``before_tool_call`` (block, rewrite, approval with durable grants), the tool,
  ``after_tool_call``, ``tool_result_persist`` / ``before_message_write``. A blocked call
  does not run; the model reads ``"tool call blocked: <public reason>"`` as its result.
* ``after_run``: a ``str`` output goes through ``message_sending`` and
  ``reply_payload_sending``; the run's output becomes the rewritten text, or ``""`` when
  a plugin cancelled it (``capability.last_delivery`` says which).

Ids: PydanticAI's ``run_id`` is the hook contexts' ``run_id``, its ``conversation_id``
the ``session_id`` (and, unless ``session_key`` is given, part of the session key
``agent:<agent_id>:pydantic-ai:<conversation_id>``), its ``tool_call_id`` the
``tool_call_id``. A tool's ``ModelRetry`` / ``ApprovalRequired`` / ``CallDeferred``
still reach PydanticAI after the after-call hooks ran.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agentplug.agent.bridge import CallIds, GateBridge
from agentplug.agent.tools import ToolOutput
from agentplug.services.turns import DeliveryResult

try:
    from pydantic_ai.capabilities import AbstractCapability
except ImportError as exc:  # pragma: no cover - exercised when the extra is missing
    raise ImportError(
        "agentplug.adapters.pydantic_ai needs PydanticAI; install it with: "
        "pip install 'agentplug[pydantic-ai]'"
    ) from exc

if TYPE_CHECKING:
    from pydantic_ai import RunContext
    from pydantic_ai.messages import ToolCallPart
    from pydantic_ai.run import AgentRunResult
    from pydantic_ai.tools import ToolDefinition

    from agentplug.core.host import PluginHost
    from agentplug.services.approvals import ApprovalBroker

__all__ = ["AgentplugCapability"]


@dataclass(init=False)
class AgentplugCapability(AbstractCapability[Any]):
    """Gate a PydanticAI agent's tool calls and output with agentplug's plugins.

    ``host`` (or a ready ``bridge``); ``broker`` resolves approvals (default: none
    connected, so approvals block); ``session_key`` fixes the session of every run;
    ``deliver_output=False`` leaves the output alone.
    """

    bridge: GateBridge
    session_key: str | None
    deliver_output: bool
    last_delivery: DeliveryResult | None

    def __init__(
        self,
        host: PluginHost | None = None,
        *,
        bridge: GateBridge | None = None,
        broker: ApprovalBroker | None = None,
        session_key: str | None = None,
        agent_id: str = "main",
        deliver_output: bool = True,
    ) -> None:
        if bridge is None:
            if host is None:
                raise TypeError("AgentplugCapability needs a host (or a bridge)")
            bridge = GateBridge(host, broker=broker, agent_id=agent_id)
        self.bridge = bridge
        self.session_key = session_key
        self.deliver_output = deliver_output
        self.last_delivery = None

    def ids(self, ctx: RunContext[Any], tool_call_id: str | None = None) -> CallIds:
        """The hook-context ids of a PydanticAI run (and tool call)."""
        agent_id = self.bridge.agent_id
        conversation = ctx.conversation_id
        key = self.session_key or f"agent:{agent_id}:pydantic-ai:{conversation or 'main'}"
        return CallIds(
            run_id=ctx.run_id,
            session_key=key,
            session_id=conversation,
            tool_call_id=tool_call_id,
            agent_id=agent_id,
            channel="pydantic-ai",
        )

    async def wrap_tool_execute(
        self,
        ctx: RunContext[Any],
        *,
        call: ToolCallPart,
        tool_def: ToolDefinition,
        args: dict[str, Any],
        handler: Any,
    ) -> Any:
        """Run the call through the gate; the tool runs only when it allows."""
        from pydantic_ai.exceptions import ApprovalRequired, CallDeferred, ModelRetry

        raised: list[BaseException] = []

        async def run(params: dict[str, Any]) -> Any:
            try:
                return await handler(params)
            except (ModelRetry, ApprovalRequired, CallDeferred) as exc:
                raised.append(exc)
                return ToolOutput(f"{type(exc).__name__}: {exc}", is_error=True)

        kind = (tool_def.metadata or {}).get("tool_kind")
        done = await self.bridge.call(
            call.tool_name,
            args,
            run,
            self.ids(ctx, call.tool_call_id),
            tool_kind=str(kind) if kind else None,
        )
        if raised:
            raise raised[0]
        if not done.allowed or done.rewritten or done.output.is_error:
            return done.output.content
        return done.value

    async def after_run(
        self, ctx: RunContext[Any], *, result: AgentRunResult[Any]
    ) -> AgentRunResult[Any]:
        """``message_sending`` / ``reply_payload_sending`` over a text output."""
        if not self.deliver_output or not isinstance(result.output, str):
            return result
        delivery = await self.bridge.deliver(result.output, self.ids(ctx))
        self.last_delivery = delivery
        text = "" if delivery.suppressed else (delivery.content or "")
        if text == result.output:
            return result
        return dataclasses.replace(result, output=text)
