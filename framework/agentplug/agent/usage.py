"""Token usage: per model call, per turn, per session, and the limits that stop a turn.

A provider reports usage in its own shape; :func:`usage_of` reads the two common ones
(``prompt_tokens`` / ``completion_tokens`` of chat completions, ``input_tokens`` /
``output_tokens`` of the responses and messages APIs). When a provider reports nothing
usable the call's usage is estimated (about four characters per token of the request's
messages and the response) and marked ``estimated``, so a total that contains an
estimate says so.

A provider's numbers are hostile input like the rest of its response: a count that is
not a non-negative integer is ignored (the call is estimated instead) and each count is
capped at :data:`MAX_TOKENS_PER_CALL`.

:class:`UsageLedger` sums one turn's calls (every attempt that returned, compaction and
structured-output re-asks included) and checks ``agent.limits`` before each model call
and each tool call (:class:`UsageLimitReached` stops the turn with the status
``usage_limit`` and a message naming the key).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, Field

from agentplug.agent.limits import AgentLimits

__all__ = [
    "MAX_TOKENS_PER_CALL",
    "CallUsage",
    "TokenUsage",
    "TurnUsage",
    "UsageLedger",
    "UsageLimitReached",
    "estimate_tokens_of",
    "usage_of",
]

MAX_TOKENS_PER_CALL = 100_000_000
"""A reported count above this is capped (no model reads or writes that much in a call)."""


class UsageLimitReached(Exception):
    """A turn passed one of the usage limits of ``agent.limits`` (the message names it)."""


@dataclass(frozen=True)
class TokenUsage:
    """Input and output tokens; ``estimated`` when any part was not reported."""

    input_tokens: int = 0
    output_tokens: int = 0
    estimated: bool = False

    @property
    def total_tokens(self) -> int:
        """Input plus output tokens."""
        return self.input_tokens + self.output_tokens

    def __add__(self, other: TokenUsage) -> TokenUsage:
        return TokenUsage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.estimated or other.estimated,
        )

    def to_json(self) -> dict[str, Any]:
        """``{"input_tokens", "output_tokens", "total_tokens", "estimated"}``."""
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "total_tokens": self.total_tokens,
            "estimated": self.estimated,
        }


def _count(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return min(value, MAX_TOKENS_PER_CALL)


def _chars(value: Any) -> int:
    if isinstance(value, str):
        return len(value)
    if value is None:
        return 0
    try:
        return len(json.dumps(value, default=str))
    except (TypeError, ValueError, RecursionError):
        return 0


def estimate_tokens_of(messages: Iterable[Mapping[str, Any]]) -> int:
    """About four characters per token of the messages' content and tool calls."""
    total = 0
    for message in messages:
        total += _chars(message.get("content"))
        if message.get("tool_calls"):
            total += _chars(message["tool_calls"])
    return total // 4


