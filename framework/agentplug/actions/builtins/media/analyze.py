"""The ``ANALYZE_IMAGE`` built-in and the check of its image input (URL or base64)."""

from __future__ import annotations

import asyncio
import base64
import binascii
import re
from typing import Any

import httpx

from agentplug.actions.builtins._shared import handler_params, stripped_text_param
from agentplug.actions.builtins.media.providers import pick_provider
from agentplug.actions.builtins.media.settings import MediaSettings
from agentplug.actions.model import (
    Action,
    ActionParameter,
    ActionResult,
    ActionRuntime,
    HandlerOptions,
    Message,
    State,
)

__all__ = ["analyze_action"]

_MAX_BASE64_CHARS = 32 * 1024 * 1024
_DATA_URL = re.compile(r"^data:[\w.+-]+/[\w.+-]+(;[\w=.+-]+)*;base64,", re.IGNORECASE)


def _check_image_input(url: str | None, b64: str | None) -> str | None:
    """Why the image input is unusable, or ``None`` when it is fine."""
    if url is None and b64 is None:
        return "Missing required parameter: imageUrl or imageBase64 (the image to analyze)."
    if url is not None and b64 is not None:
        return "Give either imageUrl or imageBase64, not both."
    if url is not None:
        if _DATA_URL.match(url):
            return None
        try:
            parsed = httpx.URL(url)
        except httpx.InvalidURL as exc:
            return f"imageUrl {url[:100]!r} is not a valid URL: {exc}"
        if parsed.scheme not in ("http", "https") or not parsed.host:
            return "imageUrl must be an http(s) URL or a data: URL."
        return None
    assert b64 is not None
    if len(b64) > _MAX_BASE64_CHARS:
        return f"imageBase64 is larger than {_MAX_BASE64_CHARS // (1024 * 1024)} MiB."
    payload = _DATA_URL.sub("", b64, count=1)
    try:
        base64.b64decode("".join(payload.split()), validate=True)
    except (binascii.Error, ValueError):
        return "imageBase64 is not valid base64 (send the bare base64 or a data: URL)."
    return None


def analyze_action(settings: MediaSettings) -> Action:
    """The ``ANALYZE_IMAGE`` action, per ``actions.media``."""

    async def handler(
        rt: ActionRuntime,
        message: Message,
        state: State | None,
        options: HandlerOptions | None,
    ) -> ActionResult:
        params = handler_params(options)
        url, b64 = (
            stripped_text_param(params, "imageUrl"),
            stripped_text_param(params, "imageBase64"),
        )
        problem = _check_image_input(url, b64)
        if problem is not None:
            return ActionResult.failure(problem, action="ANALYZE_IMAGE")
        prompt = stripped_text_param(params, "prompt") or "Describe this image in detail."
        picked = pick_provider(
            rt,
            [
                ("actions.media.visionProvider", settings.vision_provider),
                ("actions.media.provider", settings.provider),
            ],
        )
        if isinstance(picked, ActionResult):
            return picked
        provider_id, provider = picked
        data: dict[str, Any] = {"provider": provider_id}
        try:
            async with asyncio.timeout(settings.timeout_seconds):
                answer = await provider.analyze_image(
                    prompt=prompt, image_url=url, image_base64=b64
                )
        except TimeoutError:
            return ActionResult.failure(
                f"Media provider {provider_id!r} did not analyze the image within "
                f"{settings.timeout_seconds:g} s (actions.media.timeoutSeconds).",
                **data,
            )
        except Exception as exc:  # the provider's failure is the user's answer
            return ActionResult.failure(
                f"Media provider {provider_id!r} failed to analyze the image: {exc}",
                error_type=type(exc).__name__,
                **data,
            )
        if not isinstance(answer, str) or not answer.strip():
            return ActionResult.failure(
                f"Media provider {provider_id!r} returned no analysis.", **data
            )
        return ActionResult(success=True, text=answer, data=data)

    return Action(
        name="ANALYZE_IMAGE",
        similes=("DESCRIBE_IMAGE", "VISION", "LOOK_AT_IMAGE", "IMAGE_ANALYSIS"),
        description="Analyze or describe an image given by URL or base64 with a vision model, "
        "optionally answering a specific question about it.",
        handler=handler,
        side_effects=True,  # sends the image, or a URL the provider fetches, to the provider
        parameters=(
            ActionParameter(name="imageUrl", description="http(s) or data: URL of the image"),
            ActionParameter(name="imageBase64", description="the image as base64 (or data: URL)"),
            ActionParameter(name="prompt", description="what to look for or ask about the image"),
        ),
    )
