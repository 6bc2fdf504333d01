"""Agent-turn and conversation-observation hooks (HOOKS.md §3 "Agent turn")."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import ConfigDict, Field, field_validator

from ._model import Event, FrozenList, HookModel, JsonList, JsonMap, Result
from ._semantics import (
    Claim,
    Deprecation,
    FailurePolicy,
    FieldMerge,
    HookKind,
    Special,
    declare,
    observe,
)
from .common import AgentContext, ClaimOutcome, ClaimResult

GROUP = "Agent turn"
OBS_GROUP = "Conversation observation"

_PROMPT_FIELDS = (
    "prepend_context",
    "append_context",
    "prepend_system_context",
    "append_system_context",
)

# -- events ----------------------------------------------------------------------------


class TurnEvent(Event):
    """Fields every agent-turn event shares: the run and the current prompt."""

    run_id: str | None = None
    """Id of the agent run (one user turn and the model calls it makes)."""
    prompt: str = ""
    """The user's prompt for this turn."""


class PromptEvent(TurnEvent):
    """A turn event that also carries the session messages."""

    messages: JsonList = FrozenList()
    """The session's messages (transcript) loaded for the turn."""


class ModelResolveEvent(TurnEvent):
    """The current prompt and attachment metadata, before the model is resolved."""

    attachments: JsonList = FrozenList()
    """Metadata of the prompt's attachments (no contents)."""


class TurnPrepareEvent(PromptEvent):
    """The prompt, prepared messages and the drained next-turn injections."""

    injections: JsonList = FrozenList()
    """Next-turn injections drained (exactly once) for this session."""


class PromptBuildEvent(PromptEvent):
    """The current prompt and the session messages."""


class AgentStartEvent(PromptEvent):
    """Legacy combined phase: prompt, messages and attachment metadata."""

    attachments: JsonList = FrozenList()
    """Metadata of the prompt's attachments (no contents)."""


class AgentRunEvent(PromptEvent):
    """The final prompt, the loaded history and the active system prompt."""

    system_prompt: str | None = None
    """The active system prompt of the run."""


class AgentReplyEvent(PromptEvent):
    """The prompt about to be answered by the model."""


class AgentFinalizeEvent(Event):
    """The natural final assistant reply, before the harness accepts it."""

    reply: str = ""
    """The natural final assistant reply, before the harness accepts it."""
    messages: JsonList = FrozenList()
    """The run's messages so far."""
    attempt: int = 0
    """How many revise passes already ran for this reply (0: the first answer)."""
    run_id: str | None = None
    """Id of the agent run (one user turn and the model calls it makes)."""


class AgentEndEvent(Event):
    """Final messages, success flag and duration of a run."""

    messages: JsonList = FrozenList()
    """The final messages of the run."""
    success: bool = True
    """Whether the run ended without an error."""
    error: str | None = None
    """Why the run failed (``None`` on success)."""
    duration_ms: float | None = None
    """How long the run took, in milliseconds."""
    run_id: str | None = None
    """Id of the agent run (one user turn and the model calls it makes)."""


class HeartbeatEvent(Event):
    """A heartbeat turn (background supervision), never a user-initiated one."""

    prompt: str = ""
    """The heartbeat prompt of this background turn."""
    run_id: str | None = None
    """Id of the agent run (one user turn and the model calls it makes)."""


MAX_REQUEST_ID_HASH_CHARS = 64
"""Longest ``upstream_request_id_hash`` a model-call event accepts (hex digits only)."""
_HASH_RE = re.compile(rf"[0-9a-f]{{1,{MAX_REQUEST_ID_HASH_CHARS}}}")


