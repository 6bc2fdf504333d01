"""The terminal resolver when a prompt goes away unanswered (another gateway or the
timeout decided): it says so, and the next line the person types is their next message,
never the answer to another approval."""

from __future__ import annotations

import asyncio
import contextlib
import io
import queue
import threading
from typing import Any

from agentplug.services.approvals import PendingApproval, TerminalResolver
from agentplug_hookspecs.tools import ApprovalRequest

WAIT_S = 10.0


class Keyboard(io.TextIOBase):
    """Lines typed one at a time; ``taken`` is set each time the resolver read one."""

    def __init__(self) -> None:
        self.lines: queue.Queue[str] = queue.Queue()
        self.taken = threading.Event()
        self.reading = threading.Event()
        """Set while the resolver's reader thread waits in :meth:`readline`."""

    def readline(self, size: int | None = -1) -> str:
        self.reading.set()
        line = self.lines.get()
        self.reading.clear()
        self.taken.set()
        return line

    def type(self, line: str) -> None:
        self.taken.clear()
        self.lines.put(line + "\n")


def _pending(approval_id: str) -> PendingApproval:
    request = ApprovalRequest(title="Run it?", description="d", plugin_id="p")
    return PendingApproval(approval_id, "tool", {}, request)


async def _prompted(resolver: TerminalResolver, out: io.StringIO, approval_id: str) -> Any:
    task = asyncio.ensure_future(resolver.ask(_pending(approval_id)))
    while "Decision [" not in out.getvalue().split(approval_id, 1)[-1]:
        await asyncio.sleep(0.01)
    return task


async def _abandon(task: Any) -> None:
    """What the broker does when the store decided first: it stops waiting for the prompt."""
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


async def _reading(keyboard: Keyboard) -> None:
    """Wait until the reader thread waits for a line (it reads only while a prompt or a
    message read waits, so a line typed before it reads goes to whoever asks next)."""
    assert await asyncio.to_thread(keyboard.reading.wait, WAIT_S)


async def _typed_while_no_prompt_waits(
    keyboard: Keyboard, line: str, resolver: TerminalResolver
) -> None:
    keyboard.type(line)
    await asyncio.to_thread(keyboard.taken.wait, WAIT_S)

    # Wait until the reader thread has set the line aside (no fixed sleep: a loaded
    # machine may run the thread late); a rule that never holds fails at the bound.
    async def set_aside() -> None:
        while not resolver._unclaimed:
            await asyncio.sleep(0.005)

    await asyncio.wait_for(set_aside(), WAIT_S)


def test_a_prompt_decided_elsewhere_says_who_decided() -> None:
    out = io.StringIO()
    resolver = TerminalResolver(Keyboard(), out)

    async def scenario() -> None:
        await _abandon(await _prompted(resolver, out, "ap1-aaa"))
        resolver.settled("ap1-aaa", "allow-once", "cli")

    asyncio.run(scenario())
    assert (
        "(approval ap1-aaa was decided elsewhere: allow-once by cli; no answer is needed here)"
        in out.getvalue()
    )


def test_a_prompt_answered_here_says_nothing_more_when_settled() -> None:
    keyboard, out = Keyboard(), io.StringIO()
    resolver = TerminalResolver(keyboard, out)

    async def scenario() -> str:
        task = await _prompted(resolver, out, "ap1-bbb")
        keyboard.type("o")
        decision: str = await task
        resolver.settled("ap1-bbb", decision, "chat")
        return decision

    assert asyncio.run(scenario()) == "allow-once"
    assert "no answer is needed here" not in out.getvalue()


def test_a_line_typed_after_a_prompt_went_away_is_the_next_message() -> None:
    keyboard, out = Keyboard(), io.StringIO()
    resolver = TerminalResolver(keyboard, out)

    async def scenario() -> str | None:
        prompt = await _prompted(resolver, out, "ap1-ccc")
        await _reading(keyboard)
        await _abandon(prompt)
        await _typed_while_no_prompt_waits(keyboard, "what about tomorrow?", resolver)
        return await asyncio.wait_for(resolver.read_line(), WAIT_S)

    assert asyncio.run(scenario()) == "what about tomorrow?\n"


def test_a_line_typed_while_no_prompt_waited_never_answers_the_next_approval() -> None:
    keyboard, out = Keyboard(), io.StringIO()
    resolver = TerminalResolver(keyboard, out)

    async def scenario() -> tuple[str, str | None]:
        prompt = await _prompted(resolver, out, "ap1-ddd")
        await _reading(keyboard)
        await _abandon(prompt)
        await _typed_while_no_prompt_waits(keyboard, "o", resolver)  # like an answer
        second = await _prompted(resolver, out, "ap1-eee")
        keyboard.type("d")
        decision: str = await asyncio.wait_for(second, WAIT_S)
        return decision, await asyncio.wait_for(resolver.read_line(), WAIT_S)

    assert asyncio.run(scenario()) == ("deny", "o\n")
