"""Approval of tool calls that a ``before_tool_call`` handler (or policy) asked to approve.

The broker asks a resolver (terminal prompt, chat ``/approve`` command, API, test
double) and waits within the request's budget (``timeout_ms``; default 120 s, at most
600 s). Only an *offered* ``allow-once`` or ``allow-always`` lets the call run; deny,
timeout, a missing resolver and a cancelled run each block with their own
user-readable reason. ``on_resolution`` is called with the resolution (``allow-once``,
``allow-always``, ``deny``, ``timeout``, ``cancelled``); its failures are only logged.

Resolvers:

* :class:`TerminalResolver`: prints the request to a stream and reads the answer
  (``allow-once``/``once``/``o``, ``allow-always``/``always``/``a``, ``deny``/``d``);
* :class:`ProgrammaticResolver`: for hosts and chat: pending approvals are listed with
  ids and resolved with :meth:`ProgrammaticResolver.resolve` or
  :meth:`ProgrammaticResolver.handle_command` (``/approve <id> allow-once``);
* :class:`ScriptedResolver`: tests and scenarios.

**Standing grants.** ``allow-always`` is remembered in the state store (namespace
``approvals.grants``). A grant is keyed by its *scope*: the requesting plugin id (as
stamped by the runtime, never what the plugin wrote), the tool name, the request
``title`` and ``severity`` (see :func:`grant_id_for`). The same request later resolves
without asking; a request with another title, a higher/lower severity, another tool or
from another plugin asks again. The description is deliberately *not* part of the
scope (it usually embeds the call's arguments, which would make ``allow-always``
useless). A grant applies only when the new request still offers ``allow-always``.
Grants survive a restart with :class:`~agentplug.store.SQLiteStore`; list and revoke
them with :meth:`ApprovalBroker.list_grants` / :meth:`ApprovalBroker.revoke_grant` or
``agentplug approvals list|revoke``.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import inspect
import itertools
import json
import logging
import secrets
import sys
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TextIO, cast

from agentplug_hookspecs import deep_freeze, thaw
from agentplug_hookspecs.tools import (
    DEFAULT_APPROVAL_TIMEOUT_MS,
    MAX_APPROVAL_TIMEOUT_MS,
    ApprovalRequest,
    ApprovalResolution,
    ToolCallOutcome,
)

from agentplug.store import MemoryStore, StateStore

__all__ = [
    "GRANTS_NAMESPACE",
    "ApprovalBroker",
    "ApprovalPrompter",
    "ApprovalResolver",
    "ApprovalVerdict",
    "Decision",
    "Grant",
    "PendingApproval",
    "ProgrammaticResolver",
    "ResolveReply",
    "ScriptedResolver",
    "TerminalResolver",
    "grant_id_for",
    "list_grants",
    "parse_decision",
    "revoke_grant",
]

log = logging.getLogger("agentplug.approvals")

Decision = Literal["allow-once", "allow-always", "deny"]
VerdictResolution = ApprovalResolution | Literal["no-resolver"]

GRANTS_NAMESPACE = "approvals.grants"
"""State-store namespace of standing ``allow-always`` grants."""

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


def _new_approval_id() -> str:
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


class ApprovalResolver(Protocol):
    """Decides pending approvals (a person behind a terminal, chat or API)."""

    async def resolve(self, pending: PendingApproval) -> Decision:
        """Return the person's decision; may take as long as it needs (the broker times out)."""
        ...


class ApprovalPrompter(Protocol):
    """A resolver whose ``resolve`` name serves its host-facing API; the broker calls ``ask``."""

    async def ask(self, pending: PendingApproval) -> Decision:
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


@dataclass(frozen=True)
class Grant:
    """A standing ``allow-always`` decision."""

    grant_id: str
    plugin_id: str | None
    tool_name: str
    title: str
    severity: str
    created_at: float
    approval_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "grant_id": self.grant_id,
            "plugin_id": self.plugin_id,
            "tool_name": self.tool_name,
            "title": self.title,
            "severity": self.severity,
            "created_at": self.created_at,
            "approval_id": self.approval_id,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Grant:
        return cls(
            grant_id=str(data["grant_id"]),
            plugin_id=data.get("plugin_id"),
            tool_name=str(data.get("tool_name", "")),
            title=str(data.get("title", "")),
            severity=str(data.get("severity", "info")),
            created_at=float(data.get("created_at", 0.0)),
            approval_id=data.get("approval_id"),
        )


