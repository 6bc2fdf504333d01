"""The :class:`OutputHub` (service ``terminal_output``): live terminal output for subscribers."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import re
import threading
from collections.abc import AsyncIterator
from dataclasses import dataclass

from agentplug.actions.builtins._shared import get_or_register

__all__ = [
    "OUTPUT_HUB_SERVICE",
    "RUN_ID_PATTERN",
    "OutputChunk",
    "OutputHub",
    "RunStatus",
    "output_hub",
]

OUTPUT_HUB_SERVICE = "terminal_output"


@dataclass(frozen=True)
class OutputChunk:
    """One piece of a run's output; ``seq`` counts the run's chunks from 0."""

    run_id: str
    seq: int
    text: str


@dataclass(frozen=True)
class RunStatus:
    """What the hub knows about a run (for a late subscriber or a status endpoint)."""

    run_id: str
    command: str
    started: bool
    finished: bool
    exit_code: int | None
    error: str | None
    chunks: int


class _Channel:
    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        self.command = ""
        self.chunks: collections.deque[OutputChunk] = collections.deque()
        self.first_seq = 0
        self.next_seq = 0
        self.bytes = 0
        self.started = False
        self.finished = False
        self.exit_code: int | None = None
        self.error: str | None = None
        self.waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = []


RUN_ID_PATTERN = re.compile(r"^[A-Za-z0-9_.:-]{1,128}$")
"""What a terminal run id may look like."""


def _check_run_id(run_id: str) -> str:
    if not isinstance(run_id, str) or not RUN_ID_PATTERN.match(run_id):
        raise ValueError(
            f"run id {run_id!r} must be 1-128 characters of letters, digits, '_', '.', ':', '-'"
        )
    return run_id


class OutputHub:
    """Fan-out of terminal output to subscribers (service ``terminal_output``).

    The producer calls :meth:`start`, :meth:`publish` for each chunk and :meth:`finish`;
    consumers iterate :meth:`subscribe`. A subscriber gets the run's backlog first (so
    subscribing just after the run started loses nothing), then live chunks, and its
    iterator ends when the run finishes. Subscribing before the run starts is allowed (pass
    the ``runId`` parameter to ``SHELL_COMMAND`` to know it in advance).

    Bounds: each run keeps at most ``max_backlog_bytes`` of output (oldest chunks dropped
    first; a subscriber that fell behind skips to the oldest kept chunk) and at most
    ``max_runs`` runs are remembered (finished runs are forgotten first, then never-started
    subscriptions; running ones never). Publishing is thread-safe; subscribers are woken on
    their own event loop.
    """

    def __init__(self, *, max_backlog_bytes: int = 1024 * 1024, max_runs: int = 64) -> None:
        if max_backlog_bytes <= 0 or max_runs <= 0:
            raise ValueError("max_backlog_bytes and max_runs must be positive")
        self.max_backlog_bytes = max_backlog_bytes
        self.max_runs = max_runs
        self._lock = threading.Lock()
        self._channels: collections.OrderedDict[str, _Channel] = collections.OrderedDict()

    # -- producer side

    def start(self, run_id: str, command: str = "") -> None:
        """Open the run ``run_id``; raise ``ValueError`` when it was already started."""
        _check_run_id(run_id)
        with self._lock:
            channel = self._channel(run_id)
            if channel.started:
                raise ValueError(f"run {run_id!r} was already started; use a new run id")
            channel.started = True
            channel.command = command
            self._channels.move_to_end(run_id)
            self._evict()

    def publish(self, run_id: str, text: str) -> None:
        """Append ``text`` to the run's output and wake its subscribers."""
        if not text:
            return
        with self._lock:
            channel = self._channels.get(run_id)
            if channel is None or channel.finished:
                return
            channel.chunks.append(OutputChunk(run_id, channel.next_seq, text))
            channel.next_seq += 1
            channel.bytes += len(text.encode("utf-8", errors="replace"))
            while channel.bytes > self.max_backlog_bytes and len(channel.chunks) > 1:
                dropped = channel.chunks.popleft()
                channel.first_seq = dropped.seq + 1
                channel.bytes -= len(dropped.text.encode("utf-8", errors="replace"))
            waiters, channel.waiters = channel.waiters, []
        _wake(waiters)

    def finish(self, run_id: str, exit_code: int | None, error: str | None = None) -> None:
        """Close the run: subscribers receive the remaining chunks, then their iterator ends."""
        with self._lock:
            channel = self._channels.get(run_id)
            if channel is None:
                return
            channel.finished = True
            channel.exit_code = exit_code
            channel.error = error
            waiters, channel.waiters = channel.waiters, []
            self._evict()
        _wake(waiters)

    # -- consumer side

    def subscribe(self, run_id: str) -> AsyncIterator[OutputChunk]:
        """Chunks of ``run_id``: backlog, then live, ending when the run finishes."""
        _check_run_id(run_id)
        with self._lock:
            channel = self._channel(run_id)
            self._evict()
        return self._iterate(channel)

    async def _iterate(self, channel: _Channel) -> AsyncIterator[OutputChunk]:
        seq = 0
        loop = asyncio.get_running_loop()
        while True:
            event: asyncio.Event | None = None
            with self._lock:
                seq = max(seq, channel.first_seq)
                pending = [c for c in channel.chunks if c.seq >= seq]
                done = channel.finished
                if not pending and not done:
                    event = asyncio.Event()
                    channel.waiters.append((loop, event))
            for chunk in pending:
                seq = chunk.seq + 1
                yield chunk
            if pending:
                continue
            if done:
                return
            assert event is not None
            await event.wait()

    def status(self, run_id: str) -> RunStatus | None:
        """What is known about ``run_id``, or ``None`` when the hub does not remember it."""
        with self._lock:
            channel = self._channels.get(run_id)
            if channel is None:
                return None
            return _status(channel)

    def runs(self) -> list[RunStatus]:
        """Every remembered run, oldest first."""
        with self._lock:
            return [_status(c) for c in self._channels.values()]

    # -- internals (lock held)

    def _channel(self, run_id: str) -> _Channel:
        channel = self._channels.get(run_id)
        if channel is None:
            channel = self._channels[run_id] = _Channel(run_id)
        return channel

    def _evict(self) -> None:
        excess = len(self._channels) - self.max_runs
        if excess <= 0:
            return
        finished = [k for k, c in self._channels.items() if c.finished]
        waiting = [k for k, c in self._channels.items() if not c.started]
        for key in (finished + waiting)[:excess]:
            channel = self._channels.pop(key)
            if not channel.finished:
                channel.finished = True
                channel.error = "forgotten by the output hub before it started"
                waiters, channel.waiters = channel.waiters, []
                _wake(waiters)


def _status(channel: _Channel) -> RunStatus:
    return RunStatus(
        run_id=channel.run_id,
        command=channel.command,
        started=channel.started,
        finished=channel.finished,
        exit_code=channel.exit_code,
        error=channel.error,
        chunks=channel.next_seq,
    )


def _wake(waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Event]]) -> None:
    for loop, event in waiters:
        # A closed loop raises RuntimeError: that subscriber is gone, nobody to wake.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(event.set)


def output_hub(runtime: object) -> OutputHub:
    """The runtime's ``terminal_output`` hub (created and registered on first use)."""
    return get_or_register(runtime, OUTPUT_HUB_SERVICE, OutputHub, OutputHub)
