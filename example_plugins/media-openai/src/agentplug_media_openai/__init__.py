"""media-openai: an OpenAI-compatible
:class:`~agentplug.actions.builtins.media.MediaProvider`.

Registered from ``register(api)`` into the runtime's ``media`` service, so the built-in
``GENERATE_MEDIA`` and ``ANALYZE_IMAGE`` actions use it:

* ``image``: ``POST {base_url}/images/generations`` (``model``, ``prompt``, ``n``, ``size``);
  a ``url`` answer is returned as is, a ``b64_json`` one as a ``data:`` URL.
* ``audio``: ``POST {base_url}/audio/speech`` (``speech_model``, ``voice``): the prompt is
  spoken; the audio comes back as a ``data:audio/...;base64`` URL.
* ``video``: not offered (raises :class:`~agentplug.actions.builtins.media.UnsupportedMediaType`).
* analysis: ``POST {base_url}/chat/completions`` with a text part and an ``image_url`` part
  (an http(s) URL, or the base64 image as a ``data:`` URL) on ``vision_model``.

The API key is read, at each request, from the environment variable named by ``api_key_env``
(never from the config file itself); ``api_key_env: null`` sends no key (local servers).
Responses are read up to ``max_response_bytes``; errors name the HTTP status and the API's
own message, never the key.
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Mapping
from typing import Any

import httpx
from agentplug import PluginApi
from agentplug.actions.builtins.media import (
    MediaProviderError,
    MediaResult,
    MediaType,
    UnsupportedMediaType,
    media_providers,
)
from agentplug.actions.model import Attachment
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

__all__ = [
    "PLUGIN_ID",
    "OpenAIMediaConfig",
    "OpenAIMediaProvider",
    "register",
]

PLUGIN_ID = "media-openai"

_AUDIO_TYPES = {
    "mp3": "audio/mpeg",
    "opus": "audio/opus",
    "aac": "audio/aac",
    "flac": "audio/flac",
    "wav": "audio/wav",
    "pcm": "audio/pcm",
}


class OpenAIMediaConfig(BaseModel):
    """``plugins.entries.media-openai.config``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    base_url: str = "https://api.openai.com/v1"
    api_key_env: str | None = "OPENAI_API_KEY"
    """Name of the environment variable holding the API key (``null``: send none)."""
    model: str = "gpt-image-1"
    """Image generation model."""
    image_size: str = "1024x1024"
    vision_model: str = "gpt-4o-mini"
    speech_model: str = "gpt-4o-mini-tts"
    voice: str = "alloy"
    audio_format: str = "mp3"
    timeout_seconds: float = Field(default=120.0, gt=0, le=3600)
    max_response_bytes: int = Field(default=32 * 1024 * 1024, gt=0)
    trust_env: bool = True
    """Honour ``HTTPS_PROXY`` & co. (set ``false`` for a local server)."""

    @field_validator("base_url")
    @classmethod
    def _http_base(cls, value: str) -> str:
        try:
            parsed = httpx.URL(value)
        except httpx.InvalidURL as exc:
            raise ValueError(f"{value!r} is not a valid URL: {exc}") from exc
        if parsed.scheme not in ("http", "https") or not parsed.host:
            raise ValueError(f"{value!r} must be an http(s) URL such as https://api.openai.com/v1")
        return value.rstrip("/")

    @field_validator("audio_format")
    @classmethod
    def _known_format(cls, value: str) -> str:
        if value not in _AUDIO_TYPES:
            raise ValueError(f"{value!r} is not one of {', '.join(_AUDIO_TYPES)}")
        return value


def _sniff_image_type(data: bytes) -> str:
    if data.startswith(b"\x89PNG"):
        return "image/png"
    if data.startswith(b"\xff\xd8"):
        return "image/jpeg"
    if data[:6] in (b"GIF87a", b"GIF89a"):
        return "image/gif"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return "image/png"


