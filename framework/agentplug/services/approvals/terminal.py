"""The terminal resolver: prints each approval and reads the answer from a stream."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import threading
import weakref
from collections import deque
from collections.abc import Mapping
from typing import TextIO

from agentplug.services.approvals.models import (
    Decision,
    PendingApproval,
    clean_text,
    parse_decision,
)

__all__ = ["TerminalResolver"]


class TerminalResolver:
    """Interactive resolver: prints the request to ``output``, reads the answer from ``input``.

    Lines are read by one daemon thread (never blocking the event loop or interpreter
    exit), only while a prompt is waiting: a line typed while nothing is asked is never
    taken as the answer to a later approval. Invalid answers and decisions that were not
    offered re-prompt. Concurrent approvals are asked one after another. The broker's
    timeout still applies; end of input makes the resolver fail, which the broker turns
    into a deny.
    """

    def __init__(
        self, input: TextIO | None = None, output: TextIO | None = None, *, by: str = "terminal"
    ) -> None:
        self.by = by
        """Who its decisions are recorded as (``agentplug chat`` says ``chat``)."""
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
        return await self._read_line()

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
