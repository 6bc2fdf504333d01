"""The terminal resolver: prints each approval and reads the answer from a stream."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import threading
import weakref
from collections import OrderedDict, deque
from collections.abc import Mapping
from typing import TextIO

from agentplug.services.approvals.models import (
    Decision,
    PendingApproval,
    clean_text,
    parse_decision,
)

__all__ = ["TerminalResolver"]

_Waiter = tuple[asyncio.AbstractEventLoop, "asyncio.Future[str | None]", bool]


class TerminalResolver:
    """Interactive resolver: prints the request to ``output``, reads the answer from ``input``.

    Lines are read by one daemon thread (never blocking the event loop or interpreter
    exit), only while a prompt or :meth:`read_line` waits. Invalid answers and decisions
    that were not offered re-prompt. Concurrent approvals are asked one after another. The
    broker's timeout still applies; end of input makes the resolver fail, which the broker
    turns into a deny.

    A prompt can go away unanswered: another gateway, ``agentplug approvals resolve`` or
    the timeout decided first. The broker tells the resolver (:meth:`settled`), which says
    so on ``output``; a line read after its prompt went away is kept for the next
    :meth:`read_line` (it is the person's next message), never taken as the answer to
    another approval.
    """

    _KEEP_SHOWN = 1_000

    def __init__(
        self, input: TextIO | None = None, output: TextIO | None = None, *, by: str = "terminal"
    ) -> None:
        self.by = by
        """Who its decisions are recorded as (``agentplug chat`` says ``chat``)."""
        self._input = input if input is not None else sys.stdin
        self._output = output if output is not None else sys.stdout
        self._cond = threading.Condition()
        # (loop, future, a message read?): the waiting reads, oldest first.
        self._waiters: deque[_Waiter] = deque()
        self._unclaimed: deque[str] = deque()
        """Lines read when their reader had gone: the next message reads take them."""
        self._shown: OrderedDict[str, None] = OrderedDict()
        """Approvals prompted here and not answered here (yet)."""
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
            with self._cond:
                self._shown[pending.id] = None
                while len(self._shown) > self._KEEP_SHOWN:
                    self._shown.popitem(last=False)
            abandoned = False
            try:
                return await self._answer(pending)
            except asyncio.CancelledError:
                abandoned = True  # decided elsewhere or timed out: settled() says which
                raise
            finally:
                if not abandoned:
                    with self._cond:
                        self._shown.pop(pending.id, None)

    async def _answer(self, pending: PendingApproval) -> Decision:
        offered = pending.allowed_decisions
        while True:
            self._write(f"Decision [{' / '.join(_choices(offered))}]: ")
            line = await self._read_line(message=False)
            if line is None:
                self._write("\n(input closed; no decision)\n")
                raise EOFError("approval input closed before a decision")
            decision = parse_decision(line)
            if decision is None:
                self._write(
                    f"Unrecognised answer {clean_text(line.strip(), 40)!r}; "
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

    def settled(self, approval_id: str, resolution: str, by: str | None) -> None:
        """The broker's word that approval ``approval_id`` is settled: when its prompt
        here was left unanswered, say why the prompt went away."""
        with self._cond:
            if approval_id not in self._shown:
                return  # answered here, or never prompted (a standing grant)
            del self._shown[approval_id]
        if resolution == "timeout":
            why = "timed out; the tool call was not run"
        elif resolution == "cancelled":
            why = "was cancelled with its run"
        else:
            why = f"was decided elsewhere: {resolution} by {clean_text(str(by), 100)}"
        self._write(f"\n(approval {approval_id} {why}; no answer is needed here)\n")

    @staticmethod
    def render(pending: PendingApproval) -> str:
        """The text shown for one approval."""
        request = pending.request
        params = json.dumps(dict(pending.params), default=str, ensure_ascii=False)
        lines = [
            "",
            f"=== Approval required [{request.severity.upper()}] ({pending.id}) ===",
            f"Title:       {clean_text(request.title, 200)}",
            f"Description: {clean_text(request.description)}",
            f"Severity:    {request.severity}",
            f"Tool:        {clean_text(pending.tool_name, 200)}  (asked by plugin "
            f"{clean_text(str(pending.plugin_id), 200)})",
            f"Parameters:  {clean_text(params, 1_000)}",
        ]
        env = pending.metadata.get("exec_env") if pending.metadata else None
        if isinstance(env, Mapping):
            kept = env.get("kept") or {}
            dropped = env.get("dropped") or []
            lines.append(
                "Environment: "
                + (
                    ", ".join(f"{clean_text(str(k), 100)} (from {v})" for k, v in kept.items())
                    or "(no plugin variables)"
                )
            )
            if dropped:
                lines.append(
                    "Dropped env: " + ", ".join(clean_text(str(d.get("key")), 100) for d in dropped)
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

    async def read_line(self) -> str | None:
        """Read one line through the same reader as the approval prompts (``None`` at
        end of input): a terminal program (``agentplug chat``) reads its own input here so
        that an approval answer and the next message never race for the same line."""
        return await self._read_line(message=True)

    async def _read_line(self, *, message: bool) -> str | None:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[str | None] = loop.create_future()
        waiter = (loop, future, message)
        with self._cond:
            if message and self._unclaimed:
                return self._unclaimed.popleft()
            if self._eof:
                return None
            self._waiters.append(waiter)
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
                self._waiters.remove(waiter)

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
                elif self._waiters:
                    targets = [self._waiters.popleft()]
                else:  # its reader went away while the line was being typed
                    targets = []
                    self._unclaimed.append(line)
            for loop, future, _message in targets:
                with contextlib.suppress(RuntimeError):
                    loop.call_soon_threadsafe(self._settle_line, future, line)
            if line is None:
                return

    def _settle_line(self, future: asyncio.Future[str | None], line: str | None) -> None:
        if not future.done():
            future.set_result(line)
            return
        if line is None:
            return
        # Its reader went away (a prompt decided elsewhere): the next message read gets it.
        with self._cond:
            reads = [w for w in self._waiters if w[2]]
            if not reads:
                self._unclaimed.appendleft(line)
                return
            self._waiters.remove(reads[0])
        loop, waiting, _message = reads[0]
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(self._settle_line, waiting, line)


def _choices(offered: list[Decision]) -> list[str]:
    short = {"allow-once": "o", "allow-always": "a", "deny": "d"}
    return [f"{d} ({short[d]})" for d in offered]
