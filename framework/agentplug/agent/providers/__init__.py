"""Model providers: the interface, the registry and the two shipped providers.

``agent.model: "provider/model"`` picks the provider by name (a ``before_model_resolve``
handler may override either part per turn). Names resolve, in order, to providers the
host registered (:meth:`ProviderRegistry.register`), to third-party providers found
through the ``agentplug.providers`` entry-point group (the entry point is a factory
``factory(options) -> provider``), then to the shipped ones: ``scripted`` (offline,
deterministic) and ``openai`` (any OpenAI-compatible server), with presets of the latter
for local servers (``ollama``, ``lmstudio``, ``llamacpp``, ``vllm``) and ``openrouter``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from importlib.metadata import entry_points
from typing import Any

from agentplug.agent.providers.base import (
    ModelDelta,
    ModelProvider,
    ModelRequest,
    ModelResponse,
    ProviderError,
    StreamingProvider,
    ToolCall,
    ToolSchema,
)
from agentplug.config.suggest import did_you_mean

__all__ = [
    "PROVIDER_ENTRY_POINT_GROUP",
    "SHIPPED_PROVIDERS",
    "ModelDelta",
    "ModelProvider",
    "ModelRequest",
    "ModelResponse",
    "ProviderError",
    "ProviderFactory",
    "ProviderRegistry",
    "StreamingProvider",
    "ToolCall",
    "ToolSchema",
    "split_model",
]

log = logging.getLogger("agentplug.agent")

PROVIDER_ENTRY_POINT_GROUP = "agentplug.providers"
ProviderFactory = Callable[[Mapping[str, Any]], ModelProvider]

_OPENAI_PRESETS: dict[str, dict[str, Any]] = {
    "ollama": {"base_url": "http://127.0.0.1:11434/v1", "api_key_env": "OLLAMA_API_KEY"},
    "lmstudio": {"base_url": "http://127.0.0.1:1234/v1", "api_key_env": "LMSTUDIO_API_KEY"},
    "llamacpp": {"base_url": "http://127.0.0.1:8080/v1", "api_key_env": "LLAMACPP_API_KEY"},
    "vllm": {"base_url": "http://127.0.0.1:8000/v1", "api_key_env": "VLLM_API_KEY"},
    "openrouter": {
        "base_url": "https://openrouter.ai/api/v1",
        "api_key_env": "OPENROUTER_API_KEY",
    },
}

SHIPPED_PROVIDERS: tuple[str, ...] = ("scripted", "openai", *_OPENAI_PRESETS)
"""The provider names agentplug ships (their options are checked with the config)."""


def split_model(spec: str, default_provider: str = "scripted") -> tuple[str, str]:
    """``"openai/gpt-4o-mini"`` -> ``("openai", "gpt-4o-mini")``; a bare model name keeps
    ``default_provider``. Only the first ``/`` splits (``openrouter/meta/llama`` works)."""
    provider, sep, model = spec.partition("/")
    if not sep:
        return default_provider, spec
    return provider, model


def _scripted(options: Mapping[str, Any]) -> ModelProvider:
    from agentplug.agent.providers.scripted import ScriptedProvider

    return ScriptedProvider.from_options(options)


def _openai_factory(preset: Mapping[str, Any]) -> ProviderFactory:
    def build(options: Mapping[str, Any]) -> ModelProvider:
        from agentplug.agent.providers.openai import OpenAIProvider

        provider = OpenAIProvider.from_options({**preset, **options})
        return provider

    return build


class ProviderRegistry:
    """Provider factories by name, and the instances built from them (one per name).

    ``options`` maps a provider name to its config section (``agent.providers``).
    """

    def __init__(self, options: Mapping[str, Mapping[str, Any]] | None = None) -> None:
        self.options = {k: dict(v) for k, v in (options or {}).items()}
        self._factories: dict[str, ProviderFactory] = {
            "scripted": _scripted,
            "openai": _openai_factory({}),
        }
        for name, preset in _OPENAI_PRESETS.items():
            self._factories[name] = _openai_factory(preset)
        self._instances: dict[str, ModelProvider] = {}
        self._entry_points_loaded = False

    def register(self, name: str, provider: ModelProvider | ProviderFactory) -> None:
        """Register a provider instance or a factory ``factory(options)`` under ``name``."""
        if isinstance(provider, ModelProvider):
            self._instances[name] = provider
        else:
            self._factories[name] = provider
            self._instances.pop(name, None)

    def _load_entry_points(self) -> None:
        if self._entry_points_loaded:
            return
        self._entry_points_loaded = True
        for ep in entry_points(group=PROVIDER_ENTRY_POINT_GROUP):
            if ep.name in self._factories:
                continue
            try:
                factory = ep.load()
            except Exception as exc:  # a broken third-party provider must not stop the host
                log.warning(
                    "provider %r (entry point %s) failed to load: %s: %s",
                    ep.name,
                    ep.value,
                    type(exc).__name__,
                    exc,
                )
                continue
            self._factories[ep.name] = factory

    def names(self) -> list[str]:
        """Every provider name known (registered, entry points, shipped)."""
        self._load_entry_points()
        return sorted(set(self._factories) | set(self._instances))

    def get(self, name: str) -> ModelProvider:
        """The provider called ``name`` (built on first use with its options)."""
        found = self._instances.get(name)
        if found is not None:
            return found
        factory = self._factories.get(name)
        if factory is None:
            self._load_entry_points()
            factory = self._factories.get(name)
        if factory is None:
            hint = did_you_mean(name, self.names(), lead="").replace("?", "? ")
            raise ProviderError(
                f"unknown model provider {name!r}: {hint}set agent.model to "
                f"'<provider>/<model>' with one of: {', '.join(self.names())} (or install "
                f"a package exposing it in the {PROVIDER_ENTRY_POINT_GROUP!r} entry-point group)",
                kind="config",
            )
        provider = factory(self.options.get(name, {}))
        self._instances[name] = provider
        return provider
