"""The approval broker: runs one approval round-trip (standing grants first).

:class:`ApprovalBroker` asks its resolver within the request's budget, turns the answer
(or a timeout, a cancellation, a missing resolver) into an :class:`ApprovalVerdict`,
remembers ``allow-always`` as a standing grant and notifies ``on_resolution``.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import os
import socket
import time
from collections import deque
from collections.abc import Mapping
from typing import Any, cast

from agentplug_hookspecs import deep_freeze, thaw
from agentplug_hookspecs.tools import ApprovalRequest, ApprovalResolution, ToolCallOutcome

from agentplug.services.approvals.grants import (
    GRANTS_NAMESPACE,
    Grant,
    grant_id_for,
    list_grants,
    revoke_grant,
)
from agentplug.services.approvals.models import (
    Answer,
    AnyResolver,
    ApprovalResolver,
    ApprovalVerdict,
    PendingApproval,
    VerdictResolution,
    new_approval_id,
)
from agentplug.services.approvals.programmatic import ProgrammaticResolver
from agentplug.services.approvals.shared import (
    FEED_CHANNEL,
    channel_for,
    expire_pending,
    publish_pending,
    record_decision,
    stored_decision,
)
from agentplug.store import MemoryStore, StateStore, StateStoreUnavailable

__all__ = ["ApprovalBroker"]

log = logging.getLogger("agentplug.approvals")
_WATCH_SLICE_S = 0.25
_KEEP_CANCELLED_RUNS = 1_000


class ApprovalBroker:
    """Runs approval round-trips for ``before_tool_call`` outcomes.

    ``store`` keeps ``allow-always`` grants (default: an in-memory store). Use an
    :class:`~agentplug.store.SQLiteStore` (e.g. ``host.store``) so grants survive
    restarts.

    ``shared=True`` publishes each pending approval in ``store`` (namespace
    ``approvals.pending``) so that any process sharing the store decides it (another
    gateway, ``agentplug approvals resolve``, the control API, chat ``/approve``); the
    first decision recorded wins, the waiting turn wakes on the store's change channel,
    and a store failure blocks the call (fail closed). Without a local resolver a shared
    broker waits for such a decision (or the timeout) instead of blocking at once.
    """

    def __init__(
        self,
        resolver: AnyResolver | None = None,
        *,
        store: StateStore | None = None,
        shared: bool = False,
    ) -> None:
        self.resolver = resolver
        self.store: StateStore = store if store is not None else MemoryStore()
        self.history: deque[dict[str, Any]] = deque(maxlen=1_000)
        """Audit trail of the latest resolved approvals (JSON-compatible dicts)."""
        self._in_flight: dict[str, tuple[PendingApproval, asyncio.Future[str]]] = {}
        self.shared = shared
        """Publish pending approvals in ``store`` and take decisions from any process
        sharing it (see :mod:`agentplug.services.approvals.shared`)."""
        self.gateway = f"{socket.gethostname()}:{os.getpid()}"
        """Who this broker is in the audit trail (``host:pid``)."""
        self._cancelled_runs: dict[str, None] = {}
        self.use_resolver(resolver)

    def use_resolver(self, resolver: AnyResolver | None) -> None:
        """Answer approvals with ``resolver`` from now on (``None``: nothing local
        answers; a shared broker still takes decisions from the store).

        A :class:`ProgrammaticResolver` of a shared broker lists and decides through the
        store, so approvals pending on other gateways are answered there too.
        """
        self.resolver = resolver
        if self.shared and isinstance(resolver, ProgrammaticResolver):
            resolver.store = self.store

    # -- grants -----------------------------------------------------------------------

    def list_grants(self) -> list[Grant]:
        """Standing ``allow-always`` grants."""
        return list_grants(self.store)

    def revoke_grant(self, grant_id: str) -> bool:
        """Revoke a standing grant; ``True`` when it existed."""
        return revoke_grant(self.store, grant_id)

    def _grant_for(self, tool_name: str, request: ApprovalRequest) -> str | None:
        if "allow-always" not in request.allowed_decisions:
            return None
        grant_id = grant_id_for(request.plugin_id, tool_name, request)
        try:
            stored = self.store.get(GRANTS_NAMESPACE, grant_id)
        except Exception as exc:  # a broken store never allows anything
            log.warning("approval grant lookup failed (%s); asking", type(exc).__name__)
            return None
        if not isinstance(stored, Mapping):
            return None
        # Defence in depth: the stored scope must match, not only the hash.
        if (
            stored.get("plugin_id") != request.plugin_id
            or stored.get("tool_name") != tool_name
            or stored.get("title") != request.title
            or stored.get("severity") != request.severity
        ):
            return None
        return grant_id

    def _remember(self, pending: PendingApproval) -> str | None:
        request = pending.request
        grant = Grant(
            grant_id=grant_id_for(request.plugin_id, pending.tool_name, request),
            plugin_id=request.plugin_id,
            tool_name=pending.tool_name,
            title=request.title,
            severity=request.severity,
            created_at=time.time(),
            approval_id=pending.id,
        )
        try:
            self.store.put(GRANTS_NAMESPACE, grant.grant_id, grant.to_dict())
        except Exception as exc:
            log.warning("could not remember allow-always grant (%s)", type(exc).__name__)
            return None
        return grant.grant_id

    # -- pending / cancellation ---------------------------------------------------------

    @property
    def pending(self) -> list[PendingApproval]:
        """Approvals this broker is waiting on."""
        return [p for p, _ in self._in_flight.values()]

    def cancel(self, approval_id: str) -> bool:
        """Cancel one pending approval (the call is blocked as ``cancelled``)."""
        entry = self._in_flight.get(approval_id)
        if entry is None or entry[1].done():
            return False
        entry[1].get_loop().call_soon_threadsafe(_cancel_signal, entry[1])
        return True

    def cancel_run(self, run_id: str) -> int:
        """Cancel every pending approval of run ``run_id``; return how many.

        The run stays cancelled until :meth:`end_run`: an approval it asks for later (its
        request was on the way) is cancelled at once, never published or left waiting.
        """
        self._cancelled_runs[run_id] = None
        while len(self._cancelled_runs) > _KEEP_CANCELLED_RUNS:
            del self._cancelled_runs[next(iter(self._cancelled_runs))]
        return sum(
            self.cancel(p.id) for p, _ in list(self._in_flight.values()) if p.run_id == run_id
        )

    def end_run(self, run_id: str) -> None:
        """Forget that run ``run_id`` was cancelled (the runner calls it when a turn ends)."""
        self._cancelled_runs.pop(run_id, None)

    def _run_cancelled(self, pending: PendingApproval) -> bool:
        return pending.run_id is not None and pending.run_id in self._cancelled_runs

    # -- the round-trip -----------------------------------------------------------------

    async def decide(
        self,
        tool_name: str,
        outcome: ToolCallOutcome,
        *,
        metadata: Mapping[str, Any] | None = None,
        run_id: str | None = None,
    ) -> ApprovalVerdict:
        """Resolve ``outcome.approval`` (if any) into an allow/block verdict."""
        if outcome.blocked:
            return ApprovalVerdict(False, "deny", outcome.block_reason or "blocked")
        request = outcome.approval
        if request is None:
            return ApprovalVerdict(True, "allow-once", "no approval required")
        return await self.request(
            tool_name, outcome.params, request, metadata=metadata, run_id=run_id
        )

    async def request(
        self,
        tool_name: str,
        params: Mapping[str, object],
        request: ApprovalRequest,
        *,
        metadata: Mapping[str, Any] | None = None,
        run_id: str | None = None,
    ) -> ApprovalVerdict:
        """Ask for one approval (standing grants first); notify ``on_resolution``."""
        approval_id = new_approval_id()
        while approval_id in self._in_flight:
            approval_id = new_approval_id()
        # Read-only copies: whatever renders or answers the request cannot change what
        # runs (the caller keeps its own parameters) or what the audit trail says.
        pending = PendingApproval(
            approval_id,
            tool_name,
            deep_freeze(dict(params)),
            request,
            deep_freeze(dict(metadata or {})),
            run_id,
        )
        grant_id = self._grant_for(tool_name, request)
        if grant_id is not None:
            verdict = ApprovalVerdict(
                True,
                "allow-always",
                f"{request.title!r} allowed by standing grant {grant_id} "
                f"(revoke with `agentplug approvals revoke {grant_id}`)",
                approval_id,
                grant_id,
                from_grant=True,
                decided_by="grant",
            )
        else:
            try:
                verdict = await self._round_trip(pending)
            except asyncio.CancelledError:
                self._record(pending, "cancelled", False, by=self.gateway)
                await _notify(request, "cancelled")
                raise
            if verdict.resolution == "allow-always":
                verdict = ApprovalVerdict(
                    True,
                    "allow-always",
                    verdict.reason,
                    approval_id,
                    self._remember(pending),
                    decided_by=verdict.decided_by,
                )
        self._record(
            pending, verdict.resolution, verdict.allowed, verdict.grant_id, by=verdict.decided_by
        )
        await _notify(request, _callback_resolution(verdict.resolution))
        return verdict

    def _record(
        self,
        pending: PendingApproval,
        resolution: str,
        allowed: bool,
        grant_id: str | None = None,
        *,
        by: str | None,
    ) -> None:
        # A late answer to a settled approval is refused with what stands (who, when).
        settled = getattr(self.resolver, "settled", None)
        if callable(settled):
            try:
                settled(pending.id, resolution, by)
            except Exception as exc:
                log.warning("the resolver's settled() raised %s", type(exc).__name__)
        self.history.append(
            {
                "approval_id": pending.id,
                "tool_name": pending.tool_name,
                "plugin_id": pending.plugin_id,
                "title": pending.request.title,
                "severity": pending.request.severity,
                "resolution": resolution,
                "allowed": allowed,
                "grant_id": grant_id,
                "run_id": pending.run_id,
                "metadata": thaw(pending.metadata),
                "by": by,
                "at": time.time(),
            }
        )
        self._feed_changed()  # after the history holds it

    async def _round_trip(self, pending: PendingApproval) -> ApprovalVerdict:
        request = pending.request
        aid = pending.id
        who = request.plugin_id or "a plugin"
        resolver = self.resolver
        if resolver is None and not self.shared:
            return ApprovalVerdict(
                False,
                "no-resolver",
                f"{request.title!r} needs approval (asked by {who}) but no approver is "
                "connected; the tool call was not run",
                aid,
            )
        if self._run_cancelled(pending):
            return self._verdict(pending, "cancelled", self.gateway)
        timeout_s = pending.timeout_s
        loop = asyncio.get_running_loop()
        cancel_signal: asyncio.Future[str] = loop.create_future()
        waits: list[asyncio.Future[Any]] = [cancel_signal]
        watch: asyncio.Future[Any] | None = None
        if self.shared:
            try:
                seen = await asyncio.to_thread(self._publish, pending)
            except StateStoreUnavailable as exc:
                return _unavailable(pending, exc)
            watch = asyncio.ensure_future(self._watch(aid, seen))
            waits.append(watch)
        task: asyncio.Future[Any] | None = None
        if resolver is not None:
            ask = getattr(resolver, "ask", None)
            if not callable(ask):
                ask = cast(ApprovalResolver, resolver).resolve
            task = asyncio.ensure_future(ask(pending))
            waits.append(task)
        self._in_flight[aid] = (pending, cancel_signal)
        self._feed_changed()
        if self._run_cancelled(pending):  # cancelled while the request was being published
            _cancel_signal(cancel_signal)
        try:
            done, _ = await asyncio.wait(
                waits, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED
            )
        except asyncio.CancelledError:
            for fut in waits[1:]:
                _abandon(fut)
            self._settle_shared(aid, "cancelled", self.gateway)
            raise
        finally:
            self._in_flight.pop(aid, None)
            if not cancel_signal.done():
                cancel_signal.cancel()
        # Asked before the resolver's wait is abandoned (that ends its future): an answer
        # accepted just as the wait timed out is the decision, not a timeout.
        crossed = self._accepted_meanwhile(aid) if not done else None
        for fut in waits[1:]:
            if fut not in done:
                _abandon(fut)
        if crossed is not None:
            return self._local_answer(pending, crossed)
        if watch is not None and watch in done:
            failure = watch.exception() if not watch.cancelled() else asyncio.CancelledError()
            if failure is not None:
                return _unavailable(pending, failure)
            found = watch.result()
            return self._verdict(pending, str(found.get("resolution")), found.get("by"))
        if task is not None and task in done:
            return self._local_answer(pending, task)
        word = "cancelled" if cancel_signal in done else "timeout"
        try:
            stands = self._settle_shared(aid, word, self.gateway, strict=True)
        except StateStoreUnavailable as exc:
            return _unavailable(pending, exc)
        # A timeout adopts a decision another gateway recorded first; a cancelled run
        # stays cancelled whatever was decided meanwhile (it must not go on to the tool).
        if word == "cancelled":
            return self._verdict(pending, word, self.gateway)
        return self._verdict(pending, str(stands["resolution"]), stands.get("by"))

    def _accepted_meanwhile(self, approval_id: str) -> asyncio.Future[Any] | None:
        """The answer the resolver accepted while the wait was timing out (a resolved
        future), after withdrawing the approval from it; ``None`` when there is none."""
        withdraw = getattr(self.resolver, "withdraw", None)
        if not callable(withdraw):
            return None
        try:
            answer = withdraw(approval_id)
        except Exception as exc:
            log.warning("the resolver's withdraw() raised %s", type(exc).__name__)
            return None
        if answer is None:
            return None
        crossed: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        crossed.set_result(answer)
        return crossed

    def _local_answer(self, pending: PendingApproval, task: asyncio.Future[Any]) -> ApprovalVerdict:
        request = pending.request
        aid = pending.id
        exc = task.exception() if not task.cancelled() else asyncio.CancelledError()
        if exc is not None:
            log.warning("approval resolver failed (%s); denying", type(exc).__name__)
            self._settle_shared(aid, "deny", self.gateway)
            return ApprovalVerdict(
                False,
                "deny",
                f"approval for {request.title!r} could not be obtained (the approver "
                "failed); denied",
                aid,
                decided_by=self.gateway,
            )
        decision, by = _answer_of(task.result(), self.resolver)
        if decision not in request.allowed_decisions:
            self._settle_shared(aid, "deny", by)
            return ApprovalVerdict(
                False,
                "deny",
                f"decision {decision!r} was not offered for {request.title!r} (offered: "
                f"{', '.join(request.allowed_decisions)}); denied",
                aid,
                decided_by=by,
            )
        try:
            stands = self._settle_shared(aid, str(decision), by, strict=True)
        except StateStoreUnavailable as lost:
            return _unavailable(pending, lost)
        return self._verdict(pending, str(stands["resolution"]), stands.get("by"))

    def _settle_shared(
        self, approval_id: str, word: str, by: str, *, strict: bool = False
    ) -> dict[str, Any]:
        """Record ``word`` decided ``by`` in the store (shared brokers); return the decision
        that stands (``resolution``, ``by``, ``at``).

        ``strict``: a store failure raises (the caller fails closed); otherwise it is
        only logged (the outcome blocks the call anyway).
        """
        mine = {"resolution": word, "by": by, "at": time.time()}
        if not self.shared:
            return mine
        try:
            _, stands = record_decision(self.store, approval_id, word, by=by, gateway=self.gateway)
        except StateStoreUnavailable:
            if strict:
                raise
            log.warning("could not record approval %s as %s in the store", approval_id, word)
            return mine
        return stands

    def _feed_changed(self) -> None:
        """Tell watchers of :data:`FEED_CHANNEL` that this broker's approvals changed (a
        shared broker's store rows notify it themselves)."""
        if self.shared:
            return
        try:
            self.store.notify(FEED_CHANNEL)
        except Exception as exc:  # a watcher missing one change must not fail the call
            log.warning("could not notify the approvals feed (%s)", type(exc).__name__)

    def _publish(self, pending: PendingApproval) -> int:
        """Publish ``pending``; return its channel's version before. Timeouts of
        approvals whose gateway died (no one left to time them out) fire here first."""
        try:
            expire_pending(self.store, by=self.gateway)
        except StateStoreUnavailable:
            raise
        except Exception as exc:  # sweeping is housekeeping: never block the new request
            log.warning("could not expire stale approvals: %s", exc)
        seen = self.store.version(channel_for(pending.id))
        publish_pending(self.store, pending, gateway=self.gateway)
        return seen

    async def _watch(self, approval_id: str, seen: int) -> dict[str, Any]:
        """Wait for a decision on ``approval_id`` recorded by any process."""
        channel = channel_for(approval_id)
        while True:
            # In a thread: a store retrying a lost connection must not stall the loop.
            found = await asyncio.to_thread(stored_decision, self.store, approval_id)
            if found is not None:
                return found
            seen = await asyncio.to_thread(self.store.wait_change, channel, seen, _WATCH_SLICE_S)

    def _verdict(self, pending: PendingApproval, word: str, by: Any) -> ApprovalVerdict:
        request = pending.request
        aid = pending.id
        decided_by = str(by) if by is not None else None
        if word == "timeout":
            return ApprovalVerdict(
                False,
                "timeout",
                f"approval for {request.title!r} was not answered within "
                f"{pending.timeout_s:g} s; the tool call was not run",
                aid,
                decided_by=decided_by,
            )
        if word == "cancelled":
            return ApprovalVerdict(
                False,
                "cancelled",
                f"the run was cancelled while {request.title!r} awaited approval; "
                "the tool call was not run",
                aid,
                decided_by=decided_by,
            )
        if word == "deny":
            return ApprovalVerdict(
                False,
                "deny",
                f"{request.title!r} was denied by the approver",
                aid,
                decided_by=decided_by,
            )
        if word not in request.allowed_decisions or word not in ("allow-once", "allow-always"):
            return ApprovalVerdict(
                False,
                "deny",
                f"decision {word!r} was not offered for {request.title!r} (offered: "
                f"{', '.join(request.allowed_decisions)}); denied",
                aid,
                decided_by=decided_by,
            )
        resolution: VerdictResolution = "allow-always" if word == "allow-always" else "allow-once"
        return ApprovalVerdict(
            True, resolution, f"{request.title!r} approved ({word})", aid, decided_by=decided_by
        )


