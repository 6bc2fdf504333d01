"""Operator settings of the media built-ins (``actions.media``, ``.avatar``, ``.emotes``)."""

from __future__ import annotations

from typing import Any

import httpx
from pydantic import Field, field_validator

from agentplug.actions.builtins._shared import SettingsSection


class MediaSettings(SettingsSection):
    """``actions.media``."""

    provider: str | None = None
    """Provider id used by ``GENERATE_MEDIA`` (default: the first registered)."""
    vision_provider: str | None = None
    """Provider id used by ``ANALYZE_IMAGE`` (default: ``provider``)."""
    timeout_seconds: float = Field(default=300.0, gt=0, le=3600)


class AvatarSettings(SettingsSection):
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


class EmoteSettings(SettingsSection):
    """``actions.emotes``."""

    catalogue: str | list[Any] | dict[str, Any] | None = None
    """Path to a JSON catalogue, or the catalogue inline; default: the built-in one."""
