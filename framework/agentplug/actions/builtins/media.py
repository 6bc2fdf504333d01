"""Media built-ins (ACTIONS.md §4): ``GENERATE_MEDIA``, ``ANALYZE_IMAGE`` and ``PLAY_EMOTE``.

Media providers are plugins
---------------------------
agentplug ships no media provider. A provider implements :class:`MediaProvider` and adds
itself to the runtime's ``media`` service, a :class:`MediaProviders` registry, from its
``register(api)`` function::

    from agentplug.actions.builtins.media import media_providers

    def register(api):
        media_providers(api.host.actions).add(api.plugin_id, MyProvider(api.plugin_config))

(:func:`media_providers` returns the registry, creating and registering it if needed, so
plugin registration order does not matter.) A host may instead register a single provider
object directly: ``runtime.register_service("media", provider)``.

With several providers, ``actions.media.provider`` names the one used for generation and
``actions.media.visionProvider`` the one used for ``ANALYZE_IMAGE`` (default: ``provider``,
else the first registered). With none, both actions answer with a failed result that says how
to install one (for example the ``agentplug-media-openai`` example package).

``GENERATE_MEDIA`` (``prompt``, optional ``mediaType`` = ``image`` | ``video`` | ``audio``)
    Without ``mediaType`` the type is inferred from the prompt: the earliest word naming a
    medium wins (``a song about a picture`` is audio), ``image`` by default.

``ANALYZE_IMAGE`` (``imageUrl`` or ``imageBase64``, optional ``prompt``)
    ``imageUrl`` must be ``http(s)`` or a ``data:`` URL; ``imageBase64`` is bare base64 or a
    ``data:`` URL and is passed to the provider as given.

``PLAY_EMOTE`` (``emote``)
    Looks the emote up (id, name or alias, case-insensitive) in the catalogue: the built-in
    ``agentplug/data/emotes.json``, or ``actions.emotes.catalogue`` (a path to a JSON file, or
    the catalogue inline: a list of emotes or ``{"emotes": [...]}``). It then POSTs
    ``{"emote": id, "name", "duration", "loop"}`` to ``actions.avatar.url`` through the
    SSRF-guarded client with exactly that host and port allowlisted (redirects are not
    followed). An unknown emote is a failed result listing close matches.

Settings::

    {"actions": {"media": {"provider": "media-openai", "visionProvider": null,
                           "timeoutSeconds": 300},
                 "avatar": {"url": "http://127.0.0.1:31337/api/avatar/emote",
                            "timeoutSeconds": 5},
                 "emotes": {"catalogue": "/etc/agent/emotes.json"}}}

Invalid settings raise :class:`~agentplug.core.errors.ConfigError` naming
``actions.<section>.<key>`` when the built-ins are registered.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import difflib
import json
import re
import threading
from collections.abc import Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeAlias, runtime_checkable

import httpx
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from agentplug.actions.builtins.comms import _get_or_register, _Section, load_settings
from agentplug.actions.model import (
    Action,
    ActionExample,
    ActionParameter,
    ActionResult,
    ActionRuntime,
    Attachment,
    HandlerOptions,
    Message,
    ParameterSchema,
    State,
)
from agentplug.core.errors import ConfigError
from agentplug.security.ssrf import FetchError, SSRFBlocked, SSRFPolicy, guarded_fetch

if TYPE_CHECKING:
    from agentplug.actions.runtime import AgentRuntime

__all__ = [
    "MEDIA_SERVICE",
    "MEDIA_TYPES",
    "NO_PROVIDER_TEXT",
    "AvatarSettings",
    "Emote",
    "EmoteCatalogue",
    "EmoteSettings",
    "MediaProvider",
    "MediaProviderError",
    "MediaProviders",
    "MediaResult",
    "MediaSettings",
    "MediaType",
    "UnsupportedMediaType",
    "builtin_actions",
    "infer_media_type",
    "load_emote_catalogue",
    "media_providers",
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


# ---------------------------------------------------------------------------
# Provider contract


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
    return _get_or_register(runtime, MEDIA_SERVICE, MediaProviders, MediaProviders)


# ---------------------------------------------------------------------------
# Settings


class MediaSettings(_Section):
    """``actions.media``."""

    provider: str | None = None
    """Provider id used by ``GENERATE_MEDIA`` (default: the first registered)."""
    vision_provider: str | None = None
    """Provider id used by ``ANALYZE_IMAGE`` (default: ``provider``)."""
    timeout_seconds: float = Field(default=300.0, gt=0, le=3600)


class AvatarSettings(_Section):
    """``actions.avatar``: the host's local avatar API."""

    url: str | None = None
    """Emote endpoint, e.g. ``http://127.0.0.1:31337/api/avatar/emote``."""
    timeout_seconds: float = Field(default=5.0, gt=0, le=120)

    @field_validator("url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is None:
            return None
        try:
            parsed = httpx.URL(value)
        except httpx.InvalidURL as exc:
            raise ValueError(f"{value!r} is not a valid URL: {exc}") from exc
        if parsed.scheme not in ("http", "https") or not parsed.host:
            raise ValueError(
                f"{value!r} must be an http(s) URL with a host, such as "
                "'http://127.0.0.1:31337/api/avatar/emote'"
            )
        if parsed.userinfo:
            raise ValueError("remove 'user:password@' from the URL")
        return value


class EmoteSettings(_Section):
    """``actions.emotes``."""

    catalogue: str | list[Any] | dict[str, Any] | None = None
    """Path to a JSON catalogue, or the catalogue inline; default: the built-in one."""


# ---------------------------------------------------------------------------
# Emotes


class Emote(BaseModel):
    """One catalogue entry."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    id: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
    name: str | None = None
    aliases: list[str] = Field(default_factory=list)
    description: str = ""
    duration: float | None = Field(default=None, ge=0)
    loop: bool | None = None

    def payload(self) -> dict[str, Any]:
        """The JSON body POSTed to the avatar endpoint."""
        body: dict[str, Any] = {"emote": self.id}
        for key in ("name", "duration", "loop"):
            value = getattr(self, key)
            if value is not None:
                body[key] = value
        return body


class EmoteCatalogue(BaseModel):
    """The emotes ``PLAY_EMOTE`` knows; lookups ignore case, spaces, ``-`` and ``_``."""

    model_config = ConfigDict(frozen=True)

    emotes: list[Emote] = Field(min_length=1)

    def _keys(self) -> dict[str, Emote]:
        keys: dict[str, Emote] = {}
        for emote in self.emotes:
            for label in (emote.id, emote.name or "", *emote.aliases):
                key = _emote_key(label)
                if key:
                    keys.setdefault(key, emote)
        return keys

    def find(self, query: str) -> Emote | None:
        """The emote whose id, name or alias is ``query``, or ``None``."""
        return self._keys().get(_emote_key(query))

    def close_matches(self, query: str, limit: int = 5) -> list[str]:
        """Ids of emotes whose id, name or alias looks like ``query``."""
        keys = self._keys()
        found: list[str] = []
        for key in difflib.get_close_matches(_emote_key(query), list(keys), n=20, cutoff=0.5):
            emote_id = keys[key].id
            if emote_id not in found:
                found.append(emote_id)
        return found[:limit]

    def ids(self) -> list[str]:
        """Every emote id, in catalogue order."""
        return [emote.id for emote in self.emotes]


def _emote_key(text: str) -> str:
    return re.sub(r"[\s_\-]+", "", text.casefold())


def load_emote_catalogue(source: str | list[Any] | dict[str, Any] | None = None) -> EmoteCatalogue:
    """The built-in catalogue (``None``), one read from a JSON file path, or an inline one.

    Raises :class:`ConfigError` naming ``actions.emotes.catalogue``.
    """
    key = "actions.emotes.catalogue"
    data: Any = source
    if source is None:
        text = resources.files("agentplug").joinpath("data/emotes.json").read_text("utf-8")
        data = json.loads(text)
    elif isinstance(source, str):
        path = Path(source).expanduser()
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except OSError as exc:
            raise ConfigError(
                [(key, f"cannot read {str(path)!r}: {exc.strerror or exc}")]
            ) from None
        except json.JSONDecodeError as exc:
            raise ConfigError([(key, f"{str(path)!r} is not valid JSON: {exc}")]) from None
    if isinstance(data, list):
        data = {"emotes": data}
    try:
        return EmoteCatalogue.model_validate(data)
    except ValidationError as exc:
        issues = [
            (f"{key}.{'.'.join(str(p) for p in err['loc'])}", err["msg"]) for err in exc.errors()
        ]
        raise ConfigError(issues) from None


# ---------------------------------------------------------------------------
# Handlers


def _params(options: HandlerOptions | None) -> Mapping[str, Any]:
    return options.parameters if options is not None else {}


def _text(params: Mapping[str, Any], name: str) -> str | None:
    value = params.get(name)
    return value.strip() if isinstance(value, str) and value.strip() else None


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


def _pick_provider(
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


def _generate_action(settings: MediaSettings) -> Action:
    async def handler(
        rt: ActionRuntime,
        message: Message,
        state: State | None,
        options: HandlerOptions | None,
    ) -> ActionResult:
        params = _params(options)
        prompt = _text(params, "prompt")
        if prompt is None:
            return ActionResult.failure(
                "Missing required parameter: prompt (what to generate).", action="GENERATE_MEDIA"
            )
        forced = _text(params, "mediaType")
        if forced is not None and forced.casefold() not in MEDIA_TYPES:
            return ActionResult.failure(
                f"Unknown mediaType {forced!r}: use image, video or audio.",
                action="GENERATE_MEDIA",
            )
        media_type: MediaType = infer_media_type(prompt)
        for kind in MEDIA_TYPES:
            if forced is not None and forced.casefold() == kind:
                media_type = kind
        picked = _pick_provider(rt, [("actions.media.provider", settings.provider)])
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


def _analyze_action(settings: MediaSettings) -> Action:
    async def handler(
        rt: ActionRuntime,
        message: Message,
        state: State | None,
        options: HandlerOptions | None,
    ) -> ActionResult:
        params = _params(options)
        url, b64 = _text(params, "imageUrl"), _text(params, "imageBase64")
        problem = _check_image_input(url, b64)
        if problem is not None:
            return ActionResult.failure(problem, action="ANALYZE_IMAGE")
        prompt = _text(params, "prompt") or "Describe this image in detail."
        picked = _pick_provider(
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
        parameters=(
            ActionParameter(name="imageUrl", description="http(s) or data: URL of the image"),
            ActionParameter(name="imageBase64", description="the image as base64 (or data: URL)"),
            ActionParameter(name="prompt", description="what to look for or ask about the image"),
        ),
    )


def _allow_entry(url: str) -> tuple[str, str]:
    parsed = httpx.URL(url)
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    host = parsed.host
    return (f"[{host}]:{port}" if ":" in host else f"{host}:{port}"), host


def _emote_action(catalogue: EmoteCatalogue, avatar: AvatarSettings) -> Action:
    policy: SSRFPolicy | None = None
    if avatar.url is not None:
        entry, _ = _allow_entry(avatar.url)
        policy = SSRFPolicy(
            allow_hosts=[entry],
            timeout_seconds=avatar.timeout_seconds,
            connect_timeout_seconds=avatar.timeout_seconds,
            max_response_bytes=64 * 1024,
        )

    async def handler(
        rt: ActionRuntime,
        message: Message,
        state: State | None,
        options: HandlerOptions | None,
    ) -> ActionResult:
        query = _text(_params(options), "emote")
        if query is None:
            return ActionResult.failure(
                "Missing required parameter: emote (for example "
                f"{', '.join(catalogue.ids()[:5])}).",
                action="PLAY_EMOTE",
            )
        emote = catalogue.find(query)
        if emote is None:
            close = catalogue.close_matches(query)
            hint = (
                f"Did you mean: {', '.join(close)}?"
                if close
                else f"Known emotes: {', '.join(catalogue.ids()[:12])}."
            )
            return ActionResult.failure(
                f"Unknown emote {query!r}. {hint}",
                action="PLAY_EMOTE",
                reason="unknown_emote",
                close_matches=close,
            )
        if avatar.url is None or policy is None:
            return ActionResult.failure(
                "No avatar endpoint is configured: set actions.avatar.url to the host's local "
                "avatar API (e.g. http://127.0.0.1:PORT/api/avatar/emote).",
                action="PLAY_EMOTE",
                reason="no_avatar",
            )
        payload = emote.payload()
        if message.room_id:
            payload["roomId"] = message.room_id
        data: dict[str, Any] = {"emote": emote.id, "url": avatar.url}
        try:
            response = await guarded_fetch(
                avatar.url,
                method="POST",
                headers={"Content-Type": "application/json", "Accept": "application/json"},
                body=json.dumps(payload),
                policy=policy,
            )
        except (FetchError, SSRFBlocked) as exc:
            return ActionResult.failure(
                f"Could not play emote {emote.id!r}: the avatar endpoint {avatar.url} is "
                f"unreachable ({exc}).",
                reason="avatar_unreachable",
                **data,
            )
        data["status"] = response.status
        if response.is_redirect:
            return ActionResult.failure(
                f"Could not play emote {emote.id!r}: the avatar endpoint answered with a "
                f"redirect to {response.redirect_location!r}, which is not followed; point "
                "actions.avatar.url at the final address.",
                reason="avatar_redirect",
                **data,
            )
        if not 200 <= response.status < 300:
            snippet = response.body.strip()[:200]
            detail = f": {snippet}" if snippet else ""
            return ActionResult.failure(
                f"Could not play emote {emote.id!r}: the avatar endpoint answered HTTP "
                f"{response.status}{detail}",
                reason="avatar_error",
                **data,
            )
        label = emote.name or emote.id
        return ActionResult(success=True, text=f"Playing the {label} emote.", data=data)

    return Action(
        name="PLAY_EMOTE",
        similes=("EMOTE", "AVATAR_EMOTE", "PLAY_ANIMATION", "GESTURE"),
        description="Play an emote animation (wave, dance, bow, clap...) on the avatar.",
        handler=handler,
        parameters=(
            ActionParameter(
                name="emote", description="the emote id or name, e.g. wave", required=True
            ),
        ),
        examples=(
            (
                ActionExample(name="user", text="wave at everyone!"),
                ActionExample(name="agent", text="Playing the Wave emote.", actions=["PLAY_EMOTE"]),
            ),
        ),
    )


# ---------------------------------------------------------------------------
# Entry point


def builtin_actions(runtime: AgentRuntime) -> list[Action]:
    """``GENERATE_MEDIA``, ``ANALYZE_IMAGE`` and ``PLAY_EMOTE``; registers the ``media``
    registry if the host has none. Raises :class:`ConfigError` on invalid settings."""
    actions = runtime.host.config.actions
    media = load_settings(actions, "media", MediaSettings)
    avatar = load_settings(actions, "avatar", AvatarSettings)
    emotes = load_settings(actions, "emotes", EmoteSettings)
    catalogue = load_emote_catalogue(emotes.catalogue)
    if runtime.get_service(MEDIA_SERVICE) is None:
        media_providers(runtime)
    return [_generate_action(media), _analyze_action(media), _emote_action(catalogue, avatar)]
