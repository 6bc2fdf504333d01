"""The ``MESSAGE`` built-in: the :class:`MessagingService` contract and the action itself."""

from __future__ import annotations

import inspect
from typing import Protocol, runtime_checkable

from agentplug.actions.builtins._shared import handler_params, text_param
from agentplug.actions.model import (
    Action,
    ActionExample,
    ActionParameter,
    ActionResult,
    ActionRuntime,
    HandlerOptions,
    Message,
    ParameterSchema,
    State,
)

__all__ = ["MessagingService", "message_action"]


@runtime_checkable
class MessagingService(Protocol):
    """What a messaging service (``telegram``, ``discord``...) implements for ``MESSAGE``.

    Register it with ``runtime.register_service("telegram", service)``. Either method may
    raise to report a failed send; the message becomes the failed result's reason.
    """

    async def send_to_user(self, user_id: str, text: str) -> object:
        """Send ``text`` to the user ``user_id``."""
        ...

    async def send_to_room(self, room_id: str, text: str) -> object:
        """Send ``text`` to the room (channel, group, chat) ``room_id``."""
        ...


_SEND_METHODS = {"user": "send_to_user", "room": "send_to_room"}


async def _message(
    runtime: ActionRuntime, message: Message, state: State | None, options: HandlerOptions | None
) -> ActionResult:
    params = handler_params(options)
    missing = [n for n in ("text", "targetType", "source", "target") if not text_param(params, n)]
    if missing:
        return ActionResult.failure(
            f"Missing required parameter: {missing[0]}. MESSAGE needs text, targetType "
            "(user or room), source (the service, e.g. telegram) and target (the id).",
            action="MESSAGE",
            missing=missing,
        )
    text = str(params["text"])
    target_type = str(params["targetType"]).strip().casefold()
    source = str(params["source"]).strip()
    target = str(params["target"]).strip()
    method_name = _SEND_METHODS.get(target_type)
    if method_name is None:
        return ActionResult.failure(
            f"Unknown targetType {params['targetType']!r}: use 'user' or 'room'.",
            action="MESSAGE",
            reason="unknown_target_type",
        )
    service = runtime.get_service(source)
    if service is None and source.casefold() != source:
        service = runtime.get_service(source.casefold())
    if service is None:
        return ActionResult.failure(
            f"No messaging service named {source!r} is registered, so the message was not "
            f"sent. Enable the plugin that provides {source!r} (it registers the service "
            f"with runtime.register_service({source!r}, ...)).",
            action="MESSAGE",
            reason="unknown_service",
            source=source,
        )
    send = getattr(service, method_name, None)
    if not callable(send):
        return ActionResult.failure(
            f"Service {source!r} cannot send to a {target_type}: it has no "
            f"{method_name}(id, text) method "
            "(see agentplug.actions.builtins.comms.MessagingService).",
            action="MESSAGE",
            reason="unsupported_target_type",
            source=source,
        )
    try:
        returned = send(target, text)
        if inspect.isawaitable(returned):
            await returned
    except Exception as exc:  # the service's failure is the user's answer
        return ActionResult.failure(
            f"Could not send the message to {target_type} {target!r} on {source}: {exc}",
            action="MESSAGE",
            reason="send_failed",
            source=source,
            error_type=type(exc).__name__,
        )
    return ActionResult(
        success=True,
        text=f"Message sent to {target_type} {target} on {source}.",
        data={"source": source, "targetType": target_type, "target": target},
    )


def message_action() -> Action:
    """The ``MESSAGE`` action: send a message to a user or a room."""
    return Action(
        name="MESSAGE",
        similes=("SEND_MESSAGE", "SEND_DM", "DIRECT_MESSAGE", "POST_MESSAGE"),
        description="Send a text message to a user or a room on a specific messaging service "
        "(for example telegram or discord), by user or room id.",
        handler=_message,
        side_effects=True,  # sends to anyone the caller names, on another service
        parameters=(
            ActionParameter(name="text", description="the message to send", required=True),
            ActionParameter(
                name="targetType",
                description="'user' (direct message) or 'room' (channel / group)",
                required=True,
                schema=ParameterSchema(type="string", enum=["user", "room"]),
            ),
            ActionParameter(
                name="source",
                description="the messaging service, e.g. telegram",
                required=True,
            ),
            ActionParameter(
                name="target", description="the user or room id on that service", required=True
            ),
        ),
        examples=(
            (
                ActionExample(name="user", text="tell the ops room on telegram the deploy is done"),
                ActionExample(name="agent", text="Message sent.", actions=["MESSAGE"]),
            ),
        ),
    )
