"""Compaction: summarise the transcript with the model when it passes the token budget.

When ``agent.context_token_budget`` is set and the transcript's estimated size (about four
characters per token, details stripped) passes it, the runner dispatches
``before_compaction``, asks the turn's model for a summary of all but the latest
``agent.compaction_keep_messages`` messages, replaces them with one summary message, and
dispatches ``after_compaction``. The summary call is a governed model call like any
other (``model_call_*`` hooks, the turn's abort signal, deadline, retries and usage
limits: :mod:`~agentplug.agent.calls`). A failed summary leaves the transcript as it was
(the turn goes on; a cancelled turn stops). Tool results are never split from their
assistant call.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from agentplug.agent.calls import candidates, governed_call, scope_of
from agentplug.agent.limits import bound_response
from agentplug.agent.providers.base import ModelRequest
from agentplug.agent.turn import Turn, TurnCancelled
from agentplug.agent.usage import UsageLimitReached
from agentplug.services.toolresults import strip_details

__all__ = ["SUMMARY_PROMPT", "compact", "estimate_tokens"]

log = logging.getLogger("agentplug.agent")

SUMMARY_PROMPT = (
    "Summarise the conversation so far for your own later reference: the user's goals, "
    "facts and decisions, open questions. Be brief and do not address the user."
)


def estimate_tokens(messages: Iterable[dict[str, Any]]) -> int:
    """A cheap token estimate: characters of content and tool calls divided by four."""
    total = 0
    for message in strip_details(messages):
        total += len(str(message.get("content") or ""))
        if message.get("tool_calls"):
            total += len(str(message["tool_calls"]))
    return total // 4


def _split_point(messages: list[dict[str, Any]], keep: int) -> int:
    cut = max(0, len(messages) - keep)
    # Never keep a tool result whose assistant call was summarised away.
    while 0 < cut < len(messages) and messages[cut].get("role") == "tool":
        cut -= 1
    return cut


async def compact(turn: Turn) -> bool:
    """Compact the transcript when it passes the budget; ``True`` when it did."""
    budget = turn.ctx.context_token_budget
    messages = turn.session.messages
    if budget is None or estimate_tokens(messages) <= budget:
        return False
    cut = _split_point(messages, turn.runner.config.compaction_keep_messages)
    if cut <= 0:
        return False
    host = turn.host
    ctx = {
        "agent_id": turn.ctx.agent_id,
        "session_key": turn.session.session_key,
        "session_id": turn.session.session_id,
        "channel": turn.ctx.channel,
    }
    before_tokens = estimate_tokens(messages)
    event = {
        "session_key": turn.session.session_key,
        "message_count": len(messages),
        "token_count": before_tokens,
    }
    await host.dispatch("before_compaction", event, ctx)
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
        await host.dispatch(
            "after_compaction",
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
    await host.dispatch(
        "after_compaction",
        {
            "session_key": turn.session.session_key,
            "message_count": len(turn.session.messages),
            "token_count": estimate_tokens(turn.session.messages),
            "summary": summary,
        },
        ctx,
    )
    return True
