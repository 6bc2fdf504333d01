"""The reply dispatcher: the whole outbound path of one reply.

``await ReplyDispatcher(host).deliver(text, ctx, channel=send)`` runs, in order:

1. ``message_sending`` (:func:`~agentplug.services.turns.send_message`): a cancel is a
   suppressed delivery (``cancelled_by_message_sending_hook``);
2. ``reply_payload_sending`` (:func:`~agentplug.services.turns.send_reply_payload`) on the
   normalised payload, without runtime trust markers; a cancel is a suppressed delivery
   (``cancelled_by_reply_payload_sending_hook``);
3. the host's *before-deliver stages*, in the order they were appended with
   :meth:`ReplyDispatcher.append_before_deliver` (each may return a replacement payload;
   a stage that raises or outlives its budget, 15 s by default, is skipped and logged,
   never cancelled: it keeps running, tracked like a timed-out hook handler);
4. ``before_dispatch`` on the outbound dispatch (text, recipient, channel, thread, the
   payload without trust markers): a handler may rewrite the text for the handlers after
   it and the channel, or take the dispatch (``handled``);
5. ``reply_dispatch``, the final dispatch pipeline: a handler may take the dispatch;
6. the channel (``channel(payload)``, sync or async), unless a dispatch hook took it
   (``DeliveryResult.dispatched_by`` names the plugin; it counts as delivered); a
   failure is ``status="failed"``;
7. ``message_sent`` with the delivery's success.

Both dispatch hooks run with or without a channel: a plugin that takes the dispatch
sends the reply itself, and the host must not send it again (``status="delivered"``
instead of ``ready``).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agentplug.services.turns import (
    DeliveryResult,
    notify_sent,
    send_message,
    send_reply_payload,
    strip_trust_markers,
)

if TYPE_CHECKING:
    from agentplug.core.host import PluginHost

__all__ = [
    "CANCELLED_BY_REPLY_PAYLOAD_SENDING_HOOK",
    "DEFAULT_STAGE_TIMEOUT_MS",
    "BeforeDeliver",
    "Channel",
    "ReplyDispatcher",
]

log = logging.getLogger("agentplug.replies")

DEFAULT_STAGE_TIMEOUT_MS = 15_000
CANCELLED_BY_REPLY_PAYLOAD_SENDING_HOOK = "cancelled_by_reply_payload_sending_hook"

BeforeDeliver = Callable[
    [dict[str, Any]], Awaitable[Mapping[str, Any] | None] | Mapping[str, Any] | None
]
"""``stage(payload) -> replacement payload | None`` (``None``: unchanged)."""
Channel = Callable[[dict[str, Any]], Awaitable[Any] | Any]
"""``channel(payload) -> receipt``: sends the final payload."""


@dataclass(frozen=True)
class _Stage:
    handler: BeforeDeliver
    timeout_ms: int
    name: str


class ReplyDispatcher:
    """Runs the outbound path of replies (see the module docstring)."""

    def __init__(self, host: PluginHost, *, default_timeout_ms: int = DEFAULT_STAGE_TIMEOUT_MS):
        self.host = host
        self.default_timeout_ms = default_timeout_ms
        self._stages: list[_Stage] = []

    def append_before_deliver(
        self, handler: BeforeDeliver, *, timeout_ms: int | None = None, name: str | None = None
    ) -> None:
        """Add a stage that runs after the hooks and before the channel.

        ``timeout_ms`` defaults to the dispatcher's default (15 s); it must be a positive
        integer of at most 600 000.
        """
        budget = self.default_timeout_ms if timeout_ms is None else timeout_ms
        if not isinstance(budget, int) or isinstance(budget, bool) or not 0 < budget <= 600_000:
            raise ValueError(
                f"append_before_deliver: timeout_ms must be a positive integer of at most "
                f"600000 ms, got {budget!r}"
            )
        label = name or getattr(handler, "__name__", None) or type(handler).__name__
        self._stages.append(_Stage(handler, budget, str(label)))

    @property
    def stages(self) -> list[str]:
        """Names of the before-deliver stages, in order."""
        return [s.name for s in self._stages]

    async def _run_stage(self, stage: _Stage, payload: dict[str, Any]) -> dict[str, Any]:
        def start() -> Any:
            return stage.handler(dict(payload))

        try:
            value = start()
            if inspect.isawaitable(value):
                task = asyncio.ensure_future(value)
                done, _ = await asyncio.wait({task}, timeout=stage.timeout_ms / 1000)
                if task not in done:
                    self.host.tracker.track(task, f"before_deliver:{stage.name}")
                    log.warning(
                        "before-deliver stage %s outlived its %d ms budget; skipped",
                        stage.name,
                        stage.timeout_ms,
                    )
                    return payload
                value = task.result()
        except Exception as exc:
            log.warning(
                "before-deliver stage %s raised %s; skipped", stage.name, type(exc).__name__
            )
            return payload
        if value is None:
            return payload
        if not isinstance(value, Mapping):
            log.warning(
                "before-deliver stage %s returned %s, not a payload mapping; skipped",
                stage.name,
                type(value).__name__,
            )
            return payload
        return dict(value)

    async def deliver(
        self,
        text: str,
        ctx: Any = None,
        *,
        channel: Channel | None = None,
        channel_name: str | None = None,
        to: str | None = None,
        payload: Mapping[str, Any] | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> DeliveryResult:
        """Run the whole outbound path for ``text`` (see the module docstring).

        ``payload`` holds extra payload fields (presentation, media, runtime trust
        markers); ``metadata`` is the ``message_sending`` event's (a streamed block says
        so there); without ``channel`` the result is ``ready`` (hooks and stages ran,
        nothing was sent and ``message_sent`` did not fire), unless a dispatch hook took
        the dispatch (``delivered``, ``dispatched_by``).
        """
        event: dict[str, Any] = {"content": text, "to": to, "channel": channel_name}
        if metadata is not None:
            event["metadata"] = dict(metadata)
        ready = await send_message(self.host, event, ctx)
        if ready.suppressed:
            return ready
        body = {**dict(payload or {}), "text": ready.content}
        shaped = await send_reply_payload(self.host, body, ctx, channel=channel_name, to=to)
        if shaped.cancelled:
            return DeliveryResult(
                status="suppressed",
                reason=CANCELLED_BY_REPLY_PAYLOAD_SENDING_HOOK,
                cancel_reason=shaped.cancel_reason,
                cancelled_by=shaped.cancelled_by,
                changed_by=ready.changed_by + shaped.changed_by,
            )
        final = dict(shaped.payload or {})
        for stage in self._stages:
            final = await self._run_stage(stage, final)
        changed = ready.changed_by + shaped.changed_by
        final, dispatched_by = await self._dispatch(final, ctx, channel_name, to)
        content = str(final.get("text") or "")
        if dispatched_by is not None:
            delivery = DeliveryResult(
                status="delivered",
                content=content,
                payload=final,
                changed_by=changed,
                dispatched_by=dispatched_by,
            )
        elif channel is None:
            return DeliveryResult(
                status="ready", content=content, payload=final, changed_by=changed
            )
        else:
            delivery = await self._send(channel, final, content, changed)
        await notify_sent(self.host, delivery, event, ctx)
        return delivery

    async def _dispatch(
        self, payload: dict[str, Any], ctx: Any, channel_name: str | None, to: str | None
    ) -> tuple[dict[str, Any], str | None]:
        """``before_dispatch`` then ``reply_dispatch``: the payload with the text they
        rewrote, and the plugin that took the dispatch (``None``: the channel sends it).

        Hooks no plugin implements are not dispatched (nothing could observe them, and a
        reply is on the hot path of every turn)."""
        host = self.host
        before_handlers, final_handlers = host.plan("before_dispatch"), host.plan("reply_dispatch")
        if not before_handlers and not final_handlers:
            return payload, None
        event = {
            "content": str(payload.get("text") or ""),
            "to": to,
            "channel": channel_name,
            "thread_id": getattr(ctx, "thread_id", None),
            "payload": strip_trust_markers(payload),
        }
        if before_handlers:
            before = (await host.hooks.before_dispatch(event, ctx)).outcome
            if before.content is not None and before.content != event["content"]:
                payload = {**payload, "text": before.content}
                event = {
                    **event,
                    "content": before.content,
                    "payload": strip_trust_markers(payload),
                }
            if before.handled:
                return payload, before.plugin_id or "before_dispatch"
        if final_handlers:
            final = (await host.hooks.reply_dispatch(event, ctx)).outcome
            if final.handled:
                return payload, final.plugin_id or "reply_dispatch"
        return payload, None

    async def _send(
        self, channel: Channel, final: dict[str, Any], content: str, changed: list[str]
    ) -> DeliveryResult:
        try:
            receipt = channel(final)
            if inspect.isawaitable(receipt):
                receipt = await receipt
        except Exception as exc:
            return DeliveryResult(
                status="failed",
                content=content,
                error=type(exc).__name__,
                payload=final,
                changed_by=changed,
            )
        return DeliveryResult(
            status="delivered",
            content=content,
            receipt=receipt,
            payload=final,
            changed_by=changed,
        )
