"""Sub-agents: another configured agent that a model calls as a tool.

Each entry of ``agent.subagents`` (or :meth:`Subagents.add`) is offered to the model as a
tool named by its id, described by its ``description``, taking one ``task`` string. A
call runs one turn of the sub-agent's own runner, built on the same gateway
(``gateway.runner_for``): its own model, system prompt, tools and sub-agents (every
``agent`` key it does not set is its parent's, except those three), its own session key
(``agent:<id>:subagent:<random>``), and its tool calls through the gateway's tool-call
gate like any other. Plugins see it as its own agent: ``ctx.agent_id`` is the sub-agent's
id, ``ctx.trigger`` is ``subagent`` and ``ctx.trace`` names the parent run and the depth.

A spawn, in order (the contexts are the requester's: its agent id, session and run):

1. the call itself passes the tool-call gate (``before_tool_call`` may block a spawn);
   past ``agent.max_subagent_depth`` it is refused before the gate;
2. ``subagent_spawning`` (deprecated compatibility claim): a plugin that handles it
   answers in the sub-agent's place (its ``reply`` is the result; nothing is spawned);
3. ``subagent_spawned`` with ``child_session_key``, ``resolved_provider`` and
   ``resolved_model``;
4. the sub-agent's turn (its own hooks, in the documented order; its reply is not
   delivered to any channel: it goes back to the parent as the tool's result);
5. ``subagent_ended`` with ``target_session_key`` (the child session key), ``outcome``
   (``ok``, ``error``, ``timeout`` or ``killed``), ``reason``, ``error``, the child's
   ``run_id`` and ``ended_at``.

Cancellation reaches children: the child's turn runs on a signal that aborts with the
parent's (its model call, its approvals and its own children stop, and the spawn ends as
``killed``); ``timeout_s`` ends it as ``timeout``. Each spawn is summarised in the
parent's :attr:`~agentplug.agent.TurnResult.subagents` (:class:`SubagentRun`: steps,
tool calls, duration, usage once turns account it) and in the parent's trace.

``background: true`` returns at once ("started"); the child runs on and its answer is
delivered when it ends: to the requester's channel when the requesting runner has one
(through the whole delivery path, ``message_sending`` and the rest), else
``subagent_delivery_target`` is asked (a plugin that handles it takes the delivery);
unclaimed, the answer stays in the child's session (``agentplug sessions show``).
Stopping the gateway (or ``runner.aclose()``) cancels background children.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from agentplug.agent.providers import ProviderRegistry, split_model
from agentplug.agent.spawn import Spawn, SubagentRun
from agentplug.agent.tools import Tool, ToolCallContext, ToolOutput, ToolRegistry
from agentplug.agent.trace import current_trace
from agentplug.agent.transcript import TranscriptStore
from agentplug.agent.turn import Turn, TurnResult, current_turn
from agentplug.agent.usage import TurnUsage
from agentplug.services.signals import AbortController, AbortSignal

if TYPE_CHECKING:
    from agentplug.agent.config import AgentConfig

__all__ = ["TASK_SCHEMA", "ParentRunner", "Subagents", "usage_of"]

log = logging.getLogger("agentplug.agent")

TASK_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "task": {
            "type": "string",
            "description": "What the sub-agent should do: the whole request, with every "
            "detail it needs (it does not see this conversation).",
        }
    },
    "required": ["task"],
}
"""The parameters of every sub-agent tool."""
_LABEL_CHARS = 80
_CLOSE_WAIT_S = 5.0  # how long closing waits for cancelled background children


def usage_of(result: Any) -> dict[str, int] | None:
    """The token usage a turn result reports, as integer totals (``None``: none).

    Seam for the usage accounting of turns (issue 27 item 3): a result that carries
    ``usage`` (a mapping, or a model with ``model_dump``) is read here, so the parent sees
    its children's usage as soon as turns account theirs.
    """
    usage = getattr(result, "usage", None)
    if usage is None:
        return None
    raw = usage.model_dump() if hasattr(usage, "model_dump") else usage
    if not isinstance(raw, Mapping):
        return None
    totals = {
        str(k): int(v) for k, v in raw.items() if isinstance(v, int) and not isinstance(v, bool)
    }
    return totals or None


class ParentRunner(Protocol):
    """What :class:`Subagents` uses of its runner (:class:`~agentplug.agent.AgentRunner`);
    a sub-agent's runner is one too."""

    host: Any
    gateway: Any
    config: AgentConfig
    agent_id: str
    tools: ToolRegistry
    transcripts: TranscriptStore
    providers: ProviderRegistry
    channel: Any
    replies: Any

    @property
    def broker(self) -> Any:
        """The approval broker of the runner's gate."""
        ...

    async def run_turn(
        self,
        prompt_text: str,
        *,
        session_key: str,
        signal: AbortSignal | None = None,
        spawn: Spawn | None = None,
    ) -> TurnResult:
        """Run one turn."""
        ...


