"""The decision and request models of an approval round-trip.

The decision words (:data:`Decision`, :func:`parse_decision`), what a resolver is asked
(:class:`PendingApproval`), the resolver protocols, the broker's result
(:class:`ApprovalVerdict`) and the small helpers the resolvers share (approval ids, the
request's time budget, cleaning text shown to a person).
"""

from __future__ import annotations

import itertools
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal, Protocol

from agentplug_hookspecs import thaw
from agentplug_hookspecs.tools import (
    DEFAULT_APPROVAL_TIMEOUT_MS,
    MAX_APPROVAL_TIMEOUT_MS,
    ApprovalRequest,
    ApprovalResolution,
)

from agentplug.core.redaction import scrub_clipped

__all__ = [
    "Answer",
    "AnyResolver",
    "ApprovalPrompter",
    "ApprovalResolver",
    "ApprovalVerdict",
    "Decision",
    "PendingApproval",
    "ResolveReply",
    "ResolveStatus",
    "VerdictResolution",
    "clean_text",
    "decided_reply",
    "new_approval_id",
    "parse_decision",
]

Decision = Literal["allow-once", "allow-always", "deny"]
VerdictResolution = ApprovalResolution | Literal["no-resolver"]

_DECISION_WORDS: dict[str, Decision] = {
    "allow-once": "allow-once",
    "once": "allow-once",
    "o": "allow-once",
    "allow-always": "allow-always",
    "always": "allow-always",
    "a": "allow-always",
    "deny": "deny",
    "d": "deny",
}
_ids = itertools.count(1)


def parse_decision(text: str) -> Decision | None:
    """``allow-once``/``once``/``o``, ``allow-always``/``always``/``a``, ``deny``/``d``."""
    return _DECISION_WORDS.get(text.strip().lower())


def new_approval_id() -> str:
    """A new approval id such as ``ap3-1f2e3d``."""
    # Short enough to type in a chat, random enough that a stale id typed after a
    # restart never resolves a new approval.
    return f"ap{next(_ids)}-{secrets.token_hex(3)}"


@dataclass(frozen=True)
class PendingApproval:
    """What a resolver is asked to decide."""

    id: str
    tool_name: str
    params: Mapping[str, object]
    request: ApprovalRequest
    metadata: Mapping[str, Any] = field(default_factory=dict)
    """Audit metadata shown to the person, e.g. ``{"exec_env": {...}}`` for ``exec``."""
    run_id: str | None = None
    created_at: float = field(default_factory=time.time)

    @property
    def plugin_id(self) -> str | None:
        """The requesting plugin (stamped by the runtime)."""
        return self.request.plugin_id

    @property
    def allowed_decisions(self) -> list[Decision]:
        """The decisions the person may choose from."""
        return list(self.request.allowed_decisions)

    @property
    def timeout_s(self) -> float:
        """The budget of this approval in seconds."""
        return _timeout_ms(self.request) / 1000

    def summary(self) -> dict[str, Any]:
        """JSON-compatible description (for APIs and chat listings)."""
        return {
            "id": self.id,
            "tool_name": self.tool_name,
            "plugin_id": self.plugin_id,
            "title": self.request.title,
            "description": self.request.description,
            "severity": self.request.severity,
            "allowed_decisions": self.allowed_decisions,
            "timeout_ms": _timeout_ms(self.request),
            "run_id": self.run_id,
            "metadata": thaw(self.metadata),
        }


@dataclass(frozen=True)
class Answer:
    """A decision together with who made it (what a resolver may return instead of the
    bare :data:`Decision`; the broker records ``by``)."""

    decision: Decision
    by: str
    """The entrance it came through: ``api``, ``cli``, ``chat``, ``mcp``, ``terminal``,
    ``scripted``, ``host``, ``plugin:<id>``..."""


