"""A turn as server-sent events: ``POST /api/sessions/{key}/messages/stream`` (:class:`ChatRoutes`).

The body is the one of ``POST /api/sessions/{key}/messages``. The answer is a
``text/event-stream``:

* ``started`` ``{run_id, session_key}`` at once, so the page can match the approvals this
  turn asks for (their ``run_id``) and show them inline;
* when the gateway's runner offers ``stream(message, ...)`` (an async iterator of typed
  events), each of its events as it comes (:func:`stream_event` says how they are named:
  ``delta`` ``{text}`` for reply text, ``final`` for the turn's result, the event's own
  type otherwise);
* ``final``: the :class:`~agentplug.agent.turn.TurnResult` without its transcript (what
  ``POST .../messages`` answers), when the runner does not stream, or the stream's last
  event carried none;
* ``error`` ``{error}`` when the turn could not run.

The turn runs as a task of its own: a page closed in the middle does not cancel it (it
ends, it is recorded in ``gateway.turns``, and its approvals stay in the inbox). It counts
toward :data:`~agentplug.api.routes.sessions.MAX_ACTIVE_TURNS` until it ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import uuid
from collections.abc import AsyncIterator
from typing import Any

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from agentplug.agent.turn import InboundMessage, TurnResult
from agentplug.api.events import SSE_HEADERS, sse_frame
from agentplug.api.responses import jsonable
from agentplug.api.routes.sessions import MAX_MESSAGE_BODY_BYTES, SessionRoutes
from agentplug.core.redaction import scrub

__all__ = ["ChatRoutes", "stream_event"]

log = logging.getLogger("agentplug.api")


def _result_json(result: TurnResult) -> dict[str, Any]:
    dumped: dict[str, Any] = result.model_dump(mode="json", exclude={"transcript"})
    return dumped


def stream_event(event: Any) -> tuple[str, dict[str, Any]]:
    """The SSE name and data of one event of ``runner.stream``: an event whose type says
    ``delta`` becomes ``delta`` ``{text}``; one carrying a
    :class:`~agentplug.agent.turn.TurnResult` (as ``result``, or being one) becomes
    ``final``; anything else keeps its type (``type``, else ``kind``, else its class
    name) and its fields."""
    if isinstance(event, TurnResult):
        return "final", _result_json(event)
    result = event.get("result") if isinstance(event, dict) else getattr(event, "result", None)
    if isinstance(result, TurnResult):
        return "final", _result_json(result)
    kind = getattr(event, "type", None) or getattr(event, "kind", None)
    if kind is None and isinstance(event, dict):
        kind = event.get("type") or event.get("kind")
    name = str(kind or type(event).__name__)
    data = jsonable(event)
    payload: dict[str, Any] = data if isinstance(data, dict) else {"value": data}
    if "delta" in name.lower():
        text = payload.get("text", payload.get("delta", ""))
        return "delta", {"text": str(text)}
    return name, payload


class ChatRoutes(SessionRoutes):
    """The streamed turn endpoint of :class:`~agentplug.api.app.ControlApi`."""

    _chat_tasks: set[asyncio.Task[Any]]

    async def sessions_stream_message(self, request: Request) -> Response:
        key = request.path_params["session_key"]
        body = await self._body(request, MAX_MESSAGE_BODY_BYTES)
        message = self._inbound(key, body)
        if isinstance(message, Response):
            return message
        full = self._turns_full()
        if full is not None:
            return full
        run_id = f"run-{uuid.uuid4().hex[:12]}"
        return StreamingResponse(
            self._chat_frames(message, run_id),
            media_type="text/event-stream",
            headers=SSE_HEADERS,
        )

    async def _chat_frames(self, message: InboundMessage, run_id: str) -> AsyncIterator[str]:
        queue: asyncio.Queue[tuple[str, dict[str, Any]] | None] = asyncio.Queue()
        self.active_turns += 1
        task = asyncio.ensure_future(self._run_chat(message, run_id, queue))
        self._chat_tasks.add(task)

        def finished(done: asyncio.Task[Any]) -> None:
            self.active_turns -= 1
            self._chat_tasks.discard(done)

        task.add_done_callback(finished)
        yield sse_frame("started", {"run_id": run_id, "session_key": message.session_key})
        while True:
            item = await queue.get()
            if item is None:
                return
            yield sse_frame(*item)

    async def _run_chat(
        self,
        message: InboundMessage,
        run_id: str,
        queue: asyncio.Queue[tuple[str, dict[str, Any]] | None],
    ) -> None:
        runner = self.gateway.runner
        stream = getattr(runner, "stream", None)
        try:
            if callable(stream):
                final = False
                async for event in stream(message, **_accepted(stream, run_id=run_id)):
                    kind, data = stream_event(event)
                    final = final or kind == "final"
                    queue.put_nowait((kind, data))
                if not final:
                    found = runner.turn_log.get(run_id)
                    queue.put_nowait(("final", found or {"run_id": run_id}))
            else:
                result = await runner.handle_inbound(message, run_id=run_id)
                queue.put_nowait(("final", _result_json(result)))
        except Exception as exc:  # the page hears why; the server log has the rest
            log.exception("streamed turn %s failed", run_id)
            queue.put_nowait(("error", {"error": scrub(f"{type(exc).__name__}: {exc}")}))
        finally:
            queue.put_nowait(None)

    async def aclose_chats(self) -> None:
        """Cancel streamed turns still running (the server is stopping)."""
        tasks = list(self._chat_tasks)
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task


def _accepted(function: Any, **options: Any) -> dict[str, Any]:
    """The ``options`` ``function`` takes by keyword (a stream may not take a run id)."""
    try:
        parameters = inspect.signature(function).parameters
    except (TypeError, ValueError):
        return {}
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
        return options
    return {name: value for name, value in options.items() if name in parameters}