def usage_of(
    reported: Mapping[str, Any] | None,
    messages: Iterable[Mapping[str, Any]],
    output_chars: int,
) -> TokenUsage:
    """The usage of one call: the provider's numbers when usable, else an estimate."""
    if isinstance(reported, Mapping):
        tokens_in = _count(reported.get("prompt_tokens", reported.get("input_tokens")))
        tokens_out = _count(reported.get("completion_tokens", reported.get("output_tokens")))
        if tokens_in is not None and tokens_out is not None:
            return TokenUsage(tokens_in, tokens_out)
        total = _count(reported.get("total_tokens"))
        if tokens_in is not None and total is not None and total >= tokens_in:
            return TokenUsage(tokens_in, min(total - tokens_in, MAX_TOKENS_PER_CALL))
    return TokenUsage(estimate_tokens_of(messages), output_chars // 4, estimated=True)


@dataclass(frozen=True)
class CallUsage:
    """The usage of one model call that returned."""

    purpose: str
    """``turn`` (the model loop), ``compaction``, ``output`` (a structured-output
    re-ask), ``select`` / ``extract`` (the language-aware action flow)."""
    provider: str
    model: str
    usage: TokenUsage

    def to_json(self) -> dict[str, Any]:
        """A JSON-compatible dict."""
        return {
            "purpose": self.purpose,
            "provider": self.provider,
            "model": self.model,
            **self.usage.to_json(),
        }


class TurnUsage(BaseModel):
    """What one turn used (``TurnResult.usage``)."""

    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0
    estimated: bool = False
    """Some call reported no usable usage: its part is an estimate."""
    model_calls: int = 0
    """Model calls started (every attempt, compaction included)."""
    tool_calls: int = 0
    """Tool calls the model asked for that were answered (run, blocked or refused)."""
    calls: list[dict[str, Any]] = Field(default_factory=list)
    """One entry per model call that returned: purpose, provider, model, tokens."""
    session_tokens: int = 0
    """Tokens of the session so far, this turn included."""


@dataclass
class UsageLedger:
    """One turn's usage, and the checks of ``agent.limits`` against it."""

    limits: AgentLimits
    session_tokens: int = 0
    """Tokens the session used before this turn (kept in the transcript record)."""
    total: TokenUsage = field(default_factory=TokenUsage)
    calls: list[CallUsage] = field(default_factory=list)
    model_calls: int = 0
    tool_calls: int = 0

    def record(self, call: CallUsage) -> None:
        """Add one call's usage."""
        self.calls.append(call)
        self.total = self.total + call.usage

    def add_subagent(self, agent_id: str, usage: TurnUsage) -> None:
        """Roll a sub-agent turn's usage into this turn's: its tokens (which count
        against this turn's token limits too) and its model calls, as one ``subagent``
        entry of :attr:`calls` naming the sub-agent."""
        tokens = TokenUsage(usage.input_tokens, usage.output_tokens, usage.estimated)
        self.record(CallUsage("subagent", "subagent", agent_id, tokens))
        self.model_calls += usage.model_calls

    def before_model_call(self) -> None:
        """Raise :class:`UsageLimitReached` when no other model call may start; else
        count this one."""
        limits = self.limits
        turn_tokens = self.total.total_tokens
        if limits.tokens_per_turn is not None and turn_tokens >= limits.tokens_per_turn:
            raise UsageLimitReached(
                f"stopped: this turn used {turn_tokens} tokens, the limit is "
                f"{limits.tokens_per_turn} (agent.limits.tokens_per_turn); raise it or ask "
                "for less"
            )
        session = self.session_tokens + turn_tokens
        if limits.tokens_per_session is not None and session >= limits.tokens_per_session:
            raise UsageLimitReached(
                f"stopped: this session used {session} tokens, the limit is "
                f"{limits.tokens_per_session} (agent.limits.tokens_per_session); start a new "
                "session or raise the limit"
            )
        if (
            limits.model_calls_per_turn is not None
            and self.model_calls >= limits.model_calls_per_turn
        ):
            raise UsageLimitReached(
                f"stopped: this turn made {self.model_calls} model calls, the limit is "
                f"{limits.model_calls_per_turn} (agent.limits.model_calls_per_turn); raise it "
                "or ask for less"
            )
        self.model_calls += 1

    def tool_calls_left(self) -> int | None:
        """How many more tool calls this turn may run (``None``: no limit)."""
        cap = self.limits.tool_calls_per_turn
        return None if cap is None else max(0, cap - self.tool_calls)

    def tool_limit_message(self) -> str:
        """What the turn's error says when the tool-call limit stopped it."""
        return (
            f"stopped: the model asked for more than {self.limits.tool_calls_per_turn} tool "
            "calls in this turn (agent.limits.tool_calls_per_turn); raise it or ask for less"
        )

    def summary(self) -> TurnUsage:
        """The turn's usage as ``TurnResult.usage`` holds it."""
        # model_construct: the values are the ledger's own, already checked (a turn pays
        # for no validation here).
        return TurnUsage.model_construct(
            input_tokens=self.total.input_tokens,
            output_tokens=self.total.output_tokens,
            total_tokens=self.total.total_tokens,
            estimated=self.total.estimated,
            model_calls=self.model_calls,
            tool_calls=self.tool_calls,
            calls=[c.to_json() for c in self.calls],
            session_tokens=self.session_tokens + self.total.total_tokens,
        )
