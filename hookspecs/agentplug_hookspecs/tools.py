"""Tool hooks (HOOKS.md §3 "Tools")."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from pydantic import Field, model_validator

from ._model import Context, Event, FrozenList, HookModel, JsonList, JsonMap, Result
from ._semantics import (
    DictMerge,
    FailurePolicy,
    HookKind,
    Pipeline,
    Special,
    declare,
    observe,
)

GROUP = "Tools"

ApprovalDecision = Literal["allow-once", "allow-always", "deny"]
ApprovalResolution = Literal["allow-once", "allow-always", "deny", "timeout", "cancelled"]
Severity = Literal["info", "warning", "critical"]

MAX_APPROVAL_TIMEOUT_MS = 600_000
DEFAULT_APPROVAL_TIMEOUT_MS = 120_000


def _all_decisions() -> list[ApprovalDecision]:
    return ["allow-once", "allow-always", "deny"]


class ToolContext(Context):
    """Correlation context of tool hooks."""

    agent_id: str | None = None
    """Id of the agent (persona) the run belongs to."""
    session_key: str | None = None
    """Stable key of the conversation session (channel, account and peer)."""
    session_id: str | None = None
    """Id of the current session instance (changes when the session is reset)."""
    run_id: str | None = None
    """Id of the agent run (one user turn and the model calls it makes)."""
    tool_kind: str | None = None
    """Kind of tool (``builtin``, ``mcp``, ``plugin``, ...), when known."""
    tool_input_kind: str | None = None
    """Language of code-mode input (``javascript`` or ``typescript``)."""
    message_provider: str | None = None
    """Provider of the inbound message the run answers."""
    channel_id: str | None = None
    """Id of the channel, room or chat on the provider."""
    trace: JsonMap | None = None
    """W3C-style trace data of the request (free-form map from the host)."""


class ToolCallEvent(Event):
    """A tool call about to run."""

    tool_name: str
    """Name of the tool about to run."""
    params: JsonMap = Field(default_factory=dict)
    """The tool's parameters (read-only; return ``params`` to rewrite them)."""
    tool_kind: str | None = None
    """Authoritative host discriminator, e.g. ``code_mode_exec``."""
    tool_input_kind: Literal["javascript", "typescript"] | None = None
    """Language of code-mode input: ``javascript`` or ``typescript``."""
    derived_paths: JsonList | None = None
    """Best-effort target path hints; may be incomplete or over-approximate."""
    run_id: str | None = None
    """Id of the agent run (one user turn and the model calls it makes)."""
    tool_call_id: str | None = None
    """Id of this tool call within the run."""


class ApprovalRequest(Result):
    """Pause the run and ask a person (through the host's resolver) to decide."""

    title: str = Field(min_length=1, max_length=200)
    """Short title shown to whoever approves (1-200 characters)."""
    description: str = Field(min_length=1, max_length=4_000)
    """What will happen and why approval is needed (1-4000 characters)."""
    severity: Severity = "info"
    """``info``, ``warning`` or ``critical``."""
    timeout_ms: int | None = Field(default=None, gt=0, le=MAX_APPROVAL_TIMEOUT_MS)
    """How long to wait for a decision (default 120 s, at most 600 s); unresolved: deny."""
    timeout_behavior: Literal["allow", "deny"] | None = None
    """Deprecated and ignored: unresolved approvals always deny."""
    allowed_decisions: list[ApprovalDecision] = Field(
        default_factory=lambda: _all_decisions(), min_length=1
    )
    """Decisions offered: ``allow-once``, ``allow-always``, ``deny``."""
    plugin_id: str | None = None
    """Stamped by the runtime with the requesting plugin (what a plugin writes is ignored)."""
    on_resolution: Callable[[ApprovalResolution], Any] | None = Field(default=None, exclude=True)
    """Called with the resolution (``allow-once``, ``allow-always``, ``deny``, ``timeout``,
    ``cancelled``); failures are only logged."""


class ToolCallResult(Result):
    """Rewrite parameters, block, or require approval."""

    params: dict[str, Any] | None = None
    """Replacement parameters (the next handler sees them)."""
    block: bool | None = Field(default=None, strict=True)
    """``true`` blocks the call (terminal); ``false`` is no decision."""
    block_reason: str | None = None
    """Why the call is blocked."""
    require_approval: ApprovalRequest | None = None
    """Ask for approval before the call runs (the first request wins)."""