class OpenAIMediaProvider:
    """Media through an OpenAI-compatible API (see the module docstring)."""

    def __init__(
        self,
        config: OpenAIMediaConfig | None = None,
        *,
        env: Mapping[str, str] | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.config = config or OpenAIMediaConfig()
        self._env = env
        self._transport = transport

    # -- MediaProvider

    async def generate(self, prompt: str, media_type: MediaType) -> MediaResult:
        """Generate an image or speech audio; video is not offered."""
        if media_type == "image":
            return await self._image(prompt)
        if media_type == "audio":
            return await self._speech(prompt)
        raise UnsupportedMediaType(
            "media-openai generates images and speech audio only; install a video provider"
        )

    async def analyze_image(
        self, *, prompt: str, image_url: str | None = None, image_base64: str | None = None
    ) -> str:
        """Ask ``vision_model`` about the image."""
        if image_url is not None:
            url = image_url
        elif image_base64 is not None:
            url = image_base64 if image_base64.startswith("data:") else self._data_url(image_base64)
        else:
            raise MediaProviderError("give image_url or image_base64")
        body = {
            "model": self.config.vision_model,
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": prompt},
                        {"type": "image_url", "image_url": {"url": url}},
                    ],
                }
            ],
        }
        answer = self._json(await self._post("/chat/completions", body))
        try:
            content = answer["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError):
            raise MediaProviderError("the API answer has no choices[0].message.content") from None
        if isinstance(content, list):  # some servers answer with content parts
            content = "".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping))
        if not isinstance(content, str):
            raise MediaProviderError("the API answered with non-text content")
        return content

    # -- operations

    async def _image(self, prompt: str) -> MediaResult:
        body = {
            "model": self.config.model,
            "prompt": prompt,
            "n": 1,
            "size": self.config.image_size,
        }
        answer = self._json(await self._post("/images/generations", body))
        items = answer.get("data")
        if not isinstance(items, list) or not items or not isinstance(items[0], Mapping):
            raise MediaProviderError("the API answer has no data[0] image")
        item = items[0]
        revised = item.get("revised_prompt")
        if isinstance(item.get("url"), str):
            url = item["url"]
            content_type: str | None = None
        elif isinstance(item.get("b64_json"), str):
            raw = item["b64_json"]
            content_type = _sniff_image_type(_b64_head(raw))
            url = f"data:{content_type};base64,{raw}"
        else:
            raise MediaProviderError("the API answer has neither data[0].url nor b64_json")
        attachment = Attachment(
            url=url,
            content_type=content_type,
            title=prompt[:80],
            description=revised if isinstance(revised, str) else None,
        )
        return MediaResult(
            attachments=[attachment], data={"model": self.config.model, "revised_prompt": revised}
        )

    async def _speech(self, prompt: str) -> MediaResult:
        body = {
            "model": self.config.speech_model,
            "input": prompt,
            "voice": self.config.voice,
            "response_format": self.config.audio_format,
        }
        audio = await self._post("/audio/speech", body)
        if not audio:
            raise MediaProviderError("the API returned empty audio")
        content_type = _AUDIO_TYPES[self.config.audio_format]
        encoded = base64.b64encode(audio).decode("ascii")
        attachment = Attachment(
            url=f"data:{content_type};base64,{encoded}",
            content_type=content_type,
            title=prompt[:80],
        )
        return MediaResult(attachments=[attachment], data={"model": self.config.speech_model})

    # -- HTTP

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json"}
        name = self.config.api_key_env
        if name is None:
            return headers
        env = self._env if self._env is not None else os.environ
        key = env.get(name, "").strip()
        if not key:
            raise MediaProviderError(
                f"no API key: set the environment variable {name} (named by "
                f"plugins.entries.{PLUGIN_ID}.config.api_key_env)"
            )
        headers["Authorization"] = f"Bearer {key}"
        return headers

    async def _post(self, path: str, body: Mapping[str, Any]) -> bytes:
        headers = self._headers()
        url = self.config.base_url + path
        limit = self.config.max_response_bytes
        try:
            async with (
                httpx.AsyncClient(
                    timeout=self.config.timeout_seconds,
                    trust_env=self.config.trust_env,
                    follow_redirects=False,
                    transport=self._transport,
                ) as client,
                client.stream("POST", url, headers=headers, json=dict(body)) as response,
            ):
                chunks: list[bytes] = []
                size = 0
                async for chunk in response.aiter_bytes():
                    size += len(chunk)
                    if size > limit:
                        raise MediaProviderError(
                            f"the API answer is larger than max_response_bytes ({limit})"
                        )
                    chunks.append(chunk)
                status = response.status_code
        except httpx.TimeoutException:
            raise MediaProviderError(
                f"{url} did not answer within {self.config.timeout_seconds:g} s"
            ) from None
        except httpx.HTTPError as exc:
            raise MediaProviderError(f"request to {url} failed: {exc}") from None
        data = b"".join(chunks)
        if not 200 <= status < 300:
            raise MediaProviderError(f"{url} answered HTTP {status}: {_api_error(data)}")
        return data

    @staticmethod
    def _json(data: bytes) -> dict[str, Any]:
        try:
            value = json.loads(data)
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise MediaProviderError("the API answer is not JSON") from None
        if not isinstance(value, dict):
            raise MediaProviderError("the API answer is not a JSON object")
        return value

    @staticmethod
    def _data_url(raw: str) -> str:
        compact = "".join(raw.split())
        return f"data:{_sniff_image_type(_b64_head(compact))};base64,{compact}"


def _b64_head(raw: str) -> bytes:
    head = "".join(raw[:64].split())
    head = head[: len(head) - len(head) % 4]
    try:
        return base64.b64decode(head)
    except ValueError:
        return b""


def _api_error(data: bytes) -> str:
    """The API's own error message (OpenAI shape ``{"error": {"message": ...}}``), bounded."""
    try:
        value = json.loads(data)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return data[:200].decode("utf-8", errors="replace").strip() or "(no body)"
    if isinstance(value, Mapping):
        error = value.get("error")
        if isinstance(error, Mapping) and isinstance(error.get("message"), str):
            return str(error["message"])[:300]
        if isinstance(error, str):
            return error[:300]
    return json.dumps(value)[:200]


def load_config(raw: Mapping[str, Any]) -> OpenAIMediaConfig:
    """Validate the plugin config; errors name ``plugins.entries.media-openai.config.<key>``."""
    try:
        return OpenAIMediaConfig.model_validate(dict(raw))
    except ValidationError as exc:
        problems = "; ".join(
            f"plugins.entries.{PLUGIN_ID}.config.{'.'.join(str(p) for p in err['loc'])}: "
            f"{err['msg']}"
            for err in exc.errors()
        )
        raise ValueError(problems) from None


def register(api: PluginApi) -> None:
    """Add an :class:`OpenAIMediaProvider` to the runtime's ``media`` service."""
    provider = OpenAIMediaProvider(load_config(api.plugin_config))
    media_providers(api.host.gateway.actions).add(api.plugin_id, provider)