def _answer_of(result: Any, resolver: Any) -> tuple[Any, str]:
    """A resolver's result as ``(decision, by)``: an :class:`Answer` names its decider; a
    bare decision is the resolver's (its ``by`` attribute, else its class name)."""
    if isinstance(result, Answer):
        return result.decision, result.by
    label = getattr(resolver, "by", None)
    return result, label if isinstance(label, str) and label else type(resolver).__name__


def _unavailable(pending: PendingApproval, exc: BaseException) -> ApprovalVerdict:
    log.warning("approval %s: state store unavailable (%s); blocking", pending.id, exc)
    return ApprovalVerdict(
        False,
        "deny",
        f"approval for {pending.request.title!r} could not be decided: the state store is "
        f"unavailable ({exc}); the tool call was blocked",
        pending.id,
    )


def _cancel_signal(future: asyncio.Future[str]) -> None:
    if not future.done():
        future.set_result("cancelled")


def _abandon(task: asyncio.Future[Any]) -> None:
    task.cancel()
    task.add_done_callback(_swallow)


def _swallow(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()


def _callback_resolution(resolution: VerdictResolution) -> ApprovalResolution:
    # ``on_resolution`` takes the typed union; a missing approver blocks like a deny.
    return "deny" if resolution == "no-resolver" else resolution


async def _notify(request: ApprovalRequest, resolution: ApprovalResolution) -> None:
    callback = request.on_resolution
    if callback is None:
        return
    try:
        returned = callback(resolution)
        if inspect.isawaitable(returned):
            await returned
    except Exception as exc:  # failures of on_resolution are only logged
        log.warning("on_resolution of %s raised %s", request.plugin_id, type(exc).__name__)