class ModelCallEvent(Event):
    """Sanitised model-call metadata: never prompt, history, response or headers.

    Only the documented fields are kept: anything else a host passes (prompt text,
    response text, headers, raw request ids) is dropped before any handler runs.
    ``upstream_request_id_hash`` must be a bounded hex digest (derive it with
    ``agentplug.upstream_request_id_hash``), never the provider's raw id.
    """

    model_config = ConfigDict(frozen=True, extra="ignore")

    run_id: str | None = None
    """Id of the agent run (one user turn and the model calls it makes)."""
    call_id: str | None = None
    """Id of this model call within the run."""
    provider: str | None = None
    """Model provider (``openai``, ``anthropic``, ...)."""
    model: str | None = None
    """Model name the call used."""
    api: str | None = None
    """Provider API flavour (``chat``, ``responses``, ...), when known."""
    transport: str | None = None
    """How the call was made (``http``, ``websocket``, ...), when known."""
    duration_ms: float | None = None
    """How long the call took, in milliseconds (``model_call_ended``)."""
    outcome: str | None = None
    """How the call ended (``ok``, ``error``, ``timeout``, ``cancelled``)."""
    upstream_request_id_hash: str | None = None
    """Keyed, bounded hash of the provider's request id (never the raw id)."""
    context_token_budget: int | None = None
    """Token budget of the context window for this call."""
    context_window_source: str | None = None
    """Where the context window size came from (``model``, ``config``, ...)."""
    context_window_reference_tokens: int | None = None
    """Reference context window size, in tokens."""

    @field_validator("upstream_request_id_hash")
    @classmethod
    def _bounded_hash(cls, value: str | None) -> str | None:
        if value is not None and not _HASH_RE.fullmatch(value):
            raise ValueError(
                "upstream_request_id_hash must be a hex digest of at most "
                f"{MAX_REQUEST_ID_HASH_CHARS} characters, never the raw provider request id: "
                "derive it with agentplug.upstream_request_id_hash(request_id)"
            )
        return value


class LlmInputEvent(Event):
    """Provider input: system prompt, prompt and history."""

    run_id: str | None = None
    """Id of the agent run (one user turn and the model calls it makes)."""
    provider: str | None = None
    """Model provider the input goes to."""
    model: str | None = None
    """Model name the input goes to."""
    system_prompt: str | None = None
    """The system prompt sent to the provider."""
    prompt: str = ""
    """The prompt sent to the provider."""
    history: JsonList = FrozenList()
    """The conversation history sent with the prompt."""


class LlmOutputEvent(Event):
    """Provider output, usage and the resolved context token budget."""

    run_id: str | None = None
    """Id of the agent run (one user turn and the model calls it makes)."""
    provider: str | None = None
    """Model provider that answered."""
    model: str | None = None
    """Model name that answered."""
    output: Any = None
    """The provider's output (text or structured content)."""
    usage: JsonMap | None = None
    """Token usage reported by the provider."""
    context_token_budget: int | None = None
    """Token budget of the context window that was resolved for the call."""


# -- results ---------------------------------------------------------------------------


class ModelResolveResult(Result):
    """Override the provider and/or model of this turn."""

    provider_override: str | None = None
    """Provider to use for this turn instead of the session's."""
    model_override: str | None = None
    """Model to use for this turn instead of the session's."""


class ContextResult(Result):
    """Context to add around the prompt."""

    prepend_context: str | None = None
    """Text added before the prompt (contributions joined by a blank line)."""
    append_context: str | None = None
    """Text added after the prompt (contributions joined by a blank line)."""


class PromptBuildResult(ContextResult):
    """Context and system-prompt contributions."""

    system_prompt: str | None = None
    """Replacement system prompt (the first defined value wins)."""
    prepend_system_context: str | None = None
    """Text added before the system prompt."""
    append_system_context: str | None = None
    """Text added after the system prompt."""


class AgentStartResult(PromptBuildResult, ModelResolveResult):
    """Legacy combined result of ``before_model_resolve`` + ``before_prompt_build``."""


class AgentRunResult(Result):
    """``{outcome: "pass"}`` or ``{outcome: "block", reason, message?}``.

    ``reason`` is confidential (never logged, stored or broadcast); ``message`` is the
    user-facing replacement stored in the transcript.
    """

    outcome: Literal["pass", "block"]
    """``pass`` lets the run go on; ``block`` stops it."""
    reason: str | None = None
    """Why it was blocked: confidential (never logged, stored or broadcast)."""
    message: str | None = None
    """User-facing text stored in the transcript instead of the blocked prompt."""


class AgentRunOutcome(HookModel):
    """Reduced ``before_agent_run``: pass, or block with the blocking plugin."""

    outcome: Literal["pass", "block"] = "pass"
    """``pass`` or ``block`` (a failed handler blocks: fail closed)."""
    reason: str | None = Field(default=None, repr=False, exclude=True)
    """Confidential: excluded from dumps and reprs; never log, persist or show it."""
    message: str | None = None
    """User-facing replacement text of a blocked prompt."""
    blocked_by: str | None = None
    """Id of the plugin that blocked the run."""


class FinalizeRetry(Result):
    """Bounded, replay-safe extra model pass requested by a ``revise`` decision."""

    instruction: str
    """What the extra model pass must fix in the reply."""
    idempotency_key: str | None = None
    """Key retries are counted by (default: a hash of the instruction)."""
    max_attempts: int | None = Field(default=None, ge=1)
    """Extra passes allowed for this key (default 1); the runtime caps it at 3 and warns."""


