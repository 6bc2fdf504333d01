"""``agent.limits``: the bounds on what a model sends, and how a response is held to them.

A model is untrusted input. :class:`AgentLimits` is the config section (docs/limits.md
has the table: key, default, what happens when a bound trips). :func:`bound_response`
applies the bounds that concern one model response as soon as the provider returns it,
before any hook or the transcript sees it:

- the reply text is cut at ``reply_chars`` with a visible marker;
- tool calls past ``tool_calls_per_response`` are dropped: they never run, are not kept
  in the transcript and cost no hook; the model reads one note saying how many were
  dropped (:attr:`BoundedResponse.note`, added to the last kept call's result);
- a call whose arguments pass ``tool_argument_bytes`` is refused and its arguments are
  replaced by a short stub, so they are not sent to the model again on every call;
- configured secrets (:mod:`~agentplug.core.redaction`) are scrubbed from the text and
  the tool-call arguments, so an echoed key is neither delivered nor sent to a tool;
- call ids that are empty, too long or already used in the session get a fresh unique id
  and names too long to be a tool's are shortened, so every call id is answered by
  exactly one tool message and hooks can tell the calls of a turn apart by id.

:func:`cut_tool_result` bounds the tool result the model reads (``tool_result_chars``);
the provider bounds the response read from the wire (``model_response_bytes``, carried by
:attr:`~agentplug.agent.providers.base.ModelRequest.max_response_bytes`) and the runner
the duration of one call (``model_call_timeout_s``).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Collection
from dataclasses import dataclass, replace
from typing import TypeVar

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from agentplug.agent.providers.base import ModelResponse, ProviderError, ToolCall
from agentplug.core.redaction import scrub, scrub_data

__all__ = [
    "MAX_CALL_ID_CHARS",
    "MAX_TOOL_NAME_CHARS",
    "AgentLimits",
    "BoundedResponse",
    "bound_response",
    "cut_tool_result",
    "within_deadline",
]

T = TypeVar("T")

MAX_TOOL_NAME_CHARS = 256
"""A longer name in a tool call is no tool's name: it is shortened in the transcript."""
MAX_CALL_ID_CHARS = 256
"""A longer (or empty, or repeated) call id is replaced by a fresh one."""

KIB = 1024
MIB = 1024 * KIB


class AgentLimits(BaseModel):
    """``agent.limits``: bounds on what one model response may bring into a turn."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True
    )

    tool_calls_per_response: int = Field(default=64, ge=1, le=10_000)
    """Tool calls run per model response; the others are answered as refused."""
    tool_argument_bytes: int = Field(default=MIB, ge=2, le=256 * MIB)
    """Bytes of one call's JSON arguments; a larger call is refused and not kept whole."""
    tool_result_chars: int = Field(default=64 * KIB, ge=1, le=256 * MIB)
    """Characters of a tool result the model reads; the rest is cut with a marker."""
    reply_chars: int = Field(default=MIB, ge=1, le=256 * MIB)
    """Characters of the model's text per response (the reply); the rest is cut with a
    marker."""
    model_response_bytes: int = Field(default=16 * MIB, ge=1024, le=1024 * MIB)
    """Bytes of one model response read from the wire; a larger one fails the call."""
    model_call_timeout_s: float = Field(default=600.0, gt=0, le=3600)
    """Total deadline of one model call, streamed or not, whatever the provider."""
    turn_timeout_s: float = Field(default=1800.0, gt=0, le=86_400)
    """The turn's deadline for model calls, counted from the start of the turn: no call or
    retry starts after it, a backoff wait never passes it and a call in flight is cut at
    it."""
    tokens_per_turn: int | None = Field(default=None, ge=1)
    """Tokens (input + output, every model call) a turn may use; no call starts past it."""
    tokens_per_session: int | None = Field(default=None, ge=1)
    """Tokens a session may use over all its turns; no call starts past it."""
    model_calls_per_turn: int | None = Field(default=None, ge=1, le=10_000)
    """Model calls a turn may start (each retry, fallback and compaction call counts)."""
    tool_calls_per_turn: int | None = Field(default=None, ge=1, le=100_000)
    """Tool calls a turn may answer; the calls past it are refused and the turn stops."""


