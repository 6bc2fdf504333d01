"""The media provider contract and the ``media`` service (:class:`MediaProviders` registry).

Holds the media types, :class:`MediaProvider` / :class:`MediaResult` and the provider errors,
the registry with :func:`media_providers`, and the choice of the provider an action uses.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any, Literal, Protocol, TypeAlias, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from agentplug.actions.builtins._shared import get_or_register
from agentplug.actions.model import (
    ActionResult,
    ActionRuntime,
    Attachment,
)

__all__ = [
    "MEDIA_SERVICE",
    "MEDIA_TYPES",
    "NO_PROVIDER_TEXT",
    "MediaProvider",
    "MediaProviderError",
    "MediaProviders",
    "MediaResult",
    "MediaType",
    "UnsupportedMediaType",
    "media_providers",
    "pick_provider",
]

MEDIA_SERVICE = "media"

MediaType: TypeAlias = Literal["image", "video", "audio"]
MEDIA_TYPES: tuple[MediaType, ...] = ("image", "video", "audio")

NO_PROVIDER_TEXT = (
    "No media provider is configured: install one, e.g. agentplug-media-openai "
    "(pip install agentplug-media-openai), and set its settings under "
    "plugins.entries.media-openai.config (base_url, api_key_env naming the environment "
    "variable that holds the API key, model). Any plugin can provide media by adding a "
    "MediaProvider to the 'media' service (agentplug.actions.builtins.media.media_providers)."
)
"""The answer of the media actions when no provider is registered."""


class MediaResult(BaseModel):
    """What :meth:`MediaProvider.generate` returns: the media as attachments."""

    model_config = ConfigDict(frozen=True)

    attachments: list[Attachment] = Field(default_factory=list)
    text: str = ""
    """Optional note from the provider (revised prompt, model used...)."""
    data: dict[str, Any] | None = None


class MediaProviderError(Exception):
    """A provider could not do what was asked; the message is shown to the user."""


class UnsupportedMediaType(MediaProviderError):
    """The provider does not generate this kind of media."""


@runtime_checkable
class MediaProvider(Protocol):
    """A media back-end (OpenAI-compatible API, FAL, a local model...)."""

    async def generate(self, prompt: str, media_type: MediaType) -> MediaResult:
        """Generate ``media_type`` from ``prompt``; raise :class:`UnsupportedMediaType` when
        this provider does not produce that kind of media."""
        ...

    async def analyze_image(
        self, *, prompt: str, image_url: str | None = None, image_base64: str | None = None
    ) -> str:
        """Describe / answer ``prompt`` about the image (exactly one of url / base64 given)."""
        ...


class MediaProviders:
    """The ``media`` service: media providers by id, in registration order."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._providers: dict[str, MediaProvider] = {}

    def add(self, provider_id: str, provider: MediaProvider, *, replace: bool = False) -> None:
        """Register ``provider`` as ``provider_id``; a second id clash raises ``ValueError``."""
        if not isinstance(provider, MediaProvider):
            raise TypeError(
                f"media provider {provider_id!r} ({type(provider).__name__}) must implement "
                "async generate(prompt, media_type) and async analyze_image(...)"
            )
        with self._lock:
            if provider_id in self._providers and not replace:
                raise ValueError(
                    f"a media provider called {provider_id!r} is already registered; pass "
                    "replace=True or use another id"
                )
            self._providers[provider_id] = provider

    def remove(self, provider_id: str) -> MediaProvider | None:
        """Unregister ``provider_id``; return it, or ``None``."""
        with self._lock:
            return self._providers.pop(provider_id, None)

    def get(self, provider_id: str) -> MediaProvider | None:
        """The provider registered as ``provider_id``, or ``None``."""
        with self._lock:
            return self._providers.get(provider_id)

    def ids(self) -> list[str]:
        """Registered provider ids, in registration order."""
        with self._lock:
            return list(self._providers)

    def __len__(self) -> int:
        with self._lock:
            return len(self._providers)


def media_providers(runtime: object) -> MediaProviders:
    """The runtime's ``media`` registry (created and registered on first use)."""
    return get_or_register(runtime, MEDIA_SERVICE, MediaProviders, MediaProviders)


def pick_provider(
    runtime: ActionRuntime, preferred: Sequence[tuple[str, str | None]]
) -> tuple[str, MediaProvider] | ActionResult:
    """The provider to use, or the failed result explaining why there is none."""
    service = runtime.get_service(MEDIA_SERVICE)
    if service is None:
        return ActionResult.failure(NO_PROVIDER_TEXT, reason="no_provider")
    if isinstance(service, MediaProviders):
        ids = service.ids()
        if not ids:
            return ActionResult.failure(NO_PROVIDER_TEXT, reason="no_provider")
        for key, wanted in preferred:
            if wanted is None:
                continue
            provider = service.get(wanted)
            if provider is None:
                return ActionResult.failure(
                    f"{key} names the media provider {wanted!r}, which is not registered "
                    f"(registered: {', '.join(ids)}).",
                    reason="unknown_provider",
                    registered=ids,
                )
            return wanted, provider
        first = service.get(ids[0])
        assert first is not None
        return ids[0], first
    if isinstance(service, MediaProvider):
        return type(service).__name__, service
    return ActionResult.failure(
        f"The {MEDIA_SERVICE!r} service ({type(service).__name__}) is not a media provider "
        "registry nor a MediaProvider; register providers with "
        "agentplug.actions.builtins.media.media_providers(runtime).add(...).",
        reason="bad_media_service",
    )