def grant_id_for(plugin_id: str | None, tool_name: str, request: ApprovalRequest) -> str:
    """The stable grant id (scope key) of a request.

    ``grant-`` + the first 24 hex digits of SHA-256 over the JSON array
    ``["v1", plugin_id, tool_name, title, severity]``. The plugin id is the one the
    runtime stamped, so a plugin cannot borrow another plugin's grant.
    """
    scope = json.dumps(
        ["v1", plugin_id or "", tool_name, request.title, request.severity],
        ensure_ascii=False,
        separators=(",", ":"),
    )
    return "grant-" + hashlib.sha256(scope.encode("utf-8")).hexdigest()[:24]


def list_grants(store: StateStore) -> list[Grant]:
    """Every standing grant in ``store`` (sorted by creation time)."""
    grants = []
    for _, value in store.items(GRANTS_NAMESPACE):
        if isinstance(value, Mapping) and "grant_id" in value:
            try:
                grants.append(Grant.from_dict(value))
            except (TypeError, ValueError, KeyError):
                continue
    return sorted(grants, key=lambda g: (g.created_at, g.grant_id))


def revoke_grant(store: StateStore, grant_id: str) -> bool:
    """Remove a grant; ``True`` when it existed."""
    return store.delete(GRANTS_NAMESPACE, grant_id)


def _timeout_ms(request: ApprovalRequest) -> int:
    value = request.timeout_ms or DEFAULT_APPROVAL_TIMEOUT_MS
    return max(1, min(int(value), MAX_APPROVAL_TIMEOUT_MS))


# -- resolvers ---------------------------------------------------------------------------


class ScriptedResolver:
    """Test/scenario resolver: answers from a script, per tool name or in order."""

    def __init__(
        self,
        decisions: Iterable[Decision] | Mapping[str, Decision] = (),
        *,
        default: Decision | None = None,
        never_answer: bool = False,
    ) -> None:
        self._by_tool = dict(decisions) if isinstance(decisions, Mapping) else {}
        self._queue = [] if isinstance(decisions, Mapping) else list(decisions)
        self._default = default
        self._never = never_answer
        self.asked: list[PendingApproval] = []
        """Every approval this resolver was asked, in order."""

    async def resolve(self, pending: PendingApproval) -> Decision:
        self.asked.append(pending)
        if self._never:
            await asyncio.Event().wait()
        if pending.tool_name in self._by_tool:
            decision: Decision = self._by_tool[pending.tool_name]
            return decision
        if self._queue:
            return self._queue.pop(0)
        if self._default is not None:
            return self._default
        raise LookupError(f"no scripted decision for approval of tool {pending.tool_name!r}")


@dataclass(frozen=True)
class ResolveReply:
    """The answer to a host/chat resolution attempt (``str()`` is the message)."""

    ok: bool
    message: str

    def __str__(self) -> str:
        return self.message


@dataclass
class _Waiting:
    pending: PendingApproval
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[Decision]
    decided: bool = False


