"""What goes into a turn and what comes out: :class:`InboundMessage`, :class:`TurnResult`.

:class:`Turn` is the runner's working state for one turn, shared by the phase modules
(:mod:`~agentplug.agent.prompt`, :mod:`~agentplug.agent.model_loop`,
:mod:`~agentplug.agent.toolrun`, :mod:`~agentplug.agent.compaction`).
"""

from __future__ import annotations

import contextvars
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any, Literal, Protocol, Self

from agentplug_hookspecs import FrozenList
from agentplug_hookspecs.common import AgentContext, MessageContext, ThreadId
from agentplug_hookspecs.tools import ToolContext
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ModelWrapValidatorHandler,
    PrivateAttr,
    computed_field,
    model_validator,
)

from agentplug.agent.action_tools import ToolPolicy
from agentplug.agent.config import AgentConfig
from agentplug.agent.pipeline import ToolCallPipeline
from agentplug.agent.providers.base import ModelProvider
from agentplug.agent.spawn import Spawn, SubagentRun
from agentplug.agent.structured import OutputSpec, output_spec
from agentplug.agent.tools import ToolRegistry
from agentplug.agent.trace import TurnTrace
from agentplug.agent.transcript import SessionRecord
from agentplug.agent.usage import TurnUsage, UsageLedger
from agentplug.core.redaction import scrub_data
from agentplug.services.signals import AbortSignal
from agentplug.services.toolresults import HistoryView
from agentplug.services.turns import DeliveryResult, FinalizeRetryTracker

if TYPE_CHECKING:
    from agentplug.actions.runtime import AgentRuntime
    from agentplug.core.host import HookHost
    from agentplug.services.approvals import ApprovalBroker
    from agentplug.services.policies import TrustedToolPolicies
    from agentplug.services.sessions import SessionServices
    from agentplug.store import StateStore

__all__ = [
    "InboundMessage",
    "RunnerParts",
    "Turn",
    "TurnCancelled",
    "TurnFailed",
    "TurnOptions",
    "TurnResult",
    "TurnRunner",
    "TurnStatus",
    "bind_turn",
    "current_turn",
    "unbind_turn",
]

TurnStatus = Literal[
    "replied",
    "silent",
    "claimed",
    "blocked",
    "suppressed",
    "failed",
    "cancelled",
    "step_limit",
    "usage_limit",
]


class InboundMessage(BaseModel):
    """A message from a channel, before routing (what ``handle_inbound`` takes)."""

    model_config = ConfigDict(extra="forbid")

    content: str
    body_for_agent: str | None = None
    """The text for the agent without the channel envelope (defaults to ``content``)."""
    channel: str | None = None
    sender_id: str | None = None
    sender: str | None = None
    chat_id: str | None = None
    session_key: str | None = None
    """Defaults to ``agent:<agent_id>:<channel>:<chat_id or sender_id>``."""
    message_id: str | None = None
    thread_id: ThreadId | None = None
    channel_context: dict[str, Any] | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    attachments: list[dict[str, Any]] = Field(default_factory=list)

    @property
    def text(self) -> str:
        """What the agent reads: ``body_for_agent``, else ``content``."""
        return self.body_for_agent if self.body_for_agent is not None else self.content


