"""Media built-ins (ACTIONS.md §4): ``GENERATE_MEDIA``, ``ANALYZE_IMAGE`` and ``PLAY_EMOTE``.

Media providers are plugins
---------------------------
agentplug ships no media provider. A provider implements :class:`MediaProvider` and adds
itself to the runtime's ``media`` service, a :class:`MediaProviders` registry, from its
``register(api)`` function::

    from agentplug.actions.builtins.media import media_providers

    def register(api):
        media_providers(api.actions).add(api.plugin_id, MyProvider(api.plugin_config))

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

The package is split by job: :mod:`.providers` (contract and registry), :mod:`.settings`,
:mod:`.generate` (``GENERATE_MEDIA``), :mod:`.analyze` (``ANALYZE_IMAGE``) and :mod:`.emotes`
(``PLAY_EMOTE`` and the catalogue); this module holds the entry point.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentplug.actions.builtins._shared import load_settings
from agentplug.actions.builtins.media.analyze import analyze_action
from agentplug.actions.builtins.media.emotes import (
    Emote,
    EmoteCatalogue,
    emote_action,
    load_emote_catalogue,
)
from agentplug.actions.builtins.media.generate import generate_action, infer_media_type
from agentplug.actions.builtins.media.providers import (
    MEDIA_SERVICE,
    MEDIA_TYPES,
    NO_PROVIDER_TEXT,
    MediaProvider,
    MediaProviderError,
    MediaProviders,
    MediaResult,
    MediaType,
    UnsupportedMediaType,
    media_providers,
)
from agentplug.actions.builtins.media.settings import AvatarSettings, EmoteSettings, MediaSettings
from agentplug.actions.model import Action

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
    return [generate_action(media), analyze_action(media), emote_action(catalogue, avatar)]
