"""LangChain 1.x: agentplug's plugins in front of a ``create_agent`` agent.

```python
from langchain.agents import create_agent
from agentplug import Gateway
from agentplug.adapters.langchain import AgentplugMiddleware

gateway = Gateway.from_config(config, load_plugins=True)
agent = create_agent(model, tools=[web_search], middleware=[AgentplugMiddleware(gateway)])
```

:class:`AgentplugMiddleware` is an agent middleware:

* ``wrap_tool_call`` / ``awrap_tool_call``: every tool call goes through the gateway's
  :class:`~agentplug.agent.pipeline.ToolCallPipeline`: trusted policies, ``before_tool_call``
  (block, rewrite, approval with durable grants), the tool (with the rewritten ``args``),
  ``after_tool_call``, ``tool_result_persist`` / ``before_message_write``. A blocked call
  does not run: the model gets an error ``ToolMessage`` with the public reason.
* ``after_agent``: the final ``AIMessage`` text goes through ``message_sending`` and
  ``reply_payload_sending``; the message is replaced (same id) by the rewritten text, or
  by an empty one when a plugin cancelled it (``middleware.last_delivery`` says which).

Ids: the run id is LangGraph's ``run_id`` when the caller passes one in the config (``{"run_id":
...}``), else one the middleware draws in ``before_agent`` (kept in the state key
``agentplug_run_id``); the thread id is the ``session_id`` and part of the session key
``agent:<agent_id>:langchain:<thread_id>`` (unless ``session_key`` is given); the tool
call's ``id`` is the ``tool_call_id``. The synchronous hooks (``agent.invoke``) run the
pipeline on the host's private loop (``host.sync``).
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, NotRequired

from agentplug.adapters.gating import FrameworkGate
from agentplug.agent.pipeline import CallIds, ToolCallRecord
from agentplug.agent.tools import ToolOutput
from agentplug.services.turns import DeliveryResult

try:
    from langchain.agents.middleware import AgentMiddleware, AgentState
    from langchain_core.messages import AIMessage, ToolMessage
except ImportError as exc:  # pragma: no cover - exercised when the extra is missing
    raise ImportError(
        "agentplug.adapters.langchain needs LangChain 1.x; install it with: "
        "pip install 'agentplug[langchain]'"
    ) from exc

if TYPE_CHECKING:
    from agentplug.gateway import Gateway, PluginHost
    from agentplug.services.approvals import ApprovalBroker

__all__ = ["AgentplugMiddleware", "AgentplugState"]

RUN_ID_KEY = "agentplug_run_id"


class AgentplugState(AgentState[Any]):
    """The agent state plus the run id the middleware correlates hooks with."""

    agentplug_run_id: NotRequired[str | None]


def _thread_id(runtime: Any) -> str | None:
    info = getattr(runtime, "execution_info", None)
    thread = getattr(info, "thread_id", None)
    if thread:
        return str(thread)
    config = getattr(runtime, "config", None) or {}
    value = (config.get("configurable") or {}).get("thread_id")
    return None if value is None else str(value)


def _given_run_id(runtime: Any) -> str | None:
    info = getattr(runtime, "execution_info", None)
    value = getattr(info, "run_id", None)
    return None if value is None else str(value)


def _content(message: Any) -> ToolOutput:
    if isinstance(message, ToolMessage):
        text = message.content if isinstance(message.content, str) else str(message.content)
        return ToolOutput(text, is_error=message.status == "error")
    return ToolOutput(f"(the tool returned a {type(message).__name__})")


class AgentplugMiddleware(AgentMiddleware[AgentplugState, Any]):
    """Gate a LangChain agent's tool calls and final reply with agentplug's plugins.

    ``gateway`` (or its host) provides the plugins, the tool-call pipeline and the reply
    path; ``broker`` replaces the gateway's approval broker; ``session_key`` fixes the
    session of every run; ``deliver_output=False`` leaves the final message alone.
    """

    state_schema = AgentplugState

    def __init__(
        self,
        gateway: Gateway | PluginHost,
        *,
        broker: ApprovalBroker | None = None,
        session_key: str | None = None,
        agent_id: str = "main",
        deliver_output: bool = True,
    ) -> None:
        super().__init__()
        self.gate = FrameworkGate(gateway, broker=broker, agent_id=agent_id)
        self.session_key = session_key
        self.deliver_output = deliver_output
        self.last_delivery: DeliveryResult | None = None

    def ids(self, state: Any, runtime: Any, tool_call_id: str | None = None) -> CallIds:
        """The hook-context ids of a LangChain run (and tool call)."""
        agent_id = self.gate.agent_id
        thread = _thread_id(runtime)
        run_id = _given_run_id(runtime)
        if run_id is None and isinstance(state, dict):
            run_id = state.get(RUN_ID_KEY)
        return CallIds(
            run_id=run_id,
            session_key=self.session_key or f"agent:{agent_id}:langchain:{thread or 'main'}",
            session_id=thread,
            tool_call_id=tool_call_id,
            agent_id=agent_id,
            channel="langchain",
        )

    # -- the run id ---------------------------------------------------------------------

    def before_agent(self, state: AgentplugState, runtime: Any) -> dict[str, Any] | None:
        """Draw this run's id (unless the caller passed LangGraph a ``run_id``)."""
        return {RUN_ID_KEY: _given_run_id(runtime) or f"lc-{uuid.uuid4().hex[:16]}"}

    async def abefore_agent(self, state: AgentplugState, runtime: Any) -> dict[str, Any] | None:
        """Async :meth:`before_agent`."""
        return self.before_agent(state, runtime)

    # -- tool calls -----------------------------------------------------------------------

    async def _gate(self, request: Any, execute: Callable[[Any], Awaitable[Any]]) -> Any:
        call = request.tool_call
        name = str(call["name"])
        call_id = call.get("id")
        ids = self.ids(request.state, request.runtime, call_id)
        returned: list[Any] = []

        async def run(params: dict[str, Any]) -> ToolOutput:
            message = await execute(request.override(tool_call={**call, "args": params}))
            returned.append(message)
            return _content(message)

        kind = None
        tool = request.tool
        if tool is not None and isinstance(getattr(tool, "metadata", None), dict):
            kind = tool.metadata.get("tool_kind")
        done = await self.gate.pipeline.call(
            name, dict(call.get("args") or {}), run, ids, tool_kind=str(kind) if kind else None
        )
        return self._answer(done, returned, name, call_id)

    @staticmethod
    def _answer(done: ToolCallRecord, returned: list[Any], name: str, call_id: Any) -> Any:
        if done.allowed and returned and not done.rewritten:
            return returned[0]
        return ToolMessage(
            content=done.output.content,
            tool_call_id=call_id,
            name=name,
            status="error" if done.output.is_error else "success",
        )

    async def awrap_tool_call(self, request: Any, handler: Any) -> Any:
        """Run the call through the gate; the tool runs only when it allows."""

        async def execute(req: Any) -> Any:
            return await handler(req)

        return await self._gate(request, execute)

    def wrap_tool_call(self, request: Any, handler: Any) -> Any:
        """Synchronous :meth:`awrap_tool_call` (the gate runs on ``host.sync``)."""

        async def execute(req: Any) -> Any:
            return handler(req)

        return self.gate.gateway.host.sync.run(self._gate(request, execute))

    # -- the final reply ------------------------------------------------------------------

    async def aafter_agent(self, state: AgentplugState, runtime: Any) -> dict[str, Any] | None:
        """``message_sending`` / ``reply_payload_sending`` over the final reply text."""
        if not self.deliver_output:
            return None
        messages = state.get("messages") or []
        last = messages[-1] if messages else None
        if not isinstance(last, AIMessage) or last.tool_calls or not isinstance(last.content, str):
            return None
        delivery = await self.gate.deliver(last.content, self.ids(state, runtime))
        self.last_delivery = delivery
        text = "" if delivery.suppressed else (delivery.content or "")
        if text == last.content:
            return None
        return {"messages": [AIMessage(content=text, id=last.id)]}

    def after_agent(self, state: AgentplugState, runtime: Any) -> dict[str, Any] | None:
        """Synchronous :meth:`aafter_agent` (on ``host.sync``)."""
        host = self.gate.gateway.host
        result: dict[str, Any] | None = host.sync.run(self.aafter_agent(state, runtime))
        return result