class ProgrammaticResolver:
    """Resolver for hosts, APIs and chat commands.

    The broker registers each approval here (:meth:`ask`); the host lists them with
    :attr:`pending` (each with its id) and answers with :meth:`resolve` or
    :meth:`handle_command`. Both are synchronous, thread-safe and return a
    :class:`ResolveReply` whose message is fit to show to the person (unknown id, bad
    decision word, decision not offered, already resolved). A rejected answer leaves the
    approval pending so the person can try again. ``on_pending`` (optional) is called
    with each new :class:`PendingApproval` so a chat host can post it.
    """

    def __init__(self, *, on_pending: Callable[[PendingApproval], Any] | None = None) -> None:
        self._waiting: dict[str, _Waiting] = {}
        self._lock = threading.Lock()
        self.on_pending = on_pending

    @property
    def pending(self) -> list[PendingApproval]:
        """Approvals awaiting a decision, oldest first."""
        with self._lock:
            return [w.pending for w in self._waiting.values() if not w.decided]

    async def ask(self, pending: PendingApproval) -> Decision:
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

    def resolve(self, approval_id: str, decision: str) -> ResolveReply:
        """Answer approval ``approval_id`` with ``decision`` (aliases accepted)."""
        chosen = parse_decision(decision) if isinstance(decision, str) else None
        with self._lock:
            waiting = self._waiting.get(approval_id)
            if waiting is None or waiting.future.done():
                known = ", ".join(w.pending.id for w in self._waiting.values() if not w.decided)
                return ResolveReply(
                    False,
                    f"no pending approval with id {approval_id!r}"
                    + (f"; pending: {known}" if known else "; nothing is pending"),
                )
            if waiting.decided:
                return ResolveReply(False, f"approval {approval_id!r} was already resolved")
            offered = waiting.pending.allowed_decisions
            if chosen is None:
                return ResolveReply(
                    False,
                    f"{decision!r} is not a decision; answer one of {', '.join(offered)}",
                )
            if chosen not in offered:
                return ResolveReply(
                    False,
                    f"{chosen!r} was not offered for approval {approval_id!r} "
                    f"({waiting.pending.request.title!r}); offered: {', '.join(offered)}",
                )
            waiting.decided = True
        try:
            waiting.loop.call_soon_threadsafe(_settle, waiting.future, chosen)
        except RuntimeError:  # the loop is closed: the run is gone
            return ResolveReply(False, f"approval {approval_id!r} is no longer awaited")
        return ResolveReply(
            True, f"approval {approval_id!r} ({waiting.pending.request.title!r}): {chosen}"
        )

    def handle_command(self, text: str) -> ResolveReply:
        """Handle a chat command: ``/approve`` (list), ``/approve <id> <decision>``,
        ``/deny <id>``."""
        parts = text.strip().split()
        if not parts or parts[0].lower() not in {"/approve", "/deny"}:
            return ResolveReply(
                False, "usage: /approve [<id> allow-once|allow-always|deny] or /deny <id>"
            )
        command, args = parts[0].lower(), parts[1:]
        if command == "/deny":
            if len(args) != 1:
                return ResolveReply(False, "usage: /deny <id>")
            return self.resolve(args[0], "deny")
        if not args:
            return ResolveReply(True, self.describe_pending())
        if len(args) != 2:
            return ResolveReply(False, "usage: /approve <id> allow-once|allow-always|deny")
        return self.resolve(args[0], args[1])

    def describe_pending(self) -> str:
        """A human-readable list of pending approvals."""
        items = self.pending
        if not items:
            return "no approval is pending"
        lines = ["pending approvals:"]
        for p in items:
            lines.append(
                f"  {p.id}  [{p.request.severity}] {_clean(p.request.title)} "
                f"(tool {p.tool_name}, plugin {p.plugin_id}); "
                f"answer: /approve {p.id} {'|'.join(p.allowed_decisions)}"
            )
        return "\n".join(lines)


def _settle(future: asyncio.Future[Decision], decision: Decision) -> None:
    if not future.done():
        future.set_result(decision)


def _clean(text: str, limit: int = 4_000) -> str:
    """Drop control characters (terminal escape injection) and bound the length."""
    cleaned = "".join(ch if ch.isprintable() or ch in "\n\t" else "?" for ch in text)
    return cleaned if len(cleaned) <= limit else cleaned[: limit - 1] + "…"