class ToolCallOutcome(HookModel):
    """Reduced ``before_tool_call``: the parameters to run with and the decision."""

    params: dict[str, Any] = Field(default_factory=dict)
    """The parameters the tool runs with (after every rewrite)."""
    blocked: bool = False
    """Whether the call is blocked (a failed handler blocks: fail closed)."""
    block_reason: str | None = None
    """Why it was blocked."""
    blocked_by: str | None = None
    """Id of the plugin that blocked it."""
    approval: ApprovalRequest | None = None
    """The first approval request (``plugin_id`` stamped); ``None`` when none was made."""

    @property
    def needs_approval(self) -> bool:
        """True when the call may run only after an approval resolver allows it."""
        return not self.blocked and self.approval is not None


class AfterToolCallEvent(Event):
    """The result of a finished tool call."""

    tool_name: str
    """Name of the tool that ran."""
    params: JsonMap = Field(default_factory=dict)
    """The parameters it ran with."""
    result: Any = None
    """What the tool returned."""
    error: str | None = None
    """Why the tool failed (``None`` on success)."""
    duration_ms: float | None = None
    """How long the tool ran, in milliseconds."""
    run_id: str | None = None
    """Id of the agent run (one user turn and the model calls it makes)."""
    tool_call_id: str | None = None
    """Id of this tool call within the run."""


class ExecEnvEvent(Event):
    """An ``exec`` invocation about to start; plugins may contribute env vars."""

    session_key: str | None = None
    """Stable key of the conversation session (channel, account and peer)."""
    tool_name: str = "exec"
    """The tool about to execute a process (``exec``)."""
    host: Literal["gateway", "sandbox", "node"] = "gateway"
    """Where the process runs: ``gateway``, ``sandbox`` or ``node``."""


class ExecEnvResult(Result):
    """Environment variables to contribute (``{"env": {...}}`` or a plain mapping)."""

    env: dict[str, str] = Field(default_factory=dict)
    """Environment variables to add (later handlers override the same key)."""

    @model_validator(mode="before")
    @classmethod
    def _accept_plain_mapping(cls, data: Any) -> Any:
        # The documented return value is a plain dict[str, str]; {"env": {...}} is the
        # explicit form. A lone "env" key holding a mapping means the explicit form.
        if isinstance(data, dict) and not (set(data) == {"env"} and isinstance(data["env"], dict)):
            return {"env": data}
        return data


class DroppedEnvKey(HookModel):
    """A key removed by the exec-env filter, and why (never its value)."""

    key: str
    """The environment variable that was dropped."""
    plugin_id: str | None = None
    """Id of the plugin that contributed it."""
    reason: str
    """Why it was dropped (``PATH``, invalid name, dangerous variable)."""


class ExecEnvOutcome(HookModel):
    """Merged and filtered environment, with what was dropped (for audit metadata)."""

    env: dict[str, str] = Field(default_factory=dict)
    """The merged environment, after the safety filter."""
    dropped: list[DroppedEnvKey] = Field(default_factory=list)
    """Variables the filter removed, with the contributing plugin and the reason."""
    contributors: dict[str, str] = Field(default_factory=dict)
    """Which plugin provided each kept key."""


class ToolResultPersistEvent(Event):
    """The assistant message built from a tool result, about to be persisted."""

    message: JsonMap
    """The assistant message built from a tool result, about to be persisted."""
    tool_name: str | None = None
    """Name of the tool whose result it is."""
    tool_call_id: str | None = None
    """Id of the tool call."""


class MessageReplacement(Result):
    """A replacement message (``{"message": {...}}``)."""

    message: dict[str, Any]
    """The message to persist instead."""


class MessagePersistOutcome(HookModel):
    """The message to persist after every handler saw the latest one."""

    message: dict[str, Any]
    """The message that is persisted (after every replacement)."""
    changed_by: list[str] = Field(default_factory=list)
    """Ids of the plugins that replaced it, in order."""


class MessageWriteEvent(Event):
    """A message about to be written to the session transcript."""

    message: JsonMap
    """The message about to be written to the session transcript."""
    session_key: str | None = None
    """Stable key of the conversation session (channel, account and peer)."""


class MessageWriteResult(Result):
    """A replacement message, or ``{"block": true}`` to drop the write."""

    message: dict[str, Any] | None = None
    """The message to write instead."""
    block: bool | None = Field(default=None, strict=True)
    """``true`` stops the write (terminal); ``false`` is no decision."""
    block_reason: str | None = None
    """Why the write is blocked."""


