"""One tool call, from the model's request to the text it reads back: :class:`ToolCallPipeline`.

Every entrance runs tool calls through this one class: the runner's own model loop, the
MCP proxy, the PydanticAI and LangChain adapters. The steps, in order:

1. **refusal** by the caller (``agent.limits`` dropped the call, the arguments were not a
   JSON object, the tool is unknown or excluded): answered without running anything;
2. **validate**: a tool that can say "not now" (an action's ``validate()``) is asked
   first; a refusal never reaches the gate;
3. **the gate** (:class:`~agentplug.services.toolcalls.ToolCallGate`): trusted tool
   policies, ``before_tool_call``, ``resolve_exec_env`` for exec tools, approvals with
   standing grants (and the operator's own approval for side-effecting actions);
4. **run** the tool with the parameters the gate decided on (and the filtered exec env);
5. **shape** the result: configured secrets scrubbed, cut at
   ``agent.limits.tool_result_chars``;
6. ``after_tool_call`` (observed);
7. ``tool_result_persist`` and ``before_message_write``: what the transcript keeps and
   what the caller hands back (a withheld result becomes :data:`WITHHELD`).

The steps are three methods: :meth:`ToolCallPipeline.decide` (1 to 3),
:meth:`~ToolCallPipeline.execute` (4 to 6) and :meth:`~ToolCallPipeline.persist` (7).
:meth:`~ToolCallPipeline.run` does the three in a row; the runner, with several calls
in one model response, lets the gate decide them in call order, executes the allowed
ones side by side and persists all of them in call order (the transcript reads as the
model asked). With tracing on, each call is an ``execute_tool`` span
(:mod:`~agentplug.agent.spans`), blocked, refused and failed calls included.

Whatever happens the call is answered with a readable result, never an exception: a
blocked call reads ``tool call blocked: <public reason>``, a failing tool ``tool 'x'
failed: <error>``. The confidential part of a decision never leaves the gate.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agentplug_hookspecs.tools import ApprovalRequest, ToolContext

from agentplug.agent import spans
from agentplug.agent.limits import AgentLimits, cut_tool_result
from agentplug.agent.tools import Tool, ToolCallContext, ToolOutput, ToolRun
from agentplug.agent.trace import current_trace
from agentplug.core.redaction import scrub, scrub_data
from agentplug.services.toolcalls import ToolCallDecision, ToolCallGate
from agentplug.services.toolresults import persist_tool_result

if TYPE_CHECKING:
    from agentplug.core.host import HookHost
    from agentplug.services.approvals import ApprovalBroker
    from agentplug.services.policies import TrustedToolPolicies
    from agentplug.services.signals import AbortSignal

__all__ = [
    "WITHHELD",
    "CallIds",
    "PendingCall",
    "ToolCallPipeline",
    "ToolCallRecord",
    "ToolRequest",
]

log = logging.getLogger("agentplug.agent")

WITHHELD = "(this tool result was withheld by a plugin)"
"""What the model reads, and the transcript keeps, when a plugin withheld a result."""

RunTool = Callable[[dict[str, Any]], Awaitable[Any] | Any]
"""Runs an outside framework's tool with the parameters the gate decided on."""


@dataclass(frozen=True)
class CallIds:
    """The ids of one call, as the hook contexts carry them."""

    run_id: str | None = None
    session_key: str | None = None
    session_id: str | None = None
    tool_call_id: str | None = None
    agent_id: str | None = None
    channel: str | None = None


@dataclass
class ToolRequest:
    """One tool call to run: what was asked, by whom, and what the caller knows of it."""

    tool_name: str
    params: Mapping[str, Any]
    ids: CallIds = field(default_factory=CallIds)
    tool_kind: str | None = None
    approval: ApprovalRequest | None = None
    """An approval the host itself requires for this call, whatever the plugins say."""
    user_text: str = ""
    """The turn's user text (what an action validates and runs with)."""
    signal: AbortSignal | None = None
    refusal: str | None = None
    """Answer the call with this error instead of running anything."""
    note: str | None = None
    """Appended to the result the model reads (what it must know about its response)."""
    context: ToolContext | None = None
    """The hook context to use (the runner's turn context); default: built from ``ids``."""