class TerminalResolver:
    """Interactive resolver: prints the request to ``output``, reads the answer from ``input``.

    Lines are read by one daemon thread (never blocking the event loop or interpreter
    exit), only while a prompt is waiting: a line typed while nothing is asked is never
    taken as the answer to a later approval. Invalid answers and decisions that were not
    offered re-prompt. Concurrent approvals are asked one after another. The broker's
    timeout still applies; end of input makes the resolver fail, which the broker turns
    into a deny.
    """

    def __init__(self, input: TextIO | None = None, output: TextIO | None = None) -> None:
        self._input = input if input is not None else sys.stdin
        self._output = output if output is not None else sys.stdout
        self._cond = threading.Condition()
        self._waiters: deque[tuple[asyncio.AbstractEventLoop, asyncio.Future[str | None]]] = deque()
        self._eof = False
        self._thread: threading.Thread | None = None
        self._locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = (
            weakref.WeakKeyDictionary()
        )

    async def resolve(self, pending: PendingApproval) -> Decision:
        return await self.ask(pending)

    async def ask(self, pending: PendingApproval) -> Decision:
        loop = asyncio.get_running_loop()
        lock = self._locks.get(loop)
        if lock is None:
            lock = self._locks[loop] = asyncio.Lock()
        async with lock:
            self._write(self.render(pending))
            offered = pending.allowed_decisions
            while True:
                self._write(f"Decision [{' / '.join(_choices(offered))}]: ")
                line = await self._read_line()
                if line is None:
                    self._write("\n(input closed; no decision)\n")
                    raise EOFError("approval input closed before a decision")
                decision = parse_decision(line)
                if decision is None:
                    self._write(
                        f"Unrecognised answer {_clean(line.strip(), 40)!r}; "
                        "answer allow-once (o), allow-always (a) or deny (d).\n"
                    )
                    continue
                if decision not in offered:
                    self._write(
                        f"{decision} is not offered here; choose one of: {', '.join(offered)}.\n"
                    )
                    continue
                self._write(f"-> {decision}\n")
                return decision

    @staticmethod
    def render(pending: PendingApproval) -> str:
        """The text shown for one approval."""
        request = pending.request
        params = json.dumps(dict(pending.params), default=str, ensure_ascii=False)
        lines = [
            "",
            f"=== Approval required [{request.severity.upper()}] ({pending.id}) ===",
            f"Title:       {_clean(request.title, 200)}",
            f"Description: {_clean(request.description)}",
            f"Severity:    {request.severity}",
            f"Tool:        {_clean(pending.tool_name, 200)}  (asked by plugin "
            f"{_clean(str(pending.plugin_id), 200)})",
            f"Parameters:  {_clean(params, 1_000)}",
        ]
        env = pending.metadata.get("exec_env") if pending.metadata else None
        if isinstance(env, Mapping):
            kept = env.get("kept") or {}
            dropped = env.get("dropped") or []
            lines.append(
                "Environment: "
                + (
                    ", ".join(f"{_clean(str(k), 100)} (from {v})" for k, v in kept.items())
                    or "(no plugin variables)"
                )
            )
            if dropped:
                lines.append(
                    "Dropped env: " + ", ".join(_clean(str(d.get("key")), 100) for d in dropped)
                )
        lines.append(f"Allowed:     {', '.join(pending.allowed_decisions)}")
        lines.append(f"Times out in {pending.timeout_s:g} s (then denied).")
        return "\n".join(lines) + "\n"

    def _write(self, text: str) -> None:
        try:
            self._output.write(text)
            self._output.flush()
        except (OSError, ValueError):
            pass

    async def _read_line(self) -> str | None:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[str | None] = loop.create_future()
        with self._cond:
            if self._eof:
                return None
            self._waiters.append((loop, future))
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._reader, name="agentplug-approval-input", daemon=True
                )
                self._thread.start()
            self._cond.notify_all()
        try:
            return await future
        finally:
            with self._cond, contextlib.suppress(ValueError):
                self._waiters.remove((loop, future))

    def _reader(self) -> None:
        while True:
            with self._cond:
                while not self._waiters:
                    self._cond.wait()
            try:
                line: str | None = self._input.readline()
            except (OSError, ValueError):
                line = ""
            if not line:
                line = None
            with self._cond:
                if line is None:
                    self._eof = True
                    targets = list(self._waiters)
                    self._waiters.clear()
                else:
                    targets = [self._waiters.popleft()] if self._waiters else []
            for loop, future in targets:
                with contextlib.suppress(RuntimeError):
                    loop.call_soon_threadsafe(_settle_line, future, line)
            if line is None:
                return


def _settle_line(future: asyncio.Future[str | None], line: str | None) -> None:
    if not future.done():
        future.set_result(line)


def _choices(offered: list[Decision]) -> list[str]:
    short = {"allow-once": "o", "allow-always": "a", "deny": "d"}
    return [f"{d} ({short[d]})" for d in offered]


# -- the broker --------------------------------------------------------------------------