class ApprovalResolver(Protocol):
    """Decides pending approvals (a person behind a terminal, chat or API).

    A bare :data:`Decision` is recorded as decided by the resolver's ``by`` attribute
    (else its class name); an :class:`Answer` names the decider itself.
    """

    async def resolve(self, pending: PendingApproval) -> Decision | Answer:
        """Return the person's decision; may take as long as it needs (the broker times out)."""
        ...


class ApprovalPrompter(Protocol):
    """A resolver whose ``resolve`` name serves its host-facing API; the broker calls ``ask``."""

    async def ask(self, pending: PendingApproval) -> Decision | Answer:
        """Return the person's decision (cancelled by the broker on timeout)."""
        ...


AnyResolver = ApprovalResolver | ApprovalPrompter


@dataclass(frozen=True)
class ApprovalVerdict:
    """The result of an approval round-trip."""

    allowed: bool
    resolution: VerdictResolution
    reason: str
    """User-readable; distinct per resolution."""
    approval_id: str | None = None
    grant_id: str | None = None
    """The standing grant that allowed the call, or the one ``allow-always`` created."""
    from_grant: bool = False
    """True when a standing grant answered without asking."""
    decided_by: str | None = None
    """Who decided: the entrance of a person's decision (see :class:`Answer`), ``grant``
    for a standing grant, the broker's gateway (``host:pid``) for a timeout or a
    cancelled run; ``None`` when nothing could decide (no resolver)."""


def _timeout_ms(request: ApprovalRequest) -> int:
    value = request.timeout_ms or DEFAULT_APPROVAL_TIMEOUT_MS
    return max(1, min(int(value), MAX_APPROVAL_TIMEOUT_MS))


def clean_text(text: str, limit: int = 4_000) -> str:
    """Drop control characters (terminal escape injection), secrets, and bound the length."""
    cleaned = "".join(ch if ch.isprintable() or ch in "\n\t" else "?" for ch in text)
    return scrub_clipped(cleaned, limit, "…")


ResolveStatus = Literal[
    "resolved", "unknown", "invalid", "decided", "timed-out", "cancelled", "unavailable"
]
"""What became of a resolution attempt: ``resolved`` (this attempt decided), ``unknown``
(no such approval), ``invalid`` (not a decision, or not offered: still pending),
``decided`` (someone else decided first), ``timed-out``, ``cancelled`` (its run was
cancelled), ``unavailable`` (the state store could not be reached)."""


@dataclass(frozen=True)
class ResolveReply:
    """The answer to a host/chat resolution attempt (``str()`` is the message)."""

    ok: bool
    message: str
    status: ResolveStatus = "resolved"
    by: str | None = None
    """Who decided (this attempt's decider when ``ok``, else whoever decided first)."""
    at: float | None = None
    """When the decision that stands was recorded (epoch seconds)."""

    def __str__(self) -> str:
        return self.message


def iso_time(ts: float) -> str:
    """``ts`` as UTC ``YYYY-MM-DD HH:MM:SS.ssZ`` (how approval messages show times)."""
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M:%S.%fZ")[:-4] + "Z"


def decided_reply(approval_id: str, decision: Mapping[str, Any]) -> ResolveReply:
    """The refusal of a late resolution: who decided ``approval_id`` and when (``decision``
    is a recorded decision: ``resolution``, ``by``, ``at``)."""
    at = float(decision.get("at", 0.0))
    when = iso_time(at)
    by = str(decision.get("by")) if decision.get("by") is not None else None
    resolution = decision.get("resolution")
    if resolution == "timeout":
        message = f"approval {approval_id!r} already timed out at {when}; the tool call was blocked"
        return ResolveReply(False, message, "timed-out", by, at)
    if resolution == "cancelled":
        message = (
            f"approval {approval_id!r} was cancelled at {when} (its run was cancelled); "
            "the tool call was not run"
        )
        return ResolveReply(False, message, "cancelled", by, at)
    message = f"approval {approval_id!r} was already resolved ({resolution} by {by} at {when})"
    return ResolveReply(False, message, "decided", by, at)