class MessageWriteOutcome(HookModel):
    """Reduced ``before_message_write``."""

    message: dict[str, Any]
    """The message that is written (after every replacement)."""
    blocked: bool = False
    """Whether the write was blocked."""
    block_reason: str | None = None
    """Why it was blocked."""
    blocked_by: str | None = None
    """Id of the plugin that blocked it."""
    changed_by: list[str] = Field(default_factory=list)
    """Ids of the plugins that replaced the message, in order."""


@declare(
    kind=HookKind.DECIDE,
    event=ToolCallEvent,
    ctx=ToolContext,
    result=ToolCallResult,
    outcome=ToolCallOutcome,
    reduction=Special(
        "tool_call",
        "`block: true` is terminal; `block: false` is no decision; `params` rewrite the call "
        "(frozen once approval is requested); the first `require_approval` wins with its "
        "`plugin_id` stamped by the runtime; a lower `block: true` still blocks after an "
        "approval request",
    ),
    group=GROUP,
    default_timeout_ms=15_000,
    failure=FailurePolicy.FAIL_CLOSED,
)
def before_tool_call(event: ToolCallEvent, ctx: ToolContext) -> ToolCallResult | None:
    """Rewrite a tool call's parameters, block it, or require approval.

    Return ``{"params": {...}}`` to rewrite (the next handler sees the new params),
    ``{"block": true, "block_reason": ...}`` to stop (terminal), or
    ``{"require_approval": {"title", "description", "severity", "timeout_ms",
    "allowed_decisions", "on_resolution"}}`` to pause for a decision. A failing
    handler blocks the call (fail closed). Trusted tool policies run first.
    """


@observe(event=AfterToolCallEvent, ctx=ToolContext, group=GROUP)
def after_tool_call(event: AfterToolCallEvent, ctx: ToolContext) -> None:
    """Observe a tool's result, error and duration."""


@declare(
    kind=HookKind.MERGE,
    event=ExecEnvEvent,
    ctx=ToolContext,
    result=ExecEnvResult,
    outcome=ExecEnvOutcome,
    reduction=DictMerge(post_filter="exec_env"),
    group=GROUP,
    default_timeout_ms=15_000,
)
def resolve_exec_env(event: ExecEnvEvent, ctx: ToolContext) -> dict[str, str] | None:
    """Contribute environment variables to an ``exec`` invocation.

    Return a ``dict[str, str]``. Handlers run in priority order; a later
    (lower-priority) handler overrides an earlier one for the same key. The merged
    result is filtered: ``PATH``, invalid names, loader/interpreter injection, proxy
    and TLS-override variables are dropped and reported in ``outcome.dropped``.
    """


@declare(
    kind=HookKind.SYNC,
    event=ToolResultPersistEvent,
    ctx=ToolContext,
    result=MessageReplacement,
    outcome=MessagePersistOutcome,
    reduction=Pipeline(value="message", terminal=None),
    group=GROUP,
)
def tool_result_persist(
    event: ToolResultPersistEvent, ctx: ToolContext
) -> MessageReplacement | None:
    """Rewrite the assistant message built from a tool result before it is persisted.

    Synchronous: ``async`` handlers are warned about and ignored. Return
    ``{"message": {...}}``; each handler sees the latest message. Runs before the final
    persistence bound on ``details``.
    """


@declare(
    kind=HookKind.SYNC,
    event=MessageWriteEvent,
    ctx=ToolContext,
    result=MessageWriteResult,
    outcome=MessageWriteOutcome,
    reduction=Pipeline(value="message", terminal="block"),
    group=GROUP,
)
def before_message_write(event: MessageWriteEvent, ctx: ToolContext) -> MessageWriteResult | None:
    """Inspect or block a message about to be written (rarely needed).

    Synchronous. Return ``{"message": {...}}`` to replace it or ``{"block": true}`` to
    drop the write (terminal).
    """


__all__ = [
    "DEFAULT_APPROVAL_TIMEOUT_MS",
    "MAX_APPROVAL_TIMEOUT_MS",
    "AfterToolCallEvent",
    "ApprovalDecision",
    "ApprovalRequest",
    "ApprovalResolution",
    "DroppedEnvKey",
    "ExecEnvEvent",
    "ExecEnvOutcome",
    "ExecEnvResult",
    "FrozenList",
    "MessagePersistOutcome",
    "MessageReplacement",
    "MessageWriteEvent",
    "MessageWriteOutcome",
    "MessageWriteResult",
    "Severity",
    "ToolCallEvent",
    "ToolCallOutcome",
    "ToolCallResult",
    "ToolContext",
    "ToolResultPersistEvent",
    "after_tool_call",
    "before_message_write",
    "before_tool_call",
    "resolve_exec_env",
    "tool_result_persist",
]
