"""Streaming: the events of a turn as they happen, and what reply text may leave early.

``runner.stream(...)`` (and ``on_event=`` on ``run_turn`` / ``handle_inbound``) reports a
turn as typed events: :class:`TextDelta`, :class:`ToolCallRequested`,
:class:`ToolDecision`, :class:`ToolResult`, :class:`UsageUpdate`, :class:`ModelRetry` and,
always last, :class:`FinalReply` with the whole :class:`~agentplug.agent.TurnResult`.

**Text before the reply is delivered never bypasses a delivery hook.** The reply is
delivered once, whole, through ``message_sending``, ``reply_payload_sending``, the
before-deliver stages and the channel, as without streaming. What the model writes
before that leaves early only as :class:`DeltaGate` allows (``agent.stream.deltas``):

- ``preview`` (``auto`` when no loaded plugin implements ``message_sending``,
  ``reply_payload_sending``, ``before_dispatch`` or ``reply_dispatch`` and the runner
  has no before-deliver stage: nothing could rewrite or cancel the reply): the text as it
  arrives, scrubbed of configured secrets (the last characters that could start a
  secret wait for the next delta) and cut at ``agent.limits.reply_chars``;
- ``blocks`` (``auto`` otherwise): the text so far goes through the delivery hooks
  (and stages, never the channel) at block boundaries (at whitespace, after
  ``agent.stream.block_chars`` characters, then each time the text has doubled), marked
  ``metadata.stream`` in ``message_sending`` and ``payload.delivery.stream`` in
  ``reply_payload_sending``; what they return is released as far as it extends what was
  already released. A cancel stops the release for the rest of the turn, and so does a
  rewrite that changes text already released: from then on only the final reply, which
  the hooks see whole, reaches the user;
- ``final``: nothing before the final reply.

Every delta is a preview: a retry (:class:`ModelRetry`), a tool call or a revision can
follow it, and :class:`FinalReply` holds the reply as delivered (or suppressed).
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from agentplug.agent.usage import TokenUsage
from agentplug.core.redaction import scrub, unfinished_secret
from agentplug.services.signals import AbortController, AbortSignal

if TYPE_CHECKING:
    from agentplug.agent.turn import Turn, TurnResult

__all__ = [
    "DELIVERY_HOOKS",
    "DeltaGate",
    "FinalReply",
    "ModelRetry",
    "StreamEvent",
    "TextDelta",
    "ToolCallRequested",
    "ToolDecision",
    "ToolResult",
    "UsageUpdate",
    "delta_mode",
    "emit",
    "events_of",
    "stream_of",
]

DELIVERY_HOOKS = ("message_sending", "reply_payload_sending", "before_dispatch", "reply_dispatch")
"""Hooks that may rewrite or cancel a reply: with any handler loaded, ``auto`` streams
blocks through them rather than previews."""

DeltaMode = Literal["preview", "blocks", "final"]


@dataclass(frozen=True)
class TextDelta:
    """Reply text released before delivery (a preview: see the module docstring)."""

    text: str
    step: int
    """The model call (1 for the first of the turn) the text comes from."""
    kind: Literal["preview", "block"]
    """``preview``: raw text, nothing could change it; ``block``: what the delivery
    hooks returned for it."""
    type: ClassVar[str] = "text_delta"


@dataclass(frozen=True)
class ToolCallRequested:
    """The model asked for a tool call (arguments scrubbed and bounded)."""

    call_id: str
    name: str
    arguments: dict[str, Any]
    step: int
    type: ClassVar[str] = "tool_call"


@dataclass(frozen=True)
class ToolDecision:
    """The gate decided on a call (in call order), or the call was refused before it."""

    call_id: str
    name: str
    allowed: bool
    reason: str | None = None
    """The public reason of a block or refusal (never a confidential one)."""
    blocked_by: str | None = None
    approval: str | None = None
    """How an approval asked for it was resolved (``allow-once``, ``deny``, ...)."""
    type: ClassVar[str] = "tool_decision"


@dataclass(frozen=True)
class ToolResult:
    """What the model reads back for a call (as persisted; in call order)."""

    call_id: str
    name: str
    content: str
    is_error: bool
    type: ClassVar[str] = "tool_result"


@dataclass(frozen=True)
class UsageUpdate:
    """A model call returned: its usage and the turn's so far."""

    purpose: str
    provider: str
    model: str
    call: TokenUsage
    turn: TokenUsage
    type: ClassVar[str] = "usage"