@dataclass
class PendingCall:
    """A call between the gate's decision and its result (:meth:`ToolCallPipeline.decide`
    made it; :meth:`~ToolCallPipeline.execute` and :meth:`~ToolCallPipeline.persist`
    finish it)."""

    request: ToolRequest
    run: ToolRun | None
    ctx: ToolContext
    params: dict[str, Any]
    started: float
    decision: ToolCallDecision | None = None
    output: ToolOutput | None = None
    """Set by the gate step when the call is answered without running."""
    value: Any = None
    shaped: ToolOutput | None = None
    span: Any = None

    @property
    def will_run(self) -> bool:
        """Whether :meth:`~ToolCallPipeline.execute` runs the tool (the gate allowed it)."""
        return self.output is None


@dataclass
class ToolCallRecord:
    """What the pipeline did with one call."""

    allowed: bool
    output: ToolOutput
    """What the caller hands back: the result as persisted, or a readable error."""
    params: dict[str, Any] = field(default_factory=dict)
    """The parameters the tool ran with (after rewrites)."""
    decision: ToolCallDecision | None = None
    """The gate's decision (``None`` when the call never reached it)."""
    value: Any = None
    """What the tool itself returned (``None`` when it did not run)."""
    rewritten: bool = False
    """Shaping, ``tool_result_persist`` or ``before_message_write`` changed or withheld
    the result: hand back ``output``, not ``value``."""
    message: dict[str, Any] | None = None
    """The tool message for the transcript (the withheld stand-in when withheld)."""
    refused: str | None = None
    """Why the call was answered without running (refusal or ``validate()``)."""

    @property
    def reason(self) -> str:
        """The public reason of the decision (what the model reads on a block)."""
        return self.decision.reason if self.decision is not None else self.output.content