@dataclass(frozen=True)
class BoundedResponse:
    """A model response held to the limits, and the refusal (or ``None``) of each call."""

    response: ModelResponse
    refusals: list[str | None]
    dropped: int = 0
    """Tool calls past ``tool_calls_per_response``: not run, not kept."""

    @property
    def note(self) -> str | None:
        """What the model reads about the dropped calls (``None`` when none were)."""
        if not self.dropped:
            return None
        kept = len(self.response.tool_calls)
        return (
            f"[{self.dropped} more tool call(s) of this response were dropped, not run: at "
            f"most {kept} run per model response (agent.limits.tool_calls_per_response); "
            "call them again in a later response]"
        )


async def within_deadline(awaitable: Awaitable[T], limits: AgentLimits, what: str) -> T:
    """Await one model call (``what`` names it) within ``model_call_timeout_s``.

    Raises a ``timeout`` :class:`ProviderError` naming the key when the deadline passes; a
    ``TimeoutError`` the provider raises on its own is not mistaken for it.
    """
    deadline = asyncio.timeout(limits.model_call_timeout_s)
    try:
        async with deadline:
            return await awaitable
    except TimeoutError:
        if not deadline.expired():
            raise
        raise ProviderError(
            f"{what} did not complete within {limits.model_call_timeout_s:g} s "
            "(agent.limits.model_call_timeout_s); raise it or check the provider",
            kind="timeout",
        ) from None


def _marker(what: str, total: int, kept: int, key: str) -> str:
    return f"\n[{what} truncated: {total} characters, the first {kept} kept (agent.limits.{key})]"


def cut_tool_result(content: str, limits: AgentLimits) -> str:
    """``content`` cut at ``tool_result_chars`` with a marker naming the bound."""
    limit = limits.tool_result_chars
    if len(content) <= limit:
        return content
    return content[:limit] + _marker("tool result", len(content), limit, "tool_result_chars")


def _argument_bytes(call: ToolCall) -> int:
    if call.raw_arguments is not None:
        return len(call.raw_arguments.encode("utf-8", "surrogatepass"))
    try:
        text = json.dumps(dict(call.arguments), separators=(",", ":"), ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        return 0  # not JSON at all: the tool's own validation reports it
    return len(text.encode("utf-8", "surrogatepass"))


def _fresh_id(step: int, index: int, seen: set[str]) -> str:
    candidate, n = f"call_{step}_{index}", 0
    while candidate in seen:
        n += 1
        candidate = f"call_{step}_{index}_{n}"
    return candidate


def bound_response(
    response: ModelResponse, limits: AgentLimits, step: int, taken: Collection[str] = ()
) -> BoundedResponse:
    """Hold ``response`` to ``limits`` (see the module docstring). ``taken``: the call ids
    already answered in the session; ``step`` seeds the fresh ids."""
    # A configured secret the model echoes (a server repeating its Authorization header)
    # reaches no hook, transcript, reply or tool: scrubbed before anything sees it.
    text = scrub(response.text)
    if len(text) > limits.reply_chars:
        text = text[: limits.reply_chars] + _marker(
            "reply", len(text), limits.reply_chars, "reply_chars"
        )
    calls: list[ToolCall] = []
    refusals: list[str | None] = []
    seen: set[str] = set(taken)
    cap = limits.tool_calls_per_response
    kept = response.tool_calls[:cap]
    dropped = len(response.tool_calls) - len(kept) + response.dropped_tool_calls
    for index, call in enumerate(kept):
        call_id = call.id
        if not call_id or len(call_id) > MAX_CALL_ID_CHARS or call_id in seen:
            call_id = _fresh_id(step, index, seen)
        seen.add(call_id)
        name = call.name
        if len(name) > MAX_TOOL_NAME_CHARS:
            name = f"{name[:64]}...({len(name)} characters)"
        refusal: str | None = None
        raw = None if call.raw_arguments is None else scrub(call.raw_arguments)
        arguments = scrub_data(call.arguments)
        size = _argument_bytes(call)
        if size > limits.tool_argument_bytes:
            refusal = (
                f"tool call refused: its arguments are {size} bytes, over the "
                f"{limits.tool_argument_bytes}-byte limit (agent.limits.tool_argument_bytes); "
                "call it again with smaller arguments"
            )
            arguments = {"omitted": f"{size} bytes of arguments over the limit"}
            raw = None
        calls.append(replace(call, id=call_id, name=name, arguments=arguments, raw_arguments=raw))
        refusals.append(refusal)
    bounded = replace(response, text=text, tool_calls=calls, dropped_tool_calls=0)
    return BoundedResponse(bounded, refusals, dropped)
