"""Compaction: summarise the transcript with the model when it passes the token budget.

**How big the transcript is.** The provider's own count when it gave one: after each
model call the runner notes ``prompt_tokens + completion_tokens`` (or ``input_tokens +
output_tokens``) as the size of the transcript up to that response
(:func:`note_usage`, kept with the session so the next turn starts from it); only the
messages added since are estimated (about four characters per token, details stripped).
Without any provider count the whole transcript is estimated. :func:`context_tokens`
says which it was.

**When.** Only when that size passes the threshold: ``agent.context_token_budget``, or,
when only the model's own window is known (``agent.context_window_tokens``), 80 % of it
(room for the reply). Under the threshold nothing happens, and a transcript that is
over it only because of the messages a compaction must keep is not summarised again
(there is nothing older left to summarise).

**What.** ``before_compaction``, then the turn's model summarises all but the latest
``agent.compaction_keep_messages`` messages into one summary message, then
``after_compaction``. The current turn's user message is never summarised away (it and
everything after it are kept verbatim, whatever ``compaction_keep_messages`` says), and a
tool result is never split from its assistant call. The summary call is a governed model
call like any other (``model_call_*`` hooks, the turn's abort signal, deadline, retries
and usage limits: :mod:`~agentplug.agent.calls`). A failed summary leaves the transcript
as it was (the turn goes on; a cancelled turn stops).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from agentplug.agent.calls import candidates, governed_call, scope_of
from agentplug.agent.limits import bound_response
from agentplug.agent.providers.base import ModelRequest
from agentplug.agent.transcript import SessionRecord
from agentplug.agent.turn import Turn, TurnCancelled
from agentplug.agent.usage import UsageLimitReached, estimate_tokens_of
from agentplug.services.toolresults import strip_details

__all__ = [
    "MODEL_WINDOW_SHARE",
    "SUMMARY_PROMPT",
    "compact",
    "context_tokens",
    "estimate_tokens",
    "note_usage",
    "threshold",
]

log = logging.getLogger("agentplug.agent")

SUMMARY_PROMPT = (
    "Summarise the conversation so far for your own later reference: the user's goals, "
    "facts and decisions, open questions. Be brief and do not address the user."
)
MODEL_WINDOW_SHARE = 0.8
"""Share of the model's window the transcript may fill before compaction, when no
``context_token_budget`` is configured."""
_MAX_COUNT = 100_000_000  # a provider count past this is no real count: ignored


def estimate_tokens(messages: Iterable[dict[str, Any]]) -> int:
    """A cheap token estimate: characters of content and tool calls divided by four (the
    estimate usage accounting makes of a call the provider reported nothing for)."""
    return estimate_tokens_of(messages)


def _count(usage: Mapping[str, Any], *keys: str) -> int | None:
    for key in keys:
        value = usage.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < _MAX_COUNT:
            return value
    return None


def note_usage(record: SessionRecord, usage: Mapping[str, Any] | None) -> None:
    """Note the provider's count of the transcript as it stands after a model call (its
    prompt plus its response); a response without a usable count forgets the old one."""
    prompt = _count(usage, "prompt_tokens", "input_tokens") if usage else None
    completion = _count(usage, "completion_tokens", "output_tokens") if usage else None
    if prompt is None:
        record.context_tokens = record.context_messages = None
        return
    record.context_tokens = prompt + (completion or 0)
    record.context_messages = len(record.messages)


def context_tokens(record: SessionRecord) -> tuple[int, str]:
    """The transcript's size in tokens and how it is known: ``provider`` (the last count,
    plus an estimate of what came after it) or ``estimate``."""
    counted, upto = record.context_tokens, record.context_messages
    if counted is not None and upto is not None and upto <= len(record.messages):
        return counted + estimate_tokens(record.messages[upto:]), "provider"
    return estimate_tokens(record.messages), "estimate"


def threshold(turn: Turn) -> int | None:
    """The size past which the transcript is compacted (``None``: no budget is known)."""
    budget = turn.ctx.context_token_budget
    if budget is None:
        return None
    if turn.ctx.context_window_source == "model":
        return int(budget * MODEL_WINDOW_SHARE)
    return budget


def _split_point(messages: list[dict[str, Any]], keep: int, current: int | None) -> int:
    cut = max(0, len(messages) - keep)
    if current is not None:
        cut = min(cut, current)  # the current user message and what follows stay whole
    # Never keep a tool result whose assistant call was summarised away.
    while 0 < cut < len(messages) and messages[cut].get("role") == "tool":
        cut -= 1
    return cut


async def compact(turn: Turn) -> bool:
    """Compact the transcript when it passes the budget; ``True`` when it did."""
    limit = threshold(turn)
    messages = turn.session.messages
    if limit is None:
        return False
    before_tokens, _source = context_tokens(turn.session)
    if before_tokens <= limit:
        return False
    keep = turn.runner.config.compaction_keep_messages
    cut = _split_point(messages, keep, turn.user_index)
    if cut <= 0 or all(m.get("compaction") for m in messages[:cut]):
        return False  # nothing older than what must stay: a summary again would not help
    host = turn.host
    ctx = {
        "agent_id": turn.ctx.agent_id,
        "session_key": turn.session.session_key,
        "session_id": turn.session.session_id,
        "channel": turn.ctx.channel,
    }
    event = {
        "session_key": turn.session.session_key,
        "message_count": len(messages),
        "token_count": before_tokens,
    }
    await host.hooks.before_compaction(event, ctx)
    older = [m for m in strip_details(messages[:cut])]
    limits = turn.runner.config.limits
    request = ModelRequest(
        model=turn.model,
        messages=[{"role": "system", "content": SUMMARY_PROMPT}]
        + [
            {
                "role": "user" if m.get("role") == "tool" else str(m.get("role")),
                "content": str(m.get("content") or ""),
            }
            for m in older
        ],
        max_response_bytes=limits.model_response_bytes,
    )
    try:
        # A governed call: its own model_call_* hooks, the turn's signal, deadline,
        # retries and usage limits (calls.py).
        answer = await governed_call(
            scope_of(turn), candidates(turn), request, purpose="compaction"
        )
        response = answer.response
    except (TurnCancelled, UsageLimitReached):
        raise
    except Exception as exc:  # ProviderError or a provider bug: keep the transcript
        log.warning(
            "compaction of %s failed (%s); transcript kept",
            turn.session.session_key,
            type(exc).__name__,
        )
        await host.hooks.after_compaction(
            {**event, "summary": None},
            ctx,
        )
        return False
    summary = bound_response(response, limits, turn.steps).response.text.strip() or "(no summary)"
    turn.session.messages = [
        {
            "role": "system",
            "content": f"Summary of the earlier conversation: {summary}",
            "compaction": True,
        },
        *messages[cut:],
    ]
    turn.session.summary = summary
    turn.session.context_tokens = turn.session.context_messages = None  # counted anew
    if turn.user_index is not None:
        turn.user_index -= cut - 1
    await host.hooks.after_compaction(
        {
            "session_key": turn.session.session_key,
            "message_count": len(turn.session.messages),
            "token_count": estimate_tokens(turn.session.messages),
            "summary": summary,
        },
        ctx,
    )
    return True
