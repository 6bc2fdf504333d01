"""The programmatic resolver: approvals answered by a host, an API or chat commands."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agentplug_hookspecs import current_handler_context

from agentplug.services.approvals.models import (
    Answer,
    PendingApproval,
    ResolveReply,
    clean_text,
    decided_reply,
    parse_decision,
)
from agentplug.services.approvals.shared import list_pending, resolve_pending, unknown_reply
from agentplug.store import StateStore, StateStoreUnavailable

__all__ = ["ProgrammaticResolver", "ResolveReply"]

log = logging.getLogger("agentplug.approvals")
_KEEP_SETTLED = 1_000


@dataclass
class _Waiting:
    pending: PendingApproval
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[Answer]
    decided: bool = False


def decider(by: str | None) -> str:
    """Who a resolution made now is recorded as: ``plugin:<id>`` while a plugin's handler
    (or an asyncio task it started) runs, whatever it passed; else ``by``, else ``host``.
    A thread a plugin starts carries no handler context: there ``by`` is recorded as
    given."""
    plugin_id = current_handler_context().plugin_id
    if plugin_id:
        return f"plugin:{plugin_id}"
    return by or "host"


class ProgrammaticResolver:
    """Resolver for hosts, APIs and chat commands.

    The broker registers each approval here (:meth:`ask`); the host lists them with
    :attr:`pending` (each with its id) and answers with :meth:`resolve` or
    :meth:`handle_command`. Both are synchronous, thread-safe and return a
    :class:`ResolveReply` whose message is fit to show to the person (unknown id, bad
    decision word, decision not offered, already resolved). A rejected answer leaves the
    approval pending so the person can try again. ``on_pending`` (optional) is called
    with each new :class:`PendingApproval` so a chat host can post it.

    Each decision is recorded with who made it: ``by`` names the entrance (``api``,
    ``cli``, ``mcp``...; :meth:`handle_command` is ``chat``, a bare :meth:`resolve`
    ``host``), and a call made from a plugin's handler is ``plugin:<id>`` whatever it
    says. An answer to an approval already settled (decided, timed out, cancelled) is
    refused with who settled it and when.
    """

    def __init__(self, *, on_pending: Callable[[PendingApproval], Any] | None = None) -> None:
        self._waiting: dict[str, _Waiting] = {}
        self._settled: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self._lock = threading.Lock()
        self.on_pending = on_pending
        self.store: StateStore | None = None
        """Set by a shared :class:`~agentplug.services.approvals.ApprovalBroker`: then
        :meth:`resolve` and :meth:`describe_pending` go through the store, so an approval
        pending on another gateway is listed and decided here too (exactly once)."""

    @property
    def pending(self) -> list[PendingApproval]:
        """Approvals awaiting a decision, oldest first."""
        with self._lock:
            return [w.pending for w in self._waiting.values() if not w.decided]

    async def ask(self, pending: PendingApproval) -> Answer:
        loop = asyncio.get_running_loop()
        waiting = _Waiting(pending, loop, loop.create_future())
        with self._lock:
            self._waiting[pending.id] = waiting
        try:
            if self.on_pending is not None:
                try:
                    returned = self.on_pending(pending)
                    if inspect.isawaitable(returned):
                        await returned
                except Exception as exc:
                    log.warning("on_pending callback raised %s", type(exc).__name__)
            return await waiting.future
        finally:
            with self._lock:
                self._waiting.pop(pending.id, None)

    def resolve(self, approval_id: str, decision: str, *, by: str | None = None) -> ResolveReply:
        """Answer approval ``approval_id`` with ``decision`` (aliases accepted), decided
        ``by`` the named entrance (see the class docstring)."""
        who = decider(by)
        if self.store is not None:
            return self._resolve_shared(self.store, approval_id, decision, who)
        chosen = parse_decision(decision) if isinstance(decision, str) else None
        with self._lock:
            settled = self._settled.get(approval_id)
            if settled is not None:
                return decided_reply(approval_id, settled)
            waiting = self._waiting.get(approval_id)
            if waiting is None or waiting.future.done():
                known = [w.pending.id for w in self._waiting.values() if not w.decided]
                return unknown_reply(approval_id, known)
            offered = waiting.pending.allowed_decisions
            if chosen is None:
                return ResolveReply(
                    False,
                    f"{decision!r} is not a decision; answer one of {', '.join(offered)}",
                    "invalid",
                )
            if chosen not in offered:
                return ResolveReply(
                    False,
                    f"{chosen!r} was not offered for approval {approval_id!r} "
                    f"({waiting.pending.request.title!r}); offered: {', '.join(offered)}",
                    "invalid",
                )
            waiting.decided = True
            at = time.time()
            self._remember(approval_id, {"resolution": chosen, "by": who, "at": at})
        try:
            waiting.loop.call_soon_threadsafe(_settle, waiting.future, Answer(chosen, who))
        except RuntimeError:  # the loop is closed: the run is gone
            return ResolveReply(
                False, f"approval {approval_id!r} is no longer awaited", "cancelled"
            )
        return ResolveReply(
            True,
            f"approval {approval_id!r} ({waiting.pending.request.title!r}): {chosen}",
            "resolved",
            who,
            at,
        )

    def withdraw(self, approval_id: str) -> Answer | None:
        """Told by the broker that ``approval_id`` timed out: withdraw it, unless an
        answer was accepted in the meantime (it crossed the timeout): then return that
        answer, which the broker adopts, so a caller told "resolved" was told the truth."""
        with self._lock:
            waiting = self._waiting.get(approval_id)
            if waiting is None:
                return None
            if waiting.decided:
                accepted = self._settled.get(approval_id)
                chosen = parse_decision(str(accepted.get("resolution"))) if accepted else None
                if accepted is not None and chosen is not None:
                    return Answer(chosen, str(accepted.get("by") or "host"))
                return None
            waiting.decided = True
            return None

    def settled(self, approval_id: str, resolution: str, by: str | None) -> None:
        """Told by the broker once ``approval_id`` is settled (however it was): a later
        answer is refused with what stands instead of "no pending approval"."""
        with self._lock:
            remembered = self._settled.get(approval_id)
            # What the broker settled stands, whatever this resolver had remembered.
            if remembered is None or remembered.get("resolution") != resolution:
                self._remember(approval_id, {"resolution": resolution, "by": by, "at": time.time()})
            waiting = self._waiting.get(approval_id)
            if waiting is not None:
                waiting.decided = True  # withdrawn from :attr:`pending` at once

    def _remember(self, approval_id: str, decision: dict[str, Any]) -> None:
        self._settled[approval_id] = decision
        while len(self._settled) > _KEEP_SETTLED:
            self._settled.popitem(last=False)

    def _resolve_shared(
        self, store: StateStore, approval_id: str, decision: str, who: str
    ) -> ResolveReply:
        try:
            reply = resolve_pending(store, approval_id, decision, by=who)
        except StateStoreUnavailable as exc:
            return ResolveReply(
                False, f"approval {approval_id!r} was not decided: {exc}", "unavailable"
            )
        chosen = parse_decision(decision)
        with self._lock:
            waiting = self._waiting.get(approval_id)
            if reply.ok and waiting is not None and chosen is not None:
                waiting.decided = True
                # A closed loop: the run is gone; the store decision stands.
                with contextlib.suppress(RuntimeError):
                    waiting.loop.call_soon_threadsafe(_settle, waiting.future, Answer(chosen, who))
        return reply

    def handle_command(self, text: str, *, by: str = "chat") -> ResolveReply:
        """Handle a chat command: ``/approve`` (list), ``/approve <id> <decision>``,
        ``/deny <id>`` (decisions recorded ``by`` ``chat`` unless told otherwise)."""
        parts = text.strip().split()
        if not parts or parts[0].lower() not in {"/approve", "/deny"}:
            return ResolveReply(
                False,
                "usage: /approve [<id> allow-once|allow-always|deny] or /deny <id>",
                "invalid",
            )
        command, args = parts[0].lower(), parts[1:]
        if command == "/deny":
            if len(args) != 1:
                return ResolveReply(False, "usage: /deny <id>", "invalid")
            return self.resolve(args[0], "deny", by=by)
        if not args:
            return ResolveReply(True, self.describe_pending())
        if len(args) != 2:
            return ResolveReply(
                False, "usage: /approve <id> allow-once|allow-always|deny", "invalid"
            )
        return self.resolve(args[0], args[1], by=by)

    def describe_pending(self) -> str:
        """A human-readable list of pending approvals."""
        if self.store is not None:
            try:
                rows = list_pending(self.store)
            except StateStoreUnavailable as exc:
                return f"cannot list pending approvals: {exc}"
        else:
            rows = [p.summary() for p in self.pending]
        if not rows:
            return "no approval is pending"
        lines = ["pending approvals:"]
        for r in rows:
            lines.append(
                f"  {r['id']}  [{r.get('severity')}] {clean_text(str(r.get('title')))} "
                f"(tool {r.get('tool_name')}, plugin {r.get('plugin_id')}); "
                f"answer: /approve {r['id']} {'|'.join(r.get('allowed_decisions') or [])}"
            )
        return "\n".join(lines)


def _settle(future: asyncio.Future[Answer], answer: Answer) -> None:
    if not future.done():
        future.set_result(answer)
