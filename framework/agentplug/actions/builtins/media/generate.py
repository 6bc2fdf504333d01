"""The ``GENERATE_MEDIA`` built-in and the inference of the medium from the prompt."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Mapping
from typing import Any

from agentplug.actions.builtins._shared import handler_params, stripped_text_param
from agentplug.actions.builtins.media.providers import (
    MEDIA_TYPES,
    MediaResult,
    MediaType,
    UnsupportedMediaType,
    pick_provider,
)
from agentplug.actions.builtins.media.settings import MediaSettings
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

__all__ = ["generate_action", "infer_media_type"]

_MEDIA_WORDS: Mapping[MediaType, tuple[str, ...]] = {
    "image": (
        "image",
        "images",
        "picture",
        "pictures",
        "photo",
        "photos",
        "photograph",
        "drawing",
        "draw",
        "illustration",
        "illustrate",
        "painting",
        "paint",
        "sketch",
        "logo",
        "icon",
        "portrait",
        "wallpaper",
        "poster",
    ),
    "video": (
        "video",
        "videos",
        "clip",
        "clips",
        "animation",
        "animate",
        "animated",
        "movie",
        "film",
        "footage",
        "timelapse",
    ),
    "audio": (
        "audio",
        "sound",
        "sounds",
        "song",
        "songs",
        "music",
        "melody",
        "tune",
        "voice",
        "voiceover",
        "speech",
        "spoken",
        "narrate",
        "narration",
        "podcast",
        "jingle",
        "tts",
    ),
}
_WORD_TYPE = {word: kind for kind, words in _MEDIA_WORDS.items() for word in words}


def infer_media_type(prompt: str) -> MediaType:
    """The medium a prompt asks for: the earliest medium word wins, ``image`` by default."""
    for word in re.findall(r"[a-z]+", prompt.casefold()):
        kind = _WORD_TYPE.get(word)
        if kind is not None:
            return kind
    return "image"


def generate_action(settings: MediaSettings) -> Action:
    """The ``GENERATE_MEDIA`` action, per ``actions.media``."""

    async def handler(
        rt: ActionRuntime,
        message: Message,
        state: State | None,
        options: HandlerOptions | None,
    ) -> ActionResult:
        params = handler_params(options)
        prompt = stripped_text_param(params, "prompt")
        if prompt is None:
            return ActionResult.failure(
                "Missing required parameter: prompt (what to generate).", action="GENERATE_MEDIA"
            )
        forced = stripped_text_param(params, "mediaType")
        if forced is not None and forced.casefold() not in MEDIA_TYPES:
            return ActionResult.failure(
                f"Unknown mediaType {forced!r}: use image, video or audio.",
                action="GENERATE_MEDIA",
            )
        media_type: MediaType = infer_media_type(prompt)
        for kind in MEDIA_TYPES:
            if forced is not None and forced.casefold() == kind:
                media_type = kind
        picked = pick_provider(rt, [("actions.media.provider", settings.provider)])
        if isinstance(picked, ActionResult):
            return picked
        provider_id, provider = picked
        data: dict[str, Any] = {
            "provider": provider_id,
            "mediaType": media_type,
            "inferred": forced is None,
        }
        try:
            async with asyncio.timeout(settings.timeout_seconds):
                result = await provider.generate(prompt, media_type)
        except TimeoutError:
            return ActionResult.failure(
                f"Media provider {provider_id!r} did not finish the {media_type} within "
                f"{settings.timeout_seconds:g} s (actions.media.timeoutSeconds).",
                **data,
            )
        except UnsupportedMediaType as exc:
            return ActionResult.failure(
                f"Media provider {provider_id!r} cannot generate {media_type}: {exc}",
                reason="unsupported_media_type",
                **data,
            )
        except Exception as exc:  # the provider's failure is the user's answer
            return ActionResult.failure(
                f"Media provider {provider_id!r} failed to generate the {media_type}: {exc}",
                error_type=type(exc).__name__,
                **data,
            )
        if not isinstance(result, MediaResult):
            result = MediaResult.model_validate(result)
        if not result.attachments:
            return ActionResult.failure(
                f"Media provider {provider_id!r} returned no {media_type}.", **data
            )
        if result.data:
            data["providerData"] = result.data
        note = f" {result.text}" if result.text else ""
        return ActionResult(
            success=True,
            text=f"Here is the generated {media_type}.{note}",
            data=data,
            attachments=list(result.attachments),
        )

    return Action(
        name="GENERATE_MEDIA",
        similes=("GENERATE_IMAGE", "CREATE_IMAGE", "GENERATE_VIDEO", "GENERATE_AUDIO", "DRAW"),
        description="Generate an image, a video or audio (music, speech) from a text prompt "
        "through the configured media provider.",
        handler=handler,
        side_effects=True,  # a call to the (often paid) media provider
        parameters=(
            ActionParameter(name="prompt", description="what to generate, in words", required=True),
            ActionParameter(
                name="mediaType",
                description="force image, video or audio (inferred from the prompt otherwise)",
                schema=ParameterSchema(type="string", enum=list(MEDIA_TYPES)),
            ),
        ),
        examples=(
            (
                ActionExample(name="user", text="draw a picture of a lighthouse at dusk"),
                ActionExample(
                    name="agent", text="Here is the generated image.", actions=["GENERATE_MEDIA"]
                ),
            ),
        ),
    )
