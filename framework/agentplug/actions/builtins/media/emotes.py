"""The ``PLAY_EMOTE`` built-in and the emote catalogue it looks emotes up in."""

from __future__ import annotations

import difflib
import json
import re
from importlib import resources
from pathlib import Path
from typing import Any

import httpx
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agentplug.actions.builtins._shared import handler_params, stripped_text_param
from agentplug.actions.builtins.media.settings import AvatarSettings
from agentplug.actions.model import (
    Action,
    ActionExample,
    ActionParameter,
    ActionResult,
    ActionRuntime,
    HandlerOptions,
    Message,
    State,
)
from agentplug.core.errors import ConfigError
from agentplug.security.ssrf import FetchError, SSRFBlocked, SSRFPolicy, guarded_fetch

__all__ = ["Emote", "EmoteCatalogue", "emote_action", "load_emote_catalogue"]


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


def _allow_entry(url: str) -> tuple[str, str]:
    parsed = httpx.URL(url)
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    host = parsed.host
    return (f"[{host}]:{port}" if ":" in host else f"{host}:{port}"), host


def emote_action(catalogue: EmoteCatalogue, avatar: AvatarSettings) -> Action:
    """The ``PLAY_EMOTE`` action over ``catalogue``, played on the ``actions.avatar`` endpoint."""
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
        query = stripped_text_param(handler_params(options), "emote")
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
        # Conversational: an animation on the operator's own avatar endpoint, nothing kept.
        side_effects=False,
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
