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
    session_key: str | None = None
    session_id: str | None = None
    run_id: str | None = None
    tool_kind: str | None = None
    tool_input_kind: str | None = None
    message_provider: str | None = None
    channel_id: str | None = None
    trace: JsonMap | None = None


class ToolCallEvent(Event):
    """A tool call about to run."""

    tool_name: str
    params: JsonMap = Field(default_factory=dict)
    tool_kind: str | None = None
    """Authoritative host discriminator, e.g. ``code_mode_exec``."""
    tool_input_kind: Literal["javascript", "typescript"] | None = None
    derived_paths: JsonList | None = None
    """Best-effort target path hints; may be incomplete or over-approximate."""
    run_id: str | None = None
    tool_call_id: str | None = None


class ApprovalRequest(Result):
    """Pause the run and ask a person (through the host's resolver) to decide."""

    title: str = Field(min_length=1, max_length=200)
    description: str = Field(min_length=1, max_length=4_000)
    severity: Severity = "info"
    timeout_ms: int | None = Field(default=None, gt=0, le=MAX_APPROVAL_TIMEOUT_MS)
    timeout_behavior: Literal["allow", "deny"] | None = None
    """Deprecated and ignored: unresolved approvals always deny."""
    allowed_decisions: list[ApprovalDecision] = Field(
        default_factory=lambda: _all_decisions(), min_length=1
    )
    plugin_id: str | None = None
    """Stamped by the runtime with the requesting plugin (what a plugin writes is ignored)."""
    on_resolution: Callable[[ApprovalResolution], Any] | None = Field(default=None, exclude=True)


class ToolCallResult(Result):
    """Rewrite parameters, block, or require approval."""

    params: dict[str, Any] | None = None
    block: bool | None = Field(default=None, strict=True)
    block_reason: str | None = None
    require_approval: ApprovalRequest | None = None


class ToolCallOutcome(HookModel):
    """Reduced ``before_tool_call``: the parameters to run with and the decision."""

    params: dict[str, Any] = Field(default_factory=dict)
    blocked: bool = False
    block_reason: str | None = None
    blocked_by: str | None = None
    approval: ApprovalRequest | None = None
    """The first approval request (``plugin_id`` stamped); ``None`` when none was made."""

    @property
    def needs_approval(self) -> bool:
        """True when the call may run only after an approval resolver allows it."""
        return not self.blocked and self.approval is not None


class AfterToolCallEvent(Event):
    """The result of a finished tool call."""

    tool_name: str
    params: JsonMap = Field(default_factory=dict)
    result: Any = None
    error: str | None = None
    duration_ms: float | None = None
    run_id: str | None = None
    tool_call_id: str | None = None


class ExecEnvEvent(Event):
    """An ``exec`` invocation about to start; plugins may contribute env vars."""

    session_key: str | None = None
    tool_name: str = "exec"
    host: Literal["gateway", "sandbox", "node"] = "gateway"


class ExecEnvResult(Result):
    """Environment variables to contribute (``{"env": {...}}`` or a plain mapping)."""

    env: dict[str, str] = Field(default_factory=dict)

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
    plugin_id: str | None = None
    reason: str


class ExecEnvOutcome(HookModel):
    """Merged and filtered environment, with what was dropped (for audit metadata)."""

    env: dict[str, str] = Field(default_factory=dict)
    dropped: list[DroppedEnvKey] = Field(default_factory=list)
    contributors: dict[str, str] = Field(default_factory=dict)
    """Which plugin provided each kept key."""


class ToolResultPersistEvent(Event):
    """The assistant message built from a tool result, about to be persisted."""

    message: JsonMap
    tool_name: str | None = None
    tool_call_id: str | None = None


class MessageReplacement(Result):
    """A replacement message (``{"message": {...}}``)."""

    message: dict[str, Any]


class MessagePersistOutcome(HookModel):
    """The message to persist after every handler saw the latest one."""

    message: dict[str, Any]
    changed_by: list[str] = Field(default_factory=list)


class MessageWriteEvent(Event):
    """A message about to be written to the session transcript."""

    message: JsonMap
    session_key: str | None = None


class MessageWriteResult(Result):
    """A replacement message, or ``{"block": true}`` to drop the write."""

    message: dict[str, Any] | None = None
    block: bool | None = Field(default=None, strict=True)
    block_reason: str | None = None


class MessageWriteOutcome(HookModel):
    """Reduced ``before_message_write``."""

    message: dict[str, Any]
    blocked: bool = False
    block_reason: str | None = None
    blocked_by: str | None = None
    changed_by: list[str] = Field(default_factory=list)


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