@dataclass(frozen=True)
class ModelRetry:
    """An attempt failed and another follows: drop this step's preview text."""

    provider: str
    model: str
    error: str
    delay_s: float
    next_provider: str
    next_model: str
    step: int
    type: ClassVar[str] = "retry"


@dataclass(frozen=True)
class FinalReply:
    """The turn ended: the result, the reply as delivered (``None`` when suppressed)."""

    result: TurnResult
    type: ClassVar[str] = "final"

    @property
    def reply(self) -> str | None:
        """The reply as delivered."""
        return self.result.reply

    @property
    def status(self) -> str:
        """The turn's status."""
        return self.result.status


StreamEvent = (
    TextDelta
    | ToolCallRequested
    | ToolDecision
    | ToolResult
    | UsageUpdate
    | ModelRetry
    | FinalReply
)
"""Any event of :meth:`~agentplug.agent.AgentRunner.stream`."""


async def emit(turn: Turn, event: StreamEvent) -> None:
    """Hand ``event`` to the turn's listener (``on_event``), and released text to the
    runner's ``on_delta``."""
    if turn.on_event is not None:
        returned = turn.on_event(event)
        if inspect.isawaitable(returned):
            await returned
    on_delta = turn.runner.on_delta
    if on_delta is not None and isinstance(event, TextDelta):
        returned = on_delta(event.text)
        if inspect.isawaitable(returned):
            await returned


def delta_mode(turn: Turn) -> DeltaMode:
    """How ``turn``'s text may leave before delivery (see the module docstring)."""
    wanted = turn.runner.config.stream.deltas
    if wanted == "final":
        return "final"
    runner: Any = turn.runner
    stages = getattr(getattr(runner, "replies", None), "stages", [])
    guarded = bool(stages) or any(turn.host.plan(hook) for hook in DELIVERY_HOOKS)
    if wanted == "blocks" or guarded:
        return "blocks"
    return "preview"


@dataclass
class DeltaGate:
    """Releases one turn's streamed text as its mode allows (see the module docstring).

    The model loop calls :meth:`begin` before each attempt, :meth:`feed` with each chunk
    and :meth:`end` when the response is complete.
    """

    turn: Turn
    mode: DeltaMode
    _chunks: list[str] = field(default_factory=list)
    """The response's text so far (``blocks``: joined only at a block boundary)."""
    _raw_len: int = 0
    _tail: str = ""
    """``preview``: the text not released yet (the possible start of a secret)."""
    _released: str = ""
    _checked: int = 0
    _block: int = 0
    _stopped: bool = False

    def begin(self) -> None:
        """A new response starts: nothing of it is released yet."""
        self._chunks, self._raw_len, self._tail = [], 0, ""
        self._released, self._checked = "", 0

    @property
    def _step(self) -> int:
        return self.turn.steps + 1

    async def feed(self, text: str) -> None:
        """A chunk of the response's text arrived."""
        if self.mode == "final" or self._stopped or not text:
            return
        self._raw_len += len(text)
        if self.mode == "preview":
            self._tail += text
            await self._preview(final=False)
            return
        self._chunks.append(text)
        threshold = max(self.turn.runner.config.stream.block_chars, self._checked)
        if self._raw_len - self._checked >= threshold:
            await self._flush(final=False)

    async def end(self) -> None:
        """The response is complete: release what was held back."""
        if self.mode == "final" or self._stopped or not self._raw_len:
            return
        if self.mode == "preview":
            await self._preview(final=True)
        else:
            await self._flush(final=True)

    async def _preview(self, final: bool) -> None:
        # Released up to where a secret might start (scrub() knows a secret only whole);
        # no secret straddles that point, so the pieces scrub as the whole would.
        tail = self._tail
        cut = len(tail) if final else unfinished_secret(tail)
        room = self.turn.runner.config.limits.reply_chars - len(self._released)
        self._tail = tail[cut:]
        piece = scrub(tail[:cut])[: max(0, room)]
        if piece:
            self._released += piece
            await emit(self.turn, TextDelta(piece, self._step, "preview"))

    async def _flush(self, final: bool) -> None:
        text = "".join(self._chunks)
        self._chunks = [text]
        if not final:  # the possible start of a secret waits; a block ends at whitespace
            text = text[: unfinished_secret(text)]
            cut = max(text.rfind(" "), text.rfind("\n"))
            text = text[: cut + 1] if cut > 0 else ""
        candidate = scrub(text)[: self.turn.runner.config.limits.reply_chars]
        self._checked = self._raw_len
        if len(candidate) <= len(self._released):
            return
        turn = self.turn
        runner: Any = turn.runner
        self._block += 1
        marker = {"step": self._step, "block": self._block, "partial": not final}
        inbound = turn.inbound
        delivery = await runner.replies.deliver(
            candidate,
            turn.msg_ctx,
            channel=None,
            channel_name=inbound.channel if inbound else None,
            to=inbound.sender_id if inbound else None,
            payload={"delivery": {"stream": marker}},
            metadata={"stream": marker},
        )
        content = delivery.content or ""
        if delivery.suppressed or not content.startswith(self._released):
            # A cancel, or a rewrite of text already out: only the final reply from now.
            self._stopped = True
            return
        new = content[len(self._released) :]
        self._released = content
        if new:
            await emit(turn, TextDelta(new, self._step, "block"))


