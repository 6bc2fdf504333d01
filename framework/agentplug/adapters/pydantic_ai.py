"""PydanticAI: agentplug's plugins in front of an ``Agent``'s tools and output.

```python
from pydantic_ai import Agent
from agentplug import Gateway
from agentplug.adapters.pydantic_ai import AgentplugCapability

gateway = Gateway.from_config(config, load_plugins=True)
agent = Agent("openai:gpt-5", tools=[web_search], capabilities=[AgentplugCapability(gateway)])
```

:class:`AgentplugCapability` is a PydanticAI capability:

* ``wrap_tool_execute``: every tool call of the agent (its own tools, toolsets, MCP
  servers) goes through the gateway's :class:`~agentplug.agent.pipeline.ToolCallPipeline`:
  trusted policies,
  ``before_tool_call`` (block, rewrite, approval with durable grants), the tool,
  ``after_tool_call``, ``tool_result_persist`` / ``before_message_write``. A blocked call
  does not run; the model reads ``"tool call blocked: <public reason>"`` as its result.
* ``wrap_output_process``: an output function (``Agent(output_type=fn)``) runs through
  the same gate, as a call of ``fn.__name__`` with ``tool_kind="output"`` and the
  arguments the model sent. A blocked call does not run: it becomes a ``ModelRetry``, so
  the model reads ``"tool call blocked: <public reason>"`` and the run fails with
  PydanticAI's retry error once the output retries are used up. Output functions cannot
  take rewritten arguments: a rewrite blocks the call. A partial output while streaming
  does not run the function (it runs, gated, on the final output only).
* ``after_run``: a ``str`` output goes through ``message_sending`` and
  ``reply_payload_sending``; the run's output becomes the rewritten text, or ``""`` when
  a plugin cancelled it (``capability.last_delivery`` says which).

Ids: PydanticAI's ``run_id`` is the hook contexts' ``run_id``, its ``conversation_id``
the ``session_id`` (and, unless ``session_key`` is given, part of the session key
``agent:<agent_id>:pydantic-ai:<conversation_id>``), its ``tool_call_id`` the
``tool_call_id``. PydanticAI's control-flow exceptions raised by a tool (``ModelRetry``,
``ToolFailed``, ``ApprovalRequired``, ``CallDeferred``, ``SkipToolExecution``) and every
exception of an output function still reach PydanticAI after ``after_tool_call``
observed them (``error="ModelRetry: <message>"``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agentplug.adapters.gating import FrameworkGate
from agentplug.agent.pipeline import CallIds
from agentplug.agent.tools import ToolOutput
from agentplug.services.turns import DeliveryResult

try:
    from pydantic_ai import exceptions as pai_errors
    from pydantic_ai.capabilities import AbstractCapability
    from pydantic_core import to_jsonable_python as to_jsonable
except ImportError as exc:  # pragma: no cover - exercised when the extra is missing
    raise ImportError(
        "agentplug.adapters.pydantic_ai needs PydanticAI; install it with: "
        "pip install 'agentplug[pydantic-ai]'"
    ) from exc

if TYPE_CHECKING:
    from pydantic_ai import RunContext
    from pydantic_ai.messages import ToolCallPart
    from pydantic_ai.output import OutputContext
    from pydantic_ai.run import AgentRunResult
    from pydantic_ai.tools import ToolDefinition

    from agentplug.gateway import Gateway, PluginHost
    from agentplug.services.approvals import ApprovalBroker

__all__ = ["AgentplugCapability"]


@dataclass(init=False)
class AgentplugCapability(AbstractCapability[Any]):
    """Gate a PydanticAI agent's tool calls and output with agentplug's plugins.

    ``gateway`` (or its host) provides the plugins, the tool-call pipeline and the reply
    path; ``broker`` replaces the gateway's approval broker; ``session_key`` fixes the
    session of every run; ``deliver_output=False`` leaves the output alone.
    """

    gate: FrameworkGate
    session_key: str | None
    deliver_output: bool
    last_delivery: DeliveryResult | None

    def __init__(
        self,
        gateway: Gateway | PluginHost,
        *,
        broker: ApprovalBroker | None = None,
        session_key: str | None = None,
        agent_id: str = "main",
        deliver_output: bool = True,
    ) -> None:
        self.gate = FrameworkGate(gateway, broker=broker, agent_id=agent_id)
        self.session_key = session_key
        self.deliver_output = deliver_output
        self.last_delivery = None

    def ids(self, ctx: RunContext[Any], tool_call_id: str | None = None) -> CallIds:
        """The hook-context ids of a PydanticAI run (and tool call)."""
        agent_id = self.gate.agent_id
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
        raised: list[BaseException] = []

        async def run(params: dict[str, Any]) -> Any:
            try:
                return await handler(params)
            except _CONTROL_FLOW as exc:
                raised.append(exc)
                return _observed(exc)

        kind = (tool_def.metadata or {}).get("tool_kind")
        done = await self.gate.pipeline.call(
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

    async def wrap_output_process(
        self,
        ctx: RunContext[Any],
        *,
        output_context: OutputContext,
        output: Any,
        handler: Any,
    ) -> Any:
        """Run an output function through the gate; it runs only when the gate allows."""
        if not output_context.has_function:
            return await handler(output)
        call = output_context.tool_call
        name = output_context.function_name or (call.tool_name if call else "output")
        if ctx.partial_output:
            # PydanticAI skips a partial output that asks for a retry; gating every partial
            # would ask for approval once per streamed chunk.
            raise pai_errors.ModelRetry(f"output function {name!r} runs on the final output only")
        params = call.args_as_dict() if call is not None else {"output": to_jsonable(output)}
        raised: list[BaseException] = []

        async def run(ran: dict[str, Any]) -> Any:
            if ran != params:
                return ToolOutput(
                    f"tool call blocked: a plugin rewrote the arguments of output function "
                    f"{name!r}, and output functions run only with the model's own arguments",
                    is_error=True,
                )
            try:
                return await handler(output)
            except Exception as exc:  # PydanticAI decides what the function's errors mean
                raised.append(exc)
                return _observed(exc)

        done = await self.gate.pipeline.call(
            name,
            params,
            run,
            self.ids(ctx, call.tool_call_id if call is not None else None),
            tool_kind="output",
        )
        if raised:
            raise raised[0]
        if not done.allowed or done.output.is_error:
            raise pai_errors.ModelRetry(done.output.content)
        return done.value

    async def after_run(
        self, ctx: RunContext[Any], *, result: AgentRunResult[Any]
    ) -> AgentRunResult[Any]:
        """``message_sending`` / ``reply_payload_sending`` over a text output."""
        if not self.deliver_output or not isinstance(result.output, str):
            return result
        delivery = await self.gate.deliver(result.output, self.ids(ctx))
        self.last_delivery = delivery
        text = "" if delivery.suppressed else (delivery.content or "")
        if text == result.output:
            return result
        return dataclasses.replace(result, output=text)


# PydanticAI's signals a tool raises for PydanticAI itself: they are not tool failures.
_CONTROL_FLOW: tuple[type[Exception], ...] = (
    pai_errors.ModelRetry,
    pai_errors.ToolRetryError,
    pai_errors.ToolFailed,
    pai_errors.ToolFailedError,
    pai_errors.ApprovalRequired,
    pai_errors.CallDeferred,
    pai_errors.SkipToolExecution,
)


def _observed(exc: Exception) -> ToolOutput:
    """What ``after_tool_call`` sees of an exception that goes on to PydanticAI."""
    if isinstance(exc, pai_errors.SkipToolExecution):
        return ToolOutput(str(exc.result))
    # PydanticAI has wrapped the tool's ModelRetry / ToolFailed before the gate sees it.
    if isinstance(exc, pai_errors.ToolRetryError):
        return ToolOutput(f"ModelRetry: {exc}", is_error=True)
    if isinstance(exc, pai_errors.ToolFailedError):
        return ToolOutput(f"ToolFailed: {exc}", is_error=True)
    return ToolOutput(f"{type(exc).__name__}: {exc}", is_error=True)