class AgentFinalizeResult(Result):
    """``{action: "revise", reason, retry?}`` or ``{action: "finalize", reason?}``."""

    action: Literal["revise", "finalize"]
    """``revise`` asks for another pass; ``finalize`` accepts the reply."""
    reason: str | None = None
    """Why (``revise`` reasons are concatenated)."""
    retry: FinalizeRetry | None = None
    """The extra pass to run (the first valid one is kept)."""

    @field_validator("retry", mode="before")
    @classmethod
    def _drop_invalid_retry(cls, value: Any) -> Any:
        # An invalid retry does not invalidate the decision: "the first valid retry
        # is kept", so a malformed one is simply not a candidate.
        if value is None or isinstance(value, FinalizeRetry):
            return value
        try:
            return FinalizeRetry.model_validate(value)
        except ValueError:
            return None


class AgentFinalizeOutcome(HookModel):
    """Reduced ``before_agent_finalize``."""

    action: Literal["continue", "revise", "finalize"] = "continue"
    """``continue``: nobody decided; accept the natural reply."""
    reason: str | None = None
    """The concatenated ``revise`` reasons (or the ``finalize`` reason)."""
    retry: FinalizeRetry | None = None
    """The retry to run (the first valid one)."""
    decided_by: list[str] = Field(default_factory=list)
    """Ids of the plugins whose decision made the outcome."""


# -- hookspecs -------------------------------------------------------------------------


@declare(
    kind=HookKind.MERGE,
    event=ModelResolveEvent,
    ctx=AgentContext,
    result=ModelResolveResult,
    outcome=ModelResolveResult,
    reduction=FieldMerge(first=("provider_override", "model_override")),
    group=GROUP,
    conversation_gate=True,
)
def before_model_resolve(event: ModelResolveEvent, ctx: AgentContext) -> ModelResolveResult | None:
    """Override the provider or model of a turn before the session's messages load.

    Receives only the current prompt and attachment metadata. Return
    ``provider_override`` and/or ``model_override``; the first defined value of each
    field wins (highest priority first). Installed plugins need
    ``hooks.allow_conversation_access``.
    """


@declare(
    kind=HookKind.MERGE,
    event=TurnPrepareEvent,
    ctx=AgentContext,
    result=ContextResult,
    outcome=ContextResult,
    reduction=FieldMerge(concat=("prepend_context", "append_context")),
    group=GROUP,
    prompt_gate=True,
)
def agent_turn_prepare(event: TurnPrepareEvent, ctx: AgentContext) -> ContextResult | None:
    """Consume queued next-turn injections and add context to the same turn.

    Runs before the prompt hooks with the prompt, the prepared messages and the
    injections drained (exactly once) for this session. Return ``prepend_context``
    and/or ``append_context``; contributions are concatenated in priority order,
    joined by a blank line. Disabled by ``hooks.allow_prompt_injection = false``.
    """


@declare(
    kind=HookKind.MERGE,
    event=PromptBuildEvent,
    ctx=AgentContext,
    result=PromptBuildResult,
    outcome=PromptBuildResult,
    reduction=FieldMerge(first=("system_prompt",), concat=_PROMPT_FIELDS),
    group=GROUP,
    default_timeout_ms=15_000,
    prompt_gate=True,
)
def before_prompt_build(event: PromptBuildEvent, ctx: AgentContext) -> PromptBuildResult | None:
    """Add dynamic context or system-prompt text before the model call.

    Receives the prompt and the session messages. Return ``prepend_context``,
    ``append_context``, ``system_prompt``, ``prepend_system_context`` or
    ``append_system_context``. ``system_prompt``: the first defined value wins; the
    four context fields are concatenated in priority order.
    """


@declare(
    kind=HookKind.MERGE,
    event=AgentStartEvent,
    ctx=AgentContext,
    result=AgentStartResult,
    outcome=AgentStartResult,
    reduction=FieldMerge(
        first=("provider_override", "model_override", "system_prompt"), concat=_PROMPT_FIELDS
    ),
    group=GROUP,
    default_timeout_ms=15_000,
    prompt_gate=True,
    deprecation=Deprecation(
        replacement="before_model_resolve + before_prompt_build", removed_in="1.0"
    ),
)
def before_agent_start(event: AgentStartEvent, ctx: AgentContext) -> AgentStartResult | None:
    """Deprecated legacy combined phase of ``before_model_resolve`` + ``before_prompt_build``.

    Accepts the results of both hooks and reduces them the same way. Kept for
    compatibility; registering it warns once per plugin. New plugins use the two
    phase-specific hooks.
    """