_QUEUE_EVENTS = 256
"""Events waiting for a slow consumer before the turn waits for it (backpressure)."""


async def events_of(
    start: Callable[[Callable[[StreamEvent], Awaitable[None]], AbortSignal], Awaitable[TurnResult]],
    signal: AbortSignal | None = None,
) -> AsyncIterator[StreamEvent]:
    """The events of the turn ``start(on_event, signal)`` runs, then its
    :class:`FinalReply`. Closing the iterator early (``break`` in an ``async with
    contextlib.aclosing(...)`` block, or the consumer going away) aborts the turn with
    ``stream closed`` and waits for it to end, ``agent_end`` included."""
    controller = AbortController()
    unlink = (
        signal.add_callback(lambda s: controller.abort(s.reason)) if signal is not None else None
    )
    queue: asyncio.Queue[StreamEvent | None] = asyncio.Queue(_QUEUE_EVENTS)

    async def on_event(event: StreamEvent) -> None:
        await queue.put(event)

    async def turn() -> TurnResult:
        try:
            return await start(on_event, controller.signal)
        finally:
            await queue.put(None)

    task = asyncio.ensure_future(turn())
    try:
        while True:
            item = await queue.get()
            if item is None:
                break
            yield item
        yield FinalReply(await task)
    finally:
        if unlink is not None:
            unlink()
        if not task.done():
            controller.abort("stream closed")
            while not task.done():  # the turn may still be putting events: take them
                getter = asyncio.ensure_future(queue.get())
                await asyncio.wait({task, getter}, return_when=asyncio.FIRST_COMPLETED)
                getter.cancel()
            await asyncio.gather(task, return_exceptions=True)


def stream_of(
    runner: Any,
    message: Any,
    *,
    session_key: str | None,
    signal: AbortSignal | None,
    output_type: Any,
    output_retries: int,
    run_id: str | None = None,
) -> AsyncIterator[StreamEvent]:
    """What :meth:`~agentplug.agent.AgentRunner.stream` returns: the turn of a routed
    text (``session_key`` given: ``run_turn``) or of an inbound message
    (``handle_inbound``)."""
    if isinstance(message, str):
        if session_key is None:
            raise TypeError("runner.stream(text) needs session_key= (or pass a message)")

        def start(on_event: Any, stop: AbortSignal) -> Awaitable[TurnResult]:
            run: Awaitable[TurnResult] = runner.run_turn(
                message,
                session_key=session_key,
                signal=stop,
                run_id=run_id,
                on_event=on_event,
                output_type=output_type,
                output_retries=output_retries,
            )
            return run

    else:

        def start(on_event: Any, stop: AbortSignal) -> Awaitable[TurnResult]:
            run: Awaitable[TurnResult] = runner.handle_inbound(
                message,
                signal=stop,
                run_id=run_id,
                on_event=on_event,
                output_type=output_type,
                output_retries=output_retries,
            )
            return run

    return events_of(start, signal)
