"""What every entrance driver of the matrix implements, and what a call shows.

A driver (one module per entrance in this package) runs one gateway entrance with the
matrix plugin (:mod:`tests.entrances.matrix_plugin`) loaded as an installed plugin, and
answers two questions the rules ask:

- :meth:`Entrance.call_tool`: the model (or the MCP client) calls ``tool`` with
  ``params``; ``answer`` is what the person answers if an approval is asked (``None``:
  nobody answers). It returns an :class:`Observed`.
- :meth:`Entrance.send`: one message through the entrance's turn, to see what is
  delivered (``Observed.reply``; ``None`` when nothing is).

What the tools did, what the plugin's hooks saw and what the model read come from the JSON
lines the plugin, the tools and the model write in the driver's log directory
(:class:`Logs`), so they are the same evidence at every entrance, in-process or not.
"""

from __future__ import annotations

import asyncio
import json
import threading
import uuid
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Coroutine, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")

WAIT_S = 60.0
"""Upper bound for anything an entrance does (never a timing assertion)."""

LOG_FILES = ("runs.jsonl", "hooks.jsonl", "model.jsonl")


def new_nonce() -> str:
    """A fresh id for one cell (its tool params, session key and grant title carry it)."""
    return uuid.uuid4().hex[:10]


class Logs:
    """The JSON lines of one log directory, read from a mark on."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)

    def mark(self) -> dict[str, int]:
        """Where each file ends now."""
        return {
            name: (self.folder / name).stat().st_size if (self.folder / name).exists() else 0
            for name in LOG_FILES
        }

    def since(self, mark: Mapping[str, int], name: str) -> list[dict[str, Any]]:
        """The rows of ``name`` written after ``mark``."""
        path = self.folder / name
        if not path.exists():
            return []
        with open(path, "rb") as fh:
            fh.seek(mark.get(name, 0))
            text = fh.read().decode("utf-8")
        return [json.loads(line) for line in text.splitlines() if line.strip()]


@dataclass
class Decision:
    """The gate's decision on one call, as the entrance reports it (its trace or audit)."""

    allowed: bool | None = None
    blocked_by: str | None = None
    blocked_by_policy: str | None = None
    approval: str | None = None
    approval_by: str | None = None
    env_kept: list[str] = field(default_factory=list)
    env_dropped: list[str] = field(default_factory=list)

    @classmethod
    def from_trace(cls, entry: Mapping[str, Any]) -> Decision:
        """From a turn trace's tool entry (``chat --json``, ``serve``'s turn)."""
        d = dict(entry.get("decision") or {})
        return cls(
            d.get("allowed"),
            d.get("blocked_by"),
            d.get("blocked_by_policy"),
            d.get("approval"),
            d.get("approval_by"),
            list(d.get("env_kept") or []),
            list(d.get("env_dropped") or []),
        )

    @classmethod
    def from_audit(cls, entry: Mapping[str, Any]) -> Decision:
        """From the gate's audit record (``gateway.tool_calls.gate.audit``)."""
        env = (entry.get("metadata") or {}).get("exec_env") or {}
        return cls(
            entry.get("allowed"),
            entry.get("blocked_by"),
            entry.get("blocked_by_policy"),
            entry.get("approval_resolution"),
            entry.get("approval_by"),
            sorted(env.get("kept") or {}),
            [d["key"] for d in env.get("dropped") or []],
        )


@dataclass
class Observed:
    """What one call (or message) at one entrance showed."""

    entrance: str
    client: str = ""
    """Everything the client received, as text (the reply or result and what comes with
    it: trace, transcript, stdout of the turn, the server's stderr)."""
    reply: str | None = None
    """What was delivered as the answer (``None``: nothing was)."""
    asked: int = 0
    """Approvals the person was asked."""
    decision: Decision | None = None
    """The gate's decision (``None`` when the call never reached the gate)."""
    runs: list[dict[str, Any]] = field(default_factory=list)
    """Runs of matrix tools during the call (``runs.jsonl``)."""
    hooks: list[dict[str, Any]] = field(default_factory=list)
    """What the plugin's tool hooks saw during the call (``hooks.jsonl``)."""
    model: list[dict[str, Any]] = field(default_factory=list)
    """The model requests made during the call (``model.jsonl``)."""
    read_by_client: str = ""
    """For entrances without a model (the MCP proxy): the result the client read."""

    @property
    def ran(self) -> bool:
        """Whether any matrix tool ran."""
        return bool(self.runs)

    @property
    def read(self) -> str:
        """What the model read back after the call (or the MCP client, which has none)."""
        texts = [text for row in self.model for text in row.get("read", [])]
        return "\n".join([*texts, self.read_by_client])

    def seen(self, hook: str) -> list[dict[str, Any]]:
        """The rows the plugin wrote for ``hook``."""
        return [row for row in self.hooks if row.get("hook") == hook]