class TurnResult(BaseModel):
    """What one turn did. Safe to log: no confidential block reason anywhere."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    run_id: str
    session_key: str
    status: TurnStatus
    success: bool
    reply: str | None = None
    """The reply as delivered (after rewrites); ``None`` when nothing was sent."""
    error: str | None = None
    blocked_by: str | None = None
    delivery: DeliveryResult | None = None
    steps: int = 0
    """Model calls made."""
    duration_ms: float = 0.0
    provider: str | None = None
    model: str | None = None
    transcript: list[dict[str, Any]] = Field(default_factory=list)
    subagents: list[SubagentRun] = Field(default_factory=list)
    """The sub-agents the turn spawned, in order (each with its own spawns)."""
    usage: TurnUsage = Field(default_factory=TurnUsage)
    """Tokens (per model call and in all; ``estimated`` when some call reported none),
    model calls and tool calls of the turn."""
    output: Any = None
    """The validated final answer of a turn run with ``output_type=`` (a model instance,
    or the JSON value for a JSON schema); ``None`` otherwise."""

    _steps: TurnTrace | list[dict[str, Any]] | None = PrivateAttr(default=None)

    @model_validator(mode="wrap")
    @classmethod
    def _keep_trace(cls, data: Any, handler: ModelWrapValidatorHandler[Self]) -> Self:
        # ``trace`` (a TurnTrace, or entries already as dicts) is kept as given and turned
        # into JSON when first read: most callers never read it.
        steps = None
        if isinstance(data, Mapping) and "trace" in data:
            data = dict(data)
            steps = data.pop("trace")
        result = handler(data)
        result._steps = steps
        return result

    @computed_field  # type: ignore[prop-decorator]
    @cached_property
    def trace(self) -> list[dict[str, Any]]:
        """Every step of the turn in order (hooks with their handlers, model calls, tool
        calls) as JSON-compatible dicts, scrubbed of configured secrets; built on first
        read (``model_dump`` included)."""
        steps, self._steps = self._steps, None
        if isinstance(steps, TurnTrace):
            return steps.to_json(clean=scrub_data)
        return [dict(entry) for entry in steps or []]

    @property
    def hooks(self) -> list[str]:
        """Hook names in the order they were dispatched."""
        return [e["name"] for e in self.trace if e.get("kind") == "hook"]

    @property
    def total_steps(self) -> int:
        """Model calls of the turn and of every sub-agent it spawned (at any depth)."""
        return self.steps + sum(run.total_steps for run in self.subagents)


class TurnRunner(Protocol):
    """What the phase modules use of the runner (:class:`~agentplug.agent.AgentRunner`)."""

    host: Any
    agent_id: str
    config: AgentConfig
    tools: ToolRegistry
    tool_policy: ToolPolicy
    pipeline: ToolCallPipeline
    sessions: Any
    render_injections: bool
    on_delta: Callable[[str], Any] | None

    def provider_for(self, name: str) -> ModelProvider:
        """The provider called ``name``."""
        ...

    async def maybe_compact(self, turn: Turn) -> bool:
        """Compact the transcript when it passes the budget."""
        ...


class RunnerParts(Protocol):
    """What a runner uses of its gateway (an :class:`agentplug.Gateway` is one)."""

    @property
    def host(self) -> HookHost: ...

    @property
    def store(self) -> StateStore: ...

    @property
    def sessions(self) -> SessionServices: ...

    @property
    def policies(self) -> TrustedToolPolicies: ...

    @property
    def actions(self) -> AgentRuntime: ...

    @property
    def tool_calls(self) -> ToolCallPipeline: ...

    @property
    def approvals(self) -> ApprovalBroker: ...

    def runner_for(self, provider: ModelProvider | None = None, **options: Any) -> Any:
        """Another runner on these parts (a sub-agent's)."""
        ...


@dataclass(frozen=True)
class TurnOptions:
    """What a caller asked of one turn beyond its message (``on_event=``,
    ``output_type=``, ``output_retries=``)."""

    on_event: Callable[[Any], Any] | None = None
    output: OutputSpec | None = None
    output_retries: int = 2

    @classmethod
    def of(
        cls, on_event: Callable[[Any], Any] | None, output_type: Any, output_retries: int
    ) -> TurnOptions:
        """Checked options (a bad output type is an error before the turn starts)."""
        if output_retries < 0:
            raise ValueError(f"output_retries must be 0 or more, got {output_retries}")
        spec = None if output_type is None else output_spec(output_type)
        return cls(on_event, spec, output_retries)

    def apply(self, turn: Turn) -> None:
        """Set them on ``turn``."""
        turn.on_event, turn.output = self.on_event, self.output
        turn.output_retries = self.output_retries


class TurnFailed(Exception):
    """Stops a turn: ``agent_end(success=False, error=str(exc))``."""


class TurnCancelled(Exception):
    """The turn's abort signal fired."""


@dataclass
class Turn:
    """The working state of one turn."""

    runner: TurnRunner
    run_id: str
    session: SessionRecord
    prompt: str
    signal: AbortSignal
    trace: TurnTrace
    ctx: AgentContext
    msg_ctx: MessageContext
    tool_ctx: ToolContext
    heartbeat: bool = False
    inbound: InboundMessage | None = None
    new_session: bool = False
    provider_name: str = "scripted"
    model: str = "default"
    model_overridden: bool = False
    system_prompt: str | None = None
    user_prompt: str = ""
    reply: str | None = None
    status: TurnStatus = "replied"
    error: str | None = None
    blocked_by: str | None = None
    steps: int = 0
    finalize: FinalizeRetryTracker = field(default_factory=FinalizeRetryTracker)
    started: float = field(default_factory=time.perf_counter)
    loaded: bool = False
    """Whether the session was loaded (it is, after ``before_model_resolve``); a turn
    that stops before never saves over the stored session."""
    media: list[dict[str, Any]] = field(default_factory=list)
    """Attachments the turn's tool calls returned (generated media, files): delivered
    in the reply payload's ``media``."""
    spawn: Spawn | None = None
    """Set on a sub-agent's turn: who spawned it and how deep it is."""
    user_index: int | None = None
    """Where this turn's user message is in the transcript (compaction keeps it)."""
    subagent_runs: list[SubagentRun] = field(default_factory=list)
    """The sub-agents this turn spawned (rolled up into its result)."""
    subagents_started: int = 0
    """Spawns this turn began (``agent.max_subagents_per_turn`` bounds it)."""
    on_event: Callable[[Any], Any] | None = None
    """Receives the turn's stream events (``runner.stream``, ``on_event=``)."""
    output: OutputSpec | None = None
    """The output type the final answer must match (``output_type=``)."""
    output_retries: int = 2
    """How many times a final answer that does not match :attr:`output` is asked again."""
    output_value: Any = None
    clock_start: float = field(default_factory=time.monotonic)
    """When the turn started on the monotonic clock (its deadline counts from here)."""
    _ledger: UsageLedger | None = None
    _extras: dict[str, Any] = field(default_factory=dict)
    """Per-turn state of the phase modules (the stream gate, the call scope)."""

    @property
    def ledger(self) -> UsageLedger:
        """The turn's usage (and the checks of ``agent.limits`` against it)."""
        if self._ledger is None:
            self._ledger = UsageLedger(
                self.runner.config.limits, session_tokens=self.session.usage_tokens
            )
        return self._ledger

    @property
    def host(self) -> Any:
        """The runner's host."""
        return self.runner.host

    def history(self) -> FrozenList:
        """The session's messages as the turn's hooks receive them (frozen, without
        ``details``); each message is copied once a turn however many hooks carry it."""
        view: HistoryView | None = self._extras.get("history")
        if view is None:
            view = self._extras["history"] = HistoryView()
        return view(self.session.messages)

    def check_aborted(self) -> None:
        """Raise :class:`TurnCancelled` when the abort signal fired."""
        if self.signal.aborted:
            raise TurnCancelled(str(self.signal.reason or "cancelled"))


_CURRENT: contextvars.ContextVar[Turn | None] = contextvars.ContextVar(
    "agentplug_current_turn", default=None
)


def current_turn() -> Turn | None:
    """The turn running in this task (a tool the model calls sees the turn that called it)."""
    return _CURRENT.get()


def bind_turn(turn: Turn) -> contextvars.Token[Turn | None]:
    """Make ``turn`` the current turn (the runner does this for each turn)."""
    return _CURRENT.set(turn)


def unbind_turn(token: contextvars.Token[Turn | None]) -> None:
    """Undo :func:`bind_turn`."""
    _CURRENT.reset(token)