class ApprovalBroker:
    """Runs approval round-trips for ``before_tool_call`` outcomes.

    ``store`` keeps ``allow-always`` grants (default: an in-memory store). Use an
    :class:`~agentplug.store.SQLiteStore` (e.g. ``host.store``) so grants survive
    restarts.
    """

    def __init__(
        self, resolver: AnyResolver | None = None, *, store: StateStore | None = None
    ) -> None:
        self.resolver = resolver
        self.store: StateStore = store if store is not None else MemoryStore()
        self.history: deque[dict[str, Any]] = deque(maxlen=1_000)
        """Audit trail of the latest resolved approvals (JSON-compatible dicts)."""
        self._in_flight: dict[str, tuple[PendingApproval, asyncio.Future[str]]] = {}

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
        """Cancel every pending approval of run ``run_id``; return how many."""
        return sum(
            self.cancel(p.id) for p, _ in list(self._in_flight.values()) if p.run_id == run_id
        )

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
        approval_id = _new_approval_id()
        while approval_id in self._in_flight:
            approval_id = _new_approval_id()
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
            )
        else:
            try:
                verdict = await self._round_trip(pending)
            except asyncio.CancelledError:
                self._record(pending, "cancelled", False)
                await _notify(request, "cancelled")
                raise
            if verdict.resolution == "allow-always":
                verdict = ApprovalVerdict(
                    True,
                    "allow-always",
                    verdict.reason,
                    approval_id,
                    self._remember(pending),
                )
        self._record(pending, verdict.resolution, verdict.allowed, verdict.grant_id)
        await _notify(request, _callback_resolution(verdict.resolution))
        return verdict

    def _record(
        self,
        pending: PendingApproval,
        resolution: str,
        allowed: bool,
        grant_id: str | None = None,
    ) -> None:
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
                "at": time.time(),
            }
        )

    async def _round_trip(self, pending: PendingApproval) -> ApprovalVerdict:
        request = pending.request
        aid = pending.id
        who = request.plugin_id or "a plugin"
        resolver = self.resolver
        if resolver is None:
            return ApprovalVerdict(
                False,
                "no-resolver",
                f"{request.title!r} needs approval (asked by {who}) but no approver is "
                "connected; the tool call was not run",
                aid,
            )
        ask = getattr(resolver, "ask", None)
        if not callable(ask):
            ask = cast(ApprovalResolver, resolver).resolve
        timeout_s = pending.timeout_s
        loop = asyncio.get_running_loop()
        cancel_signal: asyncio.Future[str] = loop.create_future()
        task: asyncio.Future[Any] = asyncio.ensure_future(ask(pending))
        self._in_flight[aid] = (pending, cancel_signal)
        try:
            done, _ = await asyncio.wait(
                (task, cancel_signal), timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED
            )
        except asyncio.CancelledError:
            _abandon(task)
            raise
        finally:
            self._in_flight.pop(aid, None)
            if not cancel_signal.done():
                cancel_signal.cancel()
        if task not in done:
            _abandon(task)
            if cancel_signal in done:
                return ApprovalVerdict(
                    False,
                    "cancelled",
                    f"the run was cancelled while {request.title!r} awaited approval; "
                    "the tool call was not run",
                    aid,
                )
            return ApprovalVerdict(
                False,
                "timeout",
                f"approval for {request.title!r} was not answered within {timeout_s:g} s; "
                "the tool call was not run",
                aid,
            )
        exc = task.exception() if not task.cancelled() else asyncio.CancelledError()
        if exc is not None:
            log.warning("approval resolver failed (%s); denying", type(exc).__name__)
            return ApprovalVerdict(
                False,
                "deny",
                f"approval for {request.title!r} could not be obtained (the approver "
                "failed); denied",
                aid,
            )
        decision = task.result()
        if decision not in request.allowed_decisions:
            return ApprovalVerdict(
                False,
                "deny",
                f"decision {decision!r} was not offered for {request.title!r} (offered: "
                f"{', '.join(request.allowed_decisions)}); denied",
                aid,
            )
        if decision == "deny":
            return ApprovalVerdict(
                False, "deny", f"{request.title!r} was denied by the approver", aid
            )
        return ApprovalVerdict(True, decision, f"{request.title!r} approved ({decision})", aid)


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