Answer = str | None
"""What the person answers an approval: ``allow-once``, ``allow-always``, ``deny``, or
``None`` (nobody answers: the approval times out)."""


class Entrance(ABC):
    """One entrance of a gateway, driven the way its users drive it."""

    name: str
    exec_tool: str = "RUN_COMMAND"
    """The entrance's exec-kind tool (``exec`` where a tool cannot carry a kind)."""

    def __init__(self, logs: Logs) -> None:
        self.logs = logs

    @abstractmethod
    def call_tool(self, tool: str, params: dict[str, Any], *, answer: Answer = None) -> Observed:
        """The model (or MCP client) calls ``tool`` with ``params``."""

    def send(self, text: str, nonce: str) -> Observed:
        """One message through the entrance's turn (entrances that run turns)."""
        raise NotImplementedError(f"{self.name} runs no turn of its own")

    @abstractmethod
    def close(self) -> None:
        """Stop what the driver started."""

    def collect(self, observed: Observed, mark: Mapping[str, int]) -> Observed:
        """Fill the log evidence written since ``mark``."""
        observed.runs = self.logs.since(mark, "runs.jsonl")
        observed.hooks = self.logs.since(mark, "hooks.jsonl")
        observed.model = self.logs.since(mark, "model.jsonl")
        return observed


def instruction(call: str, params: Mapping[str, Any]) -> str:
    """A user message telling the matrix model to call ``call`` with ``params``."""
    return json.dumps({"call": call, "params": dict(params), "nonce": params.get("nonce")})


def trace_decision(trace: list[dict[str, Any]]) -> Decision | None:
    """The gate's decision in a turn trace (its last tool entry that reached the gate)."""
    for entry in reversed(trace):
        if entry.get("kind") == "tool" and "allowed" in (entry.get("decision") or {}):
            return Decision.from_trace(entry)
    return None


def audit_mark(audit: Any) -> set[int]:
    """The records the gate's audit trail holds now (to tell the next call's apart)."""
    return {id(entry) for entry in audit}


def audit_decision(audit: Any, tool: str, mark: set[int]) -> Decision | None:
    """The gate's decision on ``tool`` recorded since ``mark`` (``None``: it never reached
    the gate)."""
    for entry in reversed(list(audit)):
        if id(entry) in mark:
            return None
        if entry.get("kind") == "tool_call" and entry.get("tool_name") == tool:
            return Decision.from_audit(entry)
    return None


class LoopThread:
    """An event loop in a daemon thread: the in-process drivers keep their gateway, MCP
    connections and adapters on it between calls."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the loop and wait (bounded) for its result."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(WAIT_S)

    def stop(self) -> None:
        """Stop the loop and its thread."""
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(WAIT_S)
        self.loop.close()


class Desk:
    """The person answering approvals at an in-process entrance: each call sets the
    answers it will give; with none left, nobody answers (the approval times out)."""

    by = "desk"

    def __init__(self) -> None:
        self.answers: deque[str] = deque()
        self.asked: list[Any] = []

    async def resolve(self, pending: Any) -> str:
        self.asked.append(pending)
        if not self.answers:
            await asyncio.Event().wait()
        return self.answers.popleft()

    def expect(self, answer: Answer) -> int:
        """Answer the next approval with ``answer``; return how many were asked so far."""
        self.answers.clear()
        if answer is not None:
            self.answers.append(answer)
        return len(self.asked)