class ToolCallPipeline:
    """The one tool-call path of a gateway (see the module docstring).

    ``gate`` decides (policies, hooks, exec env, approvals); ``limits`` bound what the
    model reads back (default: the agent defaults).
    """

    def __init__(
        self,
        host: HookHost,
        gate: ToolCallGate,
        *,
        limits: AgentLimits | None = None,
        agent_id: str = "main",
    ) -> None:
        self.host = host
        self.gate = gate
        self.limits = limits if limits is not None else AgentLimits()
        self.agent_id = agent_id

    @classmethod
    def build(
        cls,
        host: HookHost,
        policies: TrustedToolPolicies,
        broker: ApprovalBroker,
        *,
        limits: AgentLimits | None = None,
        agent_id: str = "main",
    ) -> ToolCallPipeline:
        """A pipeline with its own gate over ``policies`` and ``broker``."""
        return cls(host, ToolCallGate(host, policies, broker), limits=limits, agent_id=agent_id)

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

    # -- entrances -----------------------------------------------------------------------

    async def run(
        self,
        request: ToolRequest,
        tool: Tool | None,
        *,
        checkpoint: Callable[[], None] | None = None,
    ) -> ToolCallRecord:
        """Run ``request`` with ``tool`` (the runner's and the proxy's tools): the three
        steps :meth:`decide`, :meth:`execute` and :meth:`persist`, one after another.

        ``tool`` is ``None`` when the caller found none by that name: give the reason as
        ``request.refusal``. ``checkpoint()`` runs after the gate decided (the runner
        raises there when the turn was cancelled while an approval waited).
        """
        pending = await self.decide(request, tool, checkpoint=checkpoint)
        await self.execute(pending)
        return self.persist(pending)

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
        """Gate and run an outside framework's tool call (``run(params)`` runs it).

        ``approval`` is one the host requires for this call whatever the plugins say, as
        the runner does for the side-effecting actions ``agent.tools`` allows.
        """
        request = ToolRequest(
            tool_name, params, ids or CallIds(), tool_kind=tool_kind, approval=approval
        )

        def framework_tool(ran: dict[str, Any], context: ToolCallContext) -> Any:
            return run(ran)

        pending = await self._gate_step(request, framework_tool, None, "framework")
        await self.execute(pending)
        return self.persist(pending)

    # -- the steps (a caller running several calls: decide each in call order, execute
    #    them side by side, persist in call order) ------------------------------------------

    async def decide(
        self,
        request: ToolRequest,
        tool: Tool | None,
        *,
        checkpoint: Callable[[], None] | None = None,
    ) -> PendingCall:
        """Steps 1 to 3: the refusal, ``validate()``, the gate. Nothing runs yet."""
        if tool is None and request.refusal is None:
            request.refusal = f"unknown tool {request.tool_name!r}"
        if tool is None:
            return await self._gate_step(request, None, checkpoint, None)
        if request.refusal is None:
            request.refusal = await self._validate(tool, request)
        if request.tool_kind is None:
            request.tool_kind = tool.kind
        if request.approval is None:
            request.approval = tool.approval
        return await self._gate_step(request, tool.run, checkpoint, tool.source)

    async def execute(self, pending: PendingCall) -> None:
        """Steps 4 to 6: run the tool when the gate allowed it, shape the result,
        ``after_tool_call``. Never raises for the tool's sake: a failure is its result."""
        request = pending.request
        if pending.output is None:
            assert pending.run is not None and pending.decision is not None
            pending.output, pending.value = await self._run(
                request, pending.run, pending.params, pending.decision
            )
        pending.shaped = self._shape(pending.output, request.note)
        shaped = pending.shaped
        await self.host.hooks.after_tool_call(
            {
                "tool_name": request.tool_name,
                "params": pending.params,
                "result": shaped.content if not shaped.is_error else None,
                "error": shaped.content if shaped.is_error else None,
                "duration_ms": (time.perf_counter() - pending.started) * 1000,
                "run_id": request.ids.run_id,
                "tool_call_id": request.ids.tool_call_id,
            },
            pending.ctx,
        )

    def persist(self, pending: PendingCall) -> ToolCallRecord:
        """Step 7: ``tool_result_persist`` and ``before_message_write``; the record."""
        request, decision = pending.request, pending.decision
        output = pending.output
        shaped = pending.shaped
        assert output is not None and shaped is not None, "persist() before execute()"
        message, persisted = self._persist(request, pending.ctx, shaped)
        error_type = None
        if request.refusal is not None or pending.run is None:
            error_type = "refused"
        elif decision is not None and not decision.allowed:
            error_type = "blocked"
        elif output.is_error:
            error_type = "tool_error"
        spans.end_span(pending.span, error_type)
        pending.span = None
        return ToolCallRecord(
            allowed=decision is not None and decision.allowed,
            output=persisted,
            params=pending.params,
            decision=decision,
            value=pending.value,
            rewritten=persisted.content != output.content,
            message=message,
            refused=request.refusal,
        )

    async def _gate_step(
        self,
        request: ToolRequest,
        run: ToolRun | None,
        checkpoint: Callable[[], None] | None,
        source: str | None,
    ) -> PendingCall:
        started = time.perf_counter()
        ids = request.ids
        if request.context is not None:
            ctx = request.context.model_copy(update={"tool_kind": request.tool_kind})
        else:
            ctx = self.tool_ctx(ids, request.tool_kind)
        pending = PendingCall(request, run, ctx, dict(request.params), started)
        pending.span = spans.tool_span(
            spans.tracer_of(self.host), request.tool_name, ids.tool_call_id, source
        )
        if request.refusal is not None or run is None:
            pending.output = ToolOutput(request.refusal or "the tool cannot run", is_error=True)
            trace = current_trace()
            if trace is not None:  # the model's call is answered: say why it did not run
                trace.add("tool", request.tool_name, refused=_clip(pending.output.content))
            return pending
        try:
            decision = await self._decide(request, ctx, pending.params)
            if checkpoint is not None:
                checkpoint()
        except BaseException:
            spans.end_span(pending.span, "cancelled")
            raise
        pending.decision = decision
        pending.params = dict(decision.params)
        if not decision.allowed:
            pending.output = ToolOutput(f"tool call blocked: {decision.reason}", is_error=True)
        return pending

    async def _validate(self, tool: Tool, request: ToolRequest) -> str | None:
        if tool.validate is None:
            return None
        return await tool.validate(self._context(request, {}, None))

    def _context(
        self, request: ToolRequest, params: Mapping[str, Any], decision: ToolCallDecision | None
    ) -> ToolCallContext:
        env = decision.exec_env if decision is not None else None
        return ToolCallContext(
            run_id=request.ids.run_id,
            session_key=request.ids.session_key,
            tool_call_id=request.ids.tool_call_id,
            user_text=request.user_text,
            exec_env=dict(env.env) if env is not None else None,
            signal=request.signal,
        )

    async def _decide(
        self, request: ToolRequest, ctx: ToolContext, params: dict[str, Any]
    ) -> ToolCallDecision:
        event = {
            "tool_name": request.tool_name,
            "params": params,
            "tool_kind": request.tool_kind,
            "run_id": request.ids.run_id,
            "tool_call_id": request.ids.tool_call_id,
        }
        started = time.perf_counter()
        decision = await self.gate.check(event, ctx, approval=request.approval)
        trace = current_trace()
        if trace is not None:
            env = decision.metadata.get("exec_env")  # key names only: values may be secrets
            trace.add(
                "tool",
                request.tool_name,
                (time.perf_counter() - started) * 1000,
                began=started,
                allowed=decision.allowed,
                blocked_by=decision.blocked_by,
                blocked_by_policy=decision.blocked_by_policy,
                approval=decision.approval_resolution,
                approval_requested_by=decision.approval.plugin_id if decision.approval else None,
                approval_by=decision.approval_by,
                # The reason the model reads as the call's result: public by design.
                reason=None if decision.allowed else _clip(decision.reason),
                env_kept=sorted(env.get("kept", {})) if env else None,
                env_dropped=[d["key"] for d in env.get("dropped", [])] if env else None,
            )
        return decision

    async def _run(
        self,
        request: ToolRequest,
        run: ToolRun,
        params: dict[str, Any],
        decision: ToolCallDecision,
    ) -> tuple[ToolOutput, Any]:
        try:
            value = run(params, self._context(request, params, decision))
            if asyncio.iscoroutine(value) or isinstance(value, asyncio.Future):
                value = await value
        except Exception as exc:  # a failing tool is an error result, not a crash
            log.warning("tool %s raised %s", request.tool_name, type(exc).__name__)
            failed = f"tool {request.tool_name!r} failed: {type(exc).__name__}: {exc}"
            return ToolOutput(failed, is_error=True), None
        if isinstance(value, ToolOutput):
            return value, value
        return ToolOutput(value if isinstance(value, str) else _json(value)), value

    def _shape(self, output: ToolOutput, note: str | None) -> ToolOutput:
        # What goes to the plugins, the transcript and the model: bounded, never a
        # configured secret.
        content = cut_tool_result(scrub(output.content), self.limits)
        if note is not None:
            content = f"{content}\n{note}"
        return ToolOutput(content, scrub_data(output.details), output.is_error)

    def _persist(
        self, request: ToolRequest, ctx: ToolContext, output: ToolOutput
    ) -> tuple[dict[str, Any], ToolOutput]:
        message: dict[str, Any] = {
            "role": "tool",
            "tool_call_id": request.ids.tool_call_id,
            "name": request.tool_name,
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
            tool_name=request.tool_name,
            tool_call_id=request.ids.tool_call_id,
            session_key=request.ids.session_key,
        )
        if persisted.message is None:
            # The model still needs an answer to its call id; the transcript keeps only this.
            withheld = {
                "role": "tool",
                "tool_call_id": request.ids.tool_call_id,
                "name": request.tool_name,
                "content": WITHHELD,
            }
            return withheld, ToolOutput(WITHHELD, is_error=output.is_error)
        kept = persisted.message
        content = kept.get("content", output.content)
        details = kept.get("details")
        return kept, ToolOutput(
            content if isinstance(content, str) else _json(content),
            details if isinstance(details, dict) else None,
            output.is_error,
        )


def _clip(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


def _json(value: Any) -> str:
    try:
        return json.dumps(value, default=str)
    except (TypeError, ValueError):
        return str(value)