@dataclass
class _Entry:
    name: str
    description: str
    background: bool = False
    timeout_s: float | None = None
    config: AgentConfig | None = None
    runner: ParentRunner | None = None
    own_providers: bool = False


@dataclass
class _Binding:
    """Where a background child's answer goes: the requester's route, when it has one."""

    session_key: str | None
    agent_id: str
    run_id: str | None
    msg_ctx: Any = None
    channel: Any = None
    channel_name: str | None = None
    to: str | None = None


@dataclass
class _Background:
    controller: AbortController
    task: asyncio.Task[None] | None = None


class Subagents:
    """The sub-agents of one runner: their tools, their runners, background children."""

    def __init__(self, runner: ParentRunner) -> None:
        self.runner = runner
        self._entries: dict[str, _Entry] = {}
        self._background: dict[str, _Background] = {}
        self.finished: list[SubagentRun] = []
        """The background spawns that ended, oldest first (the last 100)."""
        config = runner.config
        if config.max_subagent_depth <= 0:
            return
        for name, entry in config.subagents.items():
            self._register(
                _Entry(
                    name,
                    entry.description,
                    entry.background,
                    entry.timeout_s,
                    config=config.subagent(name),
                    own_providers="providers" in entry.model_fields_set,
                )
            )

    def add(
        self,
        name: str,
        description: str,
        runner: ParentRunner,
        *,
        background: bool = False,
        timeout_s: float | None = None,
    ) -> Tool:
        """Offer ``runner`` (built with ``gateway.runner_for(..., agent_id=name)``) to this
        runner's model as the sub-agent ``name``; return its tool."""
        return self._register(_Entry(name, description, background, timeout_s, runner=runner))

    @property
    def names(self) -> list[str]:
        """The sub-agents' ids."""
        return list(self._entries)

    def _register(self, entry: _Entry) -> Tool:
        self._entries[entry.name] = entry

        async def run(params: dict[str, Any], call: ToolCallContext) -> ToolOutput:
            return await self._spawn(entry, params, call)

        async def validate(call: ToolCallContext) -> str | None:
            return self._depth_refusal(entry.name)

        return self.runner.tools.add(
            Tool(
                name=entry.name,
                description=entry.description,
                parameters=TASK_SCHEMA,
                run=run,
                source="subagent",
                kind="subagent",
                validate=validate,
            )
        )

    def _depth(self) -> int:
        turn = current_turn()
        return turn.spawn.depth if turn is not None and turn.spawn is not None else 0

    def _depth_refusal(self, name: str) -> str | None:
        limit = self.runner.config.max_subagent_depth
        if self._depth() + 1 > limit:
            return (
                f"sub-agent {name!r} not started: sub-agents nest at most {limit} deep "
                "(agent.max_subagent_depth); do the task yourself"
            )
        return None

    def runner_for(self, name: str) -> ParentRunner:
        """The runner of sub-agent ``name`` (built on first use, then reused)."""
        entry = self._entries[name]
        if entry.runner is None:
            parent = self.runner
            assert entry.config is not None
            gateway = parent.gateway
            options: dict[str, Any] = {
                "config": entry.config,
                "agent_id": name,
                "transcripts": parent.transcripts,
            }
            if not entry.own_providers:
                options["providers"] = parent.providers  # the host's providers too
            if parent.broker is not gateway.approvals:
                options["broker"] = parent.broker
            entry.runner = gateway.runner_for(None, **options)
        return entry.runner

    # -- one spawn -----------------------------------------------------------------------

    async def _spawn(
        self, entry: _Entry, params: dict[str, Any], call: ToolCallContext
    ) -> ToolOutput:
        task = params.get("task")
        if not isinstance(task, str) or not task.strip():
            return ToolOutput('give the sub-agent a task: {"task": "..."}', is_error=True)
        unknown = sorted(set(params) - {"task"})
        if unknown:
            return ToolOutput(f"unknown parameter(s): {', '.join(unknown)}", is_error=True)
        parent = self.runner
        turn = current_turn()
        if turn is not None:  # counted before any await: parallel calls cannot overshoot
            limit = parent.config.max_subagents_per_turn
            if turn.subagents_started >= limit:
                return ToolOutput(
                    f"sub-agent {entry.name!r} not started: this turn already started "
                    f"{limit} sub-agents (agent.max_subagents_per_turn)",
                    is_error=True,
                )
            turn.subagents_started += 1
        child = self.runner_for(entry.name)
        child_key = f"agent:{entry.name}:subagent:{uuid.uuid4().hex[:12]}"
        spawn = Spawn(
            agent_id=entry.name,
            depth=self._depth() + 1,
            parent_agent_id=parent.agent_id,
            parent_run_id=call.run_id,
            parent_session_key=call.session_key,
        )
        ctx = {"agent_id": parent.agent_id, "session_key": call.session_key, "run_id": call.run_id}
        label = " ".join(task.split())[:_LABEL_CHARS]
        hooks = parent.host.hooks
        claimed = (
            await hooks.subagent_spawning(
                {
                    "child_session_key": child_key,
                    "agent_id": entry.name,
                    "thread": False,
                    "metadata": {"label": label, "background": entry.background},
                },
                ctx,
            )
        ).outcome
        if claimed.handled:
            run = SubagentRun(agent_id=entry.name, session_key=child_key, status="claimed")
            self._record(turn, run)
            reply = claimed.reply if claimed.reply is not None else "(handled by a plugin)"
            return ToolOutput(
                str(reply), {"subagent": run.model_dump(), "claimed_by": claimed.plugin_id}
            )
        provider, model = split_model(child.config.model)
        await hooks.subagent_spawned(
            {
                "child_session_key": child_key,
                "agent_id": entry.name,
                "label": label,
                "resolved_provider": provider,
                "resolved_model": model,
                "run_id": call.run_id,
            },
            ctx,
        )
        if entry.background:
            return self._start_background(entry, child, spawn, task, child_key, ctx, turn)
        result, outcome = await self._run_child(
            entry, child, spawn, task, child_key, ctx, call.signal
        )
        run = _summary(entry.name, child_key, result, outcome, background=False)
        self._record(turn, run, result.usage)
        details = {"subagent": run.model_dump(exclude={"subagents"})}
        if result.status in ("replied", "silent", "suppressed"):
            return ToolOutput(result.reply or "(the sub-agent gave no answer)", details)
        return ToolOutput(
            f"sub-agent {entry.name!r} {_ended(result.status, outcome)}"
            + (f": {result.error}" if result.error else ""),
            details,
            is_error=True,
        )

    async def _run_child(
        self,
        entry: _Entry,
        child: ParentRunner,
        spawn: Spawn,
        task: str,
        child_key: str,
        ctx: dict[str, Any],
        parent_signal: AbortSignal | None,
    ) -> tuple[TurnResult, str]:
        own = AbortController()
        sources = [own.signal] + ([parent_signal] if parent_signal is not None else [])
        timer = None
        if entry.timeout_s is not None:
            timer = asyncio.get_running_loop().call_later(
                entry.timeout_s, own.abort, f"sub-agent {entry.name!r} timed out"
            )
        try:
            result = await child.run_turn(
                task, session_key=child_key, signal=AbortSignal.any(sources), spawn=spawn
            )
        finally:
            if timer is not None:
                timer.cancel()
        if result.status == "cancelled":
            outcome = "timeout" if own.signal.aborted else "killed"  # only the timer aborts it
        elif result.success:
            outcome = "ok"
        else:
            outcome = "error"
        await self.runner.host.hooks.subagent_ended(
            {
                "target_session_key": child_key,
                "target_kind": "subagent",
                "reason": _ended(result.status, outcome),
                "outcome": outcome,
                "error": result.error,
                "run_id": result.run_id,
                "ended_at": time.time(),
                "send_farewell": False,
            },
            ctx,
        )
        return result, outcome

    def _record(self, turn: Turn | None, run: SubagentRun, usage: TurnUsage | None = None) -> None:
        """Roll ``run`` up into the parent's turn (its result and its trace)."""
        if turn is not None:
            turn.subagent_runs.append(run)
            if usage is not None:
                turn.ledger.add_subagent(run.agent_id, usage)
        trace = current_trace()
        if trace is not None:
            trace.add(
                "subagent",
                run.agent_id,
                run.duration_ms,
                status=run.status,
                outcome=run.outcome,
                steps=run.steps,
                session_key=run.session_key,
            )

    # -- background ----------------------------------------------------------------------

    def _start_background(
        self,
        entry: _Entry,
        child: ParentRunner,
        spawn: Spawn,
        task: str,
        child_key: str,
        ctx: dict[str, Any],
        turn: Turn | None,
    ) -> ToolOutput:
        parent = self.runner
        inbound = turn.inbound if turn is not None else None
        binding = _Binding(
            session_key=ctx["session_key"],
            agent_id=parent.agent_id,
            run_id=ctx["run_id"],
            msg_ctx=turn.msg_ctx if turn is not None else None,
            channel=parent.channel,
            channel_name=inbound.channel if inbound is not None else None,
            to=inbound.sender_id if inbound is not None else None,
        )
        job = _Background(AbortController())
        self._background[child_key] = job

        async def background() -> None:
            try:
                result, outcome = await self._run_child(
                    entry, child, spawn, task, child_key, ctx, job.controller.signal
                )
                self.finished.append(_summary(entry.name, child_key, result, outcome, True))
                del self.finished[:-100]
                await self._deliver(entry.name, child_key, result, binding, ctx)
            finally:
                self._background.pop(child_key, None)

        # A fresh context: the child must not see the parent's turn as its current one.
        job.task = asyncio.get_running_loop().create_task(
            background(), context=contextvars.Context()
        )
        run = SubagentRun(
            agent_id=entry.name, session_key=child_key, status="started", background=True
        )
        self._record(turn, run)
        return ToolOutput(
            f"sub-agent {entry.name!r} started in the background (session {child_key}); "
            "its answer will come as a separate message",
            {"subagent": run.model_dump()},
        )

    async def _deliver(
        self,
        name: str,
        child_key: str,
        result: TurnResult,
        binding: _Binding,
        ctx: dict[str, Any],
    ) -> None:
        """Deliver a background child's answer to its requester (see the module doc)."""
        text = result.reply or f"(sub-agent {name} {_ended(result.status, None)})"
        parent = self.runner
        if binding.channel is not None:
            await parent.replies.deliver(
                f"[{name}] {text}",
                binding.msg_ctx,
                channel=binding.channel,
                channel_name=binding.channel_name,
                to=binding.to,
            )
            return
        requester = {
            "session_key": binding.session_key,
            "agent_id": binding.agent_id,
            "channel": binding.channel_name,
            "to": binding.to,
        }
        claimed = (
            await parent.host.hooks.subagent_delivery_target(
                {"target_session_key": child_key, "content": text, "requester": requester},
                ctx,
            )
        ).outcome
        if not claimed.handled:
            log.warning(
                "sub-agent %s finished, but nothing routes its answer to %s (no channel, no "
                "subagent_delivery_target handler); it stays in session %s",
                name,
                binding.session_key,
                child_key,
            )

    @property
    def running(self) -> list[str]:
        """The session keys of the background children still running."""
        return list(self._background)

    async def wait(self) -> None:
        """Wait for the background children running now to end (tests, clean shutdown)."""
        tasks = [job.task for job in self._background.values() if job.task is not None]
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)

    async def aclose(self) -> None:
        """Cancel the background children (they end as ``killed``) and wait for them,
        bounded."""
        jobs = list(self._background.values())
        for job in jobs:
            job.controller.abort("the parent runner is closing")
        tasks = [job.task for job in jobs if job.task is not None]
        if tasks:
            await asyncio.wait(tasks, timeout=_CLOSE_WAIT_S)


def _summary(
    name: str, child_key: str, result: TurnResult, outcome: str, background: bool
) -> SubagentRun:
    return SubagentRun(
        agent_id=name,
        session_key=child_key,
        run_id=result.run_id,
        status=result.status,
        outcome=outcome,
        background=background,
        steps=result.steps,
        tool_calls=result.usage.tool_calls,
        duration_ms=result.duration_ms,
        usage=usage_of(result),
        subagents=list(result.subagents),
    )


def _ended(status: str, outcome: str | None) -> str:
    if outcome == "timeout":
        return "timed out"
    if outcome == "killed" or status == "cancelled":
        return "was cancelled"
    if status in ("replied", "silent", "suppressed"):
        return "completed"
    return {"blocked": "was blocked", "step_limit": "hit its step limit"}.get(status, "failed")
