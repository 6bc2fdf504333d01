"""``AgentRunner``: one call runs a whole agent turn through every hook, in order.

```python
runner = AgentRunner(host, provider=ScriptedProvider(["Hello!"]))
result = await runner.handle_inbound(InboundMessage(content="hi", sender_id="u1"))
result = runner.sync.handle_inbound({"content": "hi"})      # hosts without a loop
```

The order (docs/agent-runtime.md has the diagram): ``inbound_claim``,
``message_received`` (with ``body_for_agent``), ``before_model_resolve`` (before the
session is loaded), ``session_start`` for a new session, the next-turn injections
drained, ``agent_turn_prepare``, ``before_prompt_build`` (and the deprecated
``before_agent_start``), ``heartbeat_prompt_contribution`` (heartbeat turns only),
``before_agent_run``, ``before_agent_reply``, the model loop
(:mod:`~agentplug.agent.model_loop`: ``llm_input``, ``model_call_started``, the provider,
``model_call_ended``, ``llm_output``; tool calls through the gate, ``after_tool_call``,
``tool_result_persist``, ``before_message_write``), compaction when the transcript
passes the budget, ``before_agent_finalize``, delivery (``message_sending``,
``reply_payload_sending`` with the tools' attachments as ``media``, before-deliver
stages, ``before_dispatch``, ``reply_dispatch``, the channel, ``message_sent``), and
last ``agent_end`` with success, duration and run id, whatever happened. Hook failures
follow each hook's failure policy (the dispatcher applies it); a provider or tool failure
ends the turn with ``agent_end(success=False)``; an aborted signal cancels the run's
pending approvals and ends it the same way.
"""

from __future__ import annotations

import asyncio
import logging
import time
import warnings
import weakref
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

from agentplug_hookspecs.common import MessageContext

from agentplug.agent import compaction, prompt, sessions, spans
from agentplug.agent.config import AgentConfig, agent_config
from agentplug.agent.mcp import McpToolSource, connect_servers, refuse_action_clashes
from agentplug.agent.model_loop import model_loop
from agentplug.agent.opening import load_session, new_turn
from agentplug.agent.pipeline import ToolCallPipeline
from agentplug.agent.providers import ProviderRegistry
from agentplug.agent.providers.base import ModelProvider
from agentplug.agent.spawn import Spawn
from agentplug.agent.streaming import StreamEvent, stream_of
from agentplug.agent.subagents import Subagents
from agentplug.agent.sync_runner import SyncAgentRunner
from agentplug.agent.toolrun import reply_media
from agentplug.agent.tools import Tool, ToolRegistry
from agentplug.agent.trace import TurnTrace, bind_trace, install_tap, unbind_trace
from agentplug.agent.transcript import (
    SessionRecord,
    StateStoreTranscripts,
    TranscriptStore,
    answer_open_calls,
    write_message,
)
from agentplug.agent.turn import (
    InboundMessage,
    RunnerParts,
    Turn,
    TurnCancelled,
    TurnFailed,
    TurnOptions,
    TurnResult,
    bind_turn,
    unbind_turn,
)
from agentplug.agent.turnlog import TurnLog
from agentplug.agent.usage import UsageLimitReached
from agentplug.core.redaction import scrub, scrub_data
from agentplug.services.approvals import ApprovalBroker
from agentplug.services.replies import Channel, ReplyDispatcher
from agentplug.services.signals import AbortSignal
from agentplug.services.toolcalls import ToolCallGate
from agentplug.services.turns import DeliveryResult

__all__ = ["AgentRunner", "SyncAgentRunner"]

log = logging.getLogger("agentplug.agent")


def _session_key(agent_id: str, message: InboundMessage) -> str:
    if message.session_key:
        return message.session_key
    peer = message.chat_id or message.sender_id or "main"
    return f"agent:{agent_id}:{message.channel or 'direct'}:{peer}"