@declare(
    kind=HookKind.DECIDE,
    event=AgentRunEvent,
    ctx=AgentContext,
    result=AgentRunResult,
    outcome=AgentRunOutcome,
    reduction=Special(
        "agent_run",
        "first `block` wins and is terminal; only `pass`/`block` shapes are valid, anything "
        "else blocks (fail closed); `None` is pass",
    ),
    group=GROUP,
    default_timeout_ms=15_000,
    failure=FailurePolicy.FAIL_CLOSED,
    conversation_gate=True,
)
def before_agent_run(event: AgentRunEvent, ctx: AgentContext) -> AgentRunResult | None:
    """Inspect the final prompt and history before the model reads them; may block.

    Return ``{"outcome": "pass"}`` (or ``None``) to continue, or
    ``{"outcome": "block", "reason": ..., "message": ...}`` to stop the run. ``reason``
    is confidential; ``message`` replaces the user's text in the transcript. Any other
    shape, an exception or a timeout blocks (fail closed). The first block wins.
    """


@declare(
    kind=HookKind.CLAIM,
    event=AgentReplyEvent,
    ctx=AgentContext,
    result=ClaimResult,
    outcome=ClaimOutcome,
    reduction=Claim(),
    group=GROUP,
    conversation_gate=True,
)
def before_agent_reply(event: AgentReplyEvent, ctx: AgentContext) -> ClaimResult | None:
    """Skip the model turn with a synthetic reply or silence.

    Return ``{"handled": true, "reply": ...}`` to answer instead of the model
    (``reply`` omitted means silence). Stops at the first handled result.
    """


@declare(
    kind=HookKind.DECIDE,
    event=AgentFinalizeEvent,
    ctx=AgentContext,
    result=AgentFinalizeResult,
    outcome=AgentFinalizeOutcome,
    reduction=Special(
        "agent_finalize",
        "any `finalize` wins; otherwise `revise` reasons are concatenated and the first "
        "valid `retry` is kept; on timeout continue with the original reply",
    ),
    group=GROUP,
    default_timeout_ms=15_000,
    conversation_gate=True,
)
def before_agent_finalize(
    event: AgentFinalizeEvent, ctx: AgentContext
) -> AgentFinalizeResult | None:
    """Inspect the natural final reply and optionally ask for one more model pass.

    Return ``{"action": "revise", "reason": ..., "retry": {"instruction": ...,
    "idempotency_key": ..., "max_attempts": 1..3}}`` to revise, ``{"action":
    "finalize"}`` to force finalisation, or ``None`` to continue. Not run for ``/stop``.
    """


@observe(event=AgentEndEvent, ctx=AgentContext, group=GROUP, conversation_gate=True)
def agent_end(event: AgentEndEvent, ctx: AgentContext) -> None:
    """Observe the final messages, success state and duration of a run."""


@declare(
    kind=HookKind.MERGE,
    event=HeartbeatEvent,
    ctx=AgentContext,
    result=ContextResult,
    outcome=ContextResult,
    reduction=FieldMerge(concat=("prepend_context", "append_context")),
    group=GROUP,
    prompt_gate=True,
)
def heartbeat_prompt_contribution(event: HeartbeatEvent, ctx: AgentContext) -> ContextResult | None:
    """Add heartbeat-only context (background monitors); never user-initiated turns.

    Return ``prepend_context`` and/or ``append_context``; concatenated in priority order.
    """


@observe(event=ModelCallEvent, ctx=AgentContext, group=OBS_GROUP)
def model_call_started(event: ModelCallEvent, ctx: AgentContext) -> None:
    """Observe the start of a provider call: sanitised metadata only (no content)."""


@observe(event=ModelCallEvent, ctx=AgentContext, group=OBS_GROUP)
def model_call_ended(event: ModelCallEvent, ctx: AgentContext) -> None:
    """Observe the end of a provider call: duration, outcome, bounded request-id hash."""


@observe(event=LlmInputEvent, ctx=AgentContext, group=OBS_GROUP, conversation_gate=True)
def llm_input(event: LlmInputEvent, ctx: AgentContext) -> None:
    """Observe the provider input: system prompt, prompt and history."""


@observe(event=LlmOutputEvent, ctx=AgentContext, group=OBS_GROUP, conversation_gate=True)
def llm_output(event: LlmOutputEvent, ctx: AgentContext) -> None:
    """Observe the provider output, usage and the resolved context token budget."""