def _parts(gateway: Any) -> RunnerParts:
    """``gateway``, or the gateway of a host (the pre-gateway signature, deprecated)."""
    if hasattr(gateway, "tool_calls"):
        parts: RunnerParts = gateway
        return parts
    owner = getattr(gateway, "gateway", None)
    if owner is None:
        raise TypeError(
            "AgentRunner needs a gateway (agentplug.Gateway.from_config(...)); a bare hook "
            "host has no store, sessions, actions or tool-call pipeline"
        )
    warnings.warn(
        "AgentRunner(host, ...) is deprecated; build the gateway once and use "
        "gateway.runner, or AgentRunner(gateway, ...)",
        DeprecationWarning,
        stacklevel=3,
    )
    found: RunnerParts = owner
    return found


class AgentRunner:
    """Runs agent turns on a gateway (see the module docstring).

    ``gateway`` provides the host, the store, the session services, the actions and the
    tool-call gate (``gateway.runner`` is the one a gateway builds from ``agent``).
    ``provider``: the model provider of the configured provider name (``agent.model``);
    other names resolve through ``providers`` (a :class:`ProviderRegistry` built from
    ``agent.providers`` when not given). ``tools`` defaults to a registry offering the
    gateway's actions that ``agent.tools`` allows (by default those without side effects;
    allowed side-effecting ones are approved at each call unless
    ``agent.tools.without_approval`` names them). ``transcripts`` defaults to the
    gateway's store. ``broker`` replaces the gateway's approval broker for this runner.
    ``channel(payload)`` sends replies; without one, replies are returned
    (``TurnResult.reply``) and ``message_sent`` does not fire. ``on_delta(text)``
    receives the streamed reply text of providers that implement ``stream``. Turns are
    recorded in ``gateway.turns`` (a :class:`~agentplug.agent.turnlog.TurnLog`).
    """

    def __init__(
        self,
        gateway: RunnerParts | Any,
        provider: ModelProvider | None = None,
        tools: ToolRegistry | None = None,
        transcripts: TranscriptStore | None = None,
        *,
        config: AgentConfig | Mapping[str, Any] | None = None,
        providers: ProviderRegistry | None = None,
        broker: ApprovalBroker | None = None,
        channel: Channel | None = None,
        agent_id: str = "main",
        render_injections: bool = False,
        on_delta: Callable[[str], Any] | None = None,
    ) -> None:
        parts = _parts(gateway)
        host = parts.host
        self.gateway = parts
        """The gateway this runner works on (its sub-agents' runners come from it)."""
        self.host = host
        self.actions = parts.actions
        """The gateway's actions (offered as tools as ``agent.tools`` allows)."""
        self.sessions = parts.sessions
        """The gateway's session services (next-turn injections)."""
        self.config = agent_config(config if config is not None else host.config.agent)
        self.tool_policy = self.config.tools.policy()
        """What ``agent.tools`` allows, asks approval for and excludes."""
        self.providers = providers or ProviderRegistry(self.config.providers)
        if provider is not None:
            self.providers.register(getattr(provider, "name", "scripted"), provider)
        self._default_provider = provider
        self._own_tools = tools is None
        self.tools = tools if tools is not None else ToolRegistry()
        self._actions_loaded = not (self._own_tools and self.config.tools.actions)
        self.transcripts = transcripts or StateStoreTranscripts(parts.store)
        gate = parts.tool_calls.gate
        if broker is not None:
            gate = ToolCallGate(host, parts.policies, broker)
        self.pipeline = ToolCallPipeline(host, gate, limits=self.config.limits, agent_id=agent_id)
        """This runner's tool-call path (the gateway's gate, this agent's limits)."""
        self.replies = ReplyDispatcher(host, default_timeout_ms=self.config.deliver_timeout_ms)
        self.channel = channel
        self.agent_id = agent_id
        self.render_injections = render_injections
        """Put drained injections' text into the prompt (when no plugin renders them)."""
        self.on_delta = on_delta
        """Receives streamed reply text (sync or async) from providers that stream."""
        self._session_locks: weakref.WeakValueDictionary[str, asyncio.Lock] = (
            weakref.WeakValueDictionary()
        )
        self.sessions_seen: dict[str, None] = {}
        """Session keys this runner ran turns for, in first-seen order (a gateway's stop
        ends them with ``session_end``)."""
        self.turn_log: TurnLog = getattr(parts, "turns", None) or TurnLog()
        """Where this runner records each turn's start, end and trace (the gateway's)."""
        self._sync: SyncAgentRunner | None = None
        self._mcp: list[McpToolSource] | None = None if self.config.tools.mcp_servers else []
        install_tap(host)
        self.subagents = Subagents(self)
        """The sub-agents this runner's model may call (``agent.subagents``, and
        :meth:`add_subagent`)."""

    # -- wiring -------------------------------------------------------------------------

    @property
    def gate(self) -> ToolCallGate:
        """The tool-call gate (policies, ``before_tool_call``, exec env, approvals)."""
        return self.pipeline.gate

    @property
    def broker(self) -> ApprovalBroker:
        """The approval broker of the tool-call gate."""
        return self.pipeline.broker

    def append_before_deliver(self, handler: Any, *, timeout_ms: int | None = None) -> None:
        """Add a before-deliver stage to the reply dispatcher (15 s budget by default)."""
        self.replies.append_before_deliver(handler, timeout_ms=timeout_ms)

    def provider_for(self, name: str) -> ModelProvider:
        """The provider called ``name`` (``ProviderError`` when unknown)."""
        return self.providers.get(name)

    async def _ensure_tools(self) -> None:
        if self._mcp is None:
            await self.connect_mcp()
        if self._actions_loaded:
            return
        if not self.actions.loaded:  # a started gateway loaded them already
            for problem in await self.actions.load():
                log.warning("actions: %s", problem)
        policy = self.tool_policy
        for name in policy.unmatched(self.actions.registry.names()):
            log.warning(
                "agent.tools names %r, but no registered action is called that; check the "
                "spelling (`agentplug actions list` lists every action)",
                name,
            )
        refuse_action_clashes(self._mcp or [], self.actions.registry.names())  # or every turn fails
        self.tools.add_actions(self.actions, policy)
        self._actions_loaded = True
        names = [*self.actions.registry.names(), *(t.name for t in self.tools.all())]
        for name in policy.unmatched_excludes(names):
            log.warning(
                "agent.tools.exclude names %r, but no tool is called that; check the spelling",
                name,
            )

    async def connect_mcp(self) -> list[McpToolSource]:
        """Connect the ``agent.tools.mcp_servers`` (once) and add their tools; the first
        turn does it when the host did not. Raises :class:`~agentplug.agent.mcp.McpError`
        naming the server that failed."""
        if self._mcp is None:
            taken = {t.name: f"the {t.source} tool {t.name!r}" for t in self.tools.all()}
            sources = await connect_servers(self.config.tools.mcp_servers, taken)
            for source in sources:
                self.tools.add_source(source)  # its tools carry their <server>__ prefix
            self._mcp = sources
        return self._mcp

    def add_subagent(
        self,
        name: str,
        description: str,
        runner: AgentRunner,
        *,
        background: bool = False,
        timeout_s: float | None = None,
    ) -> Tool:
        """Offer ``runner`` (``gateway.runner_for(..., agent_id=name)``) to this runner's
        model as the sub-agent tool ``name`` (see :mod:`agentplug.agent.subagents`)."""
        return self.subagents.add(
            name, description, runner, background=background, timeout_s=timeout_s
        )

    async def aclose(self) -> None:
        """Cancel background sub-agents; disconnect the MCP servers (stops stdio
        subprocesses)."""
        await self.subagents.aclose()
        sources, self._mcp = self._mcp or [], None if self.config.tools.mcp_servers else []
        for source in sources:
            await source.aclose()

    async def maybe_compact(self, turn: Turn) -> bool:
        """Compact ``turn``'s transcript when it passes the budget (model loop hook)."""
        return await compaction.compact(turn)

    @property
    def sync(self) -> SyncAgentRunner:
        """The blocking facade (runs on the host's private loop, like ``host.sync``)."""
        if self._sync is None:
            self._sync = SyncAgentRunner(self)
        return self._sync

    # -- entry points ---------------------------------------------------------------------

    async def handle_inbound(
        self,
        message: InboundMessage | Mapping[str, Any],
        *,
        signal: AbortSignal | None = None,
        run_id: str | None = None,
        on_event: Callable[[StreamEvent], Any] | None = None,
        output_type: Any = None,
        output_retries: int = 2,
    ) -> TurnResult:
        """Route one inbound message: ``inbound_claim``, ``message_received``, the turn
        (``run_id``: its id). ``on_event``, ``output_type``, ``output_retries``: as for
        :meth:`run_turn`."""
        msg = (
            message
            if isinstance(message, InboundMessage)
            else InboundMessage.model_validate(message)
        )
        trace = TurnTrace()
        token = bind_trace(trace)
        try:
            session_key = _session_key(self.agent_id, msg)
            msg_ctx = self._message_ctx(msg, session_key, None)
            event = {
                "content": msg.content,
                "body_for_agent": msg.text,
                "channel": msg.channel,
                "sender": msg.sender,
                "sender_id": msg.sender_id,
                "thread_id": msg.thread_id,
                "message_id": msg.message_id,
                "metadata": msg.metadata,
            }
            claim = await self.host.hooks.inbound_claim(event, msg_ctx)
            if claim.outcome.handled:
                return await self._claimed(msg, session_key, claim.outcome, trace)
            await self.host.hooks.message_received({**event, "session_key": session_key}, msg_ctx)
        finally:
            unbind_trace(token)
        return await self.run_turn(
            msg.text,
            session_key=session_key,
            inbound=msg,
            signal=signal,
            run_id=run_id,
            trace=trace,
            on_event=on_event,
            output_type=output_type,
            output_retries=output_retries,
        )

    def stream(
        self,
        message: str | InboundMessage | Mapping[str, Any],
        *,
        session_key: str | None = None,
        signal: AbortSignal | None = None,
        run_id: str | None = None,
        output_type: Any = None,
        output_retries: int = 2,
    ) -> AsyncIterator[StreamEvent]:
        """The turn as events (:mod:`~agentplug.agent.streaming`), ``FinalReply`` last:
        of an inbound message (``handle_inbound``), or of a routed text with
        ``session_key`` (``run_turn``); ``run_id`` names the turn. Closing the iterator
        early cancels the turn."""
        return stream_of(
            self,
            message,
            session_key=session_key,
            signal=signal,
            run_id=run_id,
            output_type=output_type,
            output_retries=output_retries,
        )

    async def _claimed(
        self, msg: InboundMessage, session_key: str, outcome: Any, trace: TurnTrace
    ) -> TurnResult:
        reply = outcome.reply if isinstance(outcome.reply, str) else None
        delivery = None
        if reply:
            delivery = await self.replies.deliver(
                reply,
                self._message_ctx(msg, session_key, None),
                channel=self.channel,
                channel_name=msg.channel,
                to=msg.sender_id,
            )
        result = TurnResult(
            run_id="",
            session_key=session_key,
            status="claimed",
            success=True,
            reply=delivery.content if delivery is not None else reply,
            delivery=_scrubbed(delivery),
            trace=trace,
        )
        self.turn_log.ended(result, agent_id=self.agent_id, trace=trace)
        return result

    def _message_ctx(
        self, msg: InboundMessage | None, session_key: str, run_id: str | None
    ) -> MessageContext:
        return MessageContext(
            session_key=session_key,
            run_id=run_id,
            message_id=msg.message_id if msg else None,
            sender_id=msg.sender_id if msg else None,
            channel=msg.channel if msg else None,
            thread_id=msg.thread_id if msg else None,
        )

    async def run_turn(
        self,
        prompt_text: str,
        *,
        session_key: str,
        inbound: InboundMessage | None = None,
        heartbeat: bool = False,
        signal: AbortSignal | None = None,
        run_id: str | None = None,
        trace: TurnTrace | None = None,
        spawn: Spawn | None = None,
        on_event: Callable[[StreamEvent], Any] | None = None,
        output_type: Any = None,
        output_retries: int = 2,
    ) -> TurnResult:
        """Run one turn for a message the host already routed (see the module docstring).

        Turns of one session run one after another (each reads the transcript the one
        before it wrote); turns of different sessions run side by side. ``spawn`` marks
        a sub-agent's turn (its reply goes back to the parent, not through delivery).
        ``on_event`` receives the stream events (:mod:`~agentplug.agent.streaming`); ``output_type``
        (a pydantic model or a JSON schema) makes the final answer a validated
        ``TurnResult.output``, the model asked again at most ``output_retries`` times.
        """
        options = TurnOptions.of(on_event, output_type, output_retries)
        trace = trace if trace is not None else TurnTrace()
        token = bind_trace(trace)
        try:
            async with self.session_lock(session_key):
                turn = new_turn(
                    self,
                    prompt_text,
                    session_key,
                    inbound=inbound,
                    heartbeat=heartbeat,
                    signal=signal,
                    run_id=run_id,
                    trace=trace,
                    spawn=spawn,
                )
                options.apply(turn)
                return await self._run(turn)
        finally:
            unbind_trace(token)

    async def reset_session(self, session_key: str, *, source: str = "api") -> SessionRecord:
        """Start a session over: ``before_reset``, ``session_end`` (``reset``), the plugins'
        cleanup, a fresh transcript, ``session_start`` (``reset``); see
        :mod:`agentplug.agent.sessions`. :class:`~agentplug.agent.sessions.UnknownSession`
        when there is no such session."""
        return await sessions.reset_session(self, session_key, source=source)

    def list_sessions(self) -> list[sessions.SessionSummary]:
        """The sessions of this runner's transcripts, the most recently saved first."""
        return sessions.list_sessions(self)

    def session_lock(self, session_key: str) -> asyncio.Lock:
        """The lock turns of ``session_key`` hold (one turn of a session at a time)."""
        lock = self._session_locks.get(session_key)
        if lock is None:
            lock = self._session_locks[session_key] = asyncio.Lock()
        return lock

    async def _run(self, turn: Turn) -> TurnResult:
        session_key, inbound = turn.session.session_key, turn.inbound
        span, span_token = spans.start_agent_span(
            spans.tracer_of(self.host), self.agent_id, turn.session.session_id
        )
        self.sessions_seen[session_key] = None
        self.turn_log.started(turn.run_id, session_key, agent_id=self.agent_id)
        started = time.perf_counter()
        cancel_approvals = turn.signal.add_callback(lambda _s: self.broker.cancel_run(turn.run_id))
        delivery = None
        current = bind_turn(turn)  # the tools it calls (sub-agents) see their turn
        try:
            await self._ensure_tools()
            await prompt.resolve_model(turn)  # before the session is loaded (HOOKS.md)
            load_session(turn, self.transcripts)
            await self._phases(turn)
            if turn.reply and turn.status == "replied" and turn.spawn is None:
                turn.check_aborted()
                delivery = await self.replies.deliver(
                    turn.reply,
                    turn.msg_ctx,
                    channel=self.channel,
                    channel_name=inbound.channel if inbound else None,
                    to=inbound.sender_id if inbound else None,
                    payload=reply_media(turn.media),
                )
                if delivery.suppressed:
                    turn.status = "suppressed"
                elif delivery.status == "failed":
                    turn.status, turn.error = "failed", f"delivery failed: {delivery.error}"
        except TurnCancelled as exc:
            turn.status, turn.error = "cancelled", f"cancelled: {exc}"
            self.broker.cancel_run(turn.run_id)
        except UsageLimitReached as exc:
            turn.status, turn.error = "usage_limit", str(exc)
        except TurnFailed as exc:
            turn.status, turn.error = "failed", str(exc)
        except Exception as exc:  # the runner itself must never take the host down
            log.exception("agent turn %s failed", turn.run_id)
            turn.status, turn.error = "failed", f"{type(exc).__name__}: {exc}"
        finally:
            unbind_turn(current)
            cancel_approvals()
            self.broker.end_run(turn.run_id)
            answer_open_calls(turn.session.messages, _unfinished(turn))
            turn.session.usage_tokens += turn.ledger.total.total_tokens
            try:
                if turn.loaded:  # a turn stopped before loading never saves over it
                    self.transcripts.save(turn.session)
            except Exception as exc:  # a broken store must not swallow agent_end
                log.warning(
                    "agent turn %s: saving the transcript of %s failed (%s)",
                    turn.run_id,
                    session_key,
                    type(exc).__name__,
                )
                if turn.status not in ("failed", "cancelled", "blocked"):
                    turn.status, turn.error = "failed", "the transcript could not be saved"
        success = turn.status in ("replied", "silent", "suppressed")
        duration_ms = (time.perf_counter() - started) * 1000
        if turn.error is not None:  # a server or tool may have echoed a configured secret
            turn.error = scrub(turn.error)
        await self.host.hooks.agent_end(
            {
                "messages": turn.history(),
                "success": success,
                "error": turn.error,
                "duration_ms": duration_ms,
                "run_id": turn.run_id,
            },
            turn.ctx,
        )
        reply = turn.reply
        if delivery is not None:
            reply = None if delivery.suppressed else delivery.content
        if reply is not None:
            reply = scrub(reply)
        usage = turn.ledger.summary()
        spans.set_usage(span, turn.ledger.total)
        spans.end_span(span, None if success else turn.status, span_token)
        result = TurnResult(
            run_id=turn.run_id,
            session_key=session_key,
            status=turn.status,
            success=success,
            reply=reply if turn.status not in ("blocked", "failed", "cancelled") else None,
            error=turn.error,
            blocked_by=turn.blocked_by,
            delivery=_scrubbed(delivery),
            steps=turn.steps,
            duration_ms=duration_ms,
            provider=turn.provider_name,
            model=turn.model,
            transcript=scrub_data(list(turn.session.messages)),
            trace=turn.trace,
            subagents=turn.subagent_runs,
            usage=usage,
            output=turn.output_value if success else None,
        )
        self.turn_log.ended(result, agent_id=self.agent_id, trace=turn.trace)
        return result

    async def _phases(self, turn: Turn) -> None:
        def write(role: str, content: str) -> Any:
            message = {"role": role, "content": content}
            return write_message(self.host, turn.session, message, turn.tool_ctx)

        await prompt.start_session(turn)
        await prompt.build_prompt(turn)
        await prompt.heartbeat(turn)  # before the guard: a run guard sees heartbeat context
        turn.check_aborted()
        if not await prompt.guard(turn):
            return
        if await prompt.claim_reply(turn):
            write("user", turn.user_prompt)
            if turn.reply:
                write("assistant", turn.reply)
            return
        if write("user", turn.user_prompt) is not None:
            turn.user_index = len(turn.session.messages) - 1
        await model_loop(turn)


def _unfinished(turn: Turn) -> str:
    """The result of a tool call the turn stopped before (what the model reads next)."""
    if turn.status == "cancelled":
        return "tool call cancelled: the turn was cancelled before this call completed"
    return "tool call not completed: the turn ended before this call completed"


def _scrubbed(delivery: DeliveryResult | None) -> DeliveryResult | None:
    if delivery is None or delivery.error is None:
        return delivery
    return delivery.model_copy(update={"error": scrub(delivery.error)})
