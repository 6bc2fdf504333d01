"""The options of the shipped providers (``agent.providers.<name>``), checked with the config.

Each shipped provider names the options it reads; anything else in its section is a
configuration error with a did-you-mean (``agent.providers.openai.base_ur``: did you
mean ``base_url``?), because an option the provider never reads would silently change
nothing: a misspelt ``base_url`` sends the request to the public OpenAI host. A section
for a provider agentplug does not ship (an entry point, or a factory the host registers)
is not checked here: only that provider knows its options.

:func:`model_problem` checks ``agent.model``: it must name its provider
(``"openai/gpt-4o-mini"``); a bare model name is refused with the likely provider.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel

from agentplug.agent.providers import SHIPPED_PROVIDERS
from agentplug.config.suggest import closest

__all__ = [
    "OpenAIOptions",
    "ScriptedOptions",
    "model_problem",
    "options_model",
    "provider_option_problems",
]


class _Options(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True
    )


class OpenAIOptions(_Options):
    """``agent.providers.openai`` (and its presets ``ollama``, ``vllm``, ...)."""

    base_url: str | None = None
    """The server's ``/v1`` URL (default ``https://api.openai.com/v1``, or the preset's)."""
    api_key_env: str | None = None
    """The environment variable holding the API key (default ``OPENAI_API_KEY``)."""
    timeout_s: float | None = Field(default=None, gt=0, le=3600)
    """Total deadline of one call, body included (default 60)."""
    temperature: float | None = None
    max_tokens: int | None = Field(default=None, ge=1)
    top_p: float | None = None
    stop: str | list[str] | None = None
    seed: int | None = None
    extra_body: dict[str, Any] | None = None
    """Merged into the request body as it is (server-specific fields)."""
    response_format: bool = True
    """Send a turn's output schema as ``response_format`` (``false`` for servers that
    refuse it: the schema then goes in the prompt only)."""


class ScriptedOptions(_Options):
    """``agent.providers.scripted``."""

    responses: list[Any] = Field(default_factory=list)
    """Replies, one per model call (see the scripted provider's docstring)."""
    file: str | None = None
    """A JSON file holding more replies."""
    default: str | None = None
    """The reply once the script ran out (default: echo the last user message)."""


def options_model(provider: str) -> type[_Options] | None:
    """The options model of a shipped provider (``None`` for any other name)."""
    if provider == "scripted":
        return ScriptedOptions
    if provider in SHIPPED_PROVIDERS:
        return OpenAIOptions
    return None


def _known_keys(model: type[_Options]) -> list[str]:
    return list(model.model_fields)


def provider_option_problems(provider: str, options: Any) -> list[tuple[str, str]]:
    """``(key, problem)`` for each bad option of ``agent.providers.<provider>`` (keys
    relative to that section); empty when the provider is not a shipped one."""
    model = options_model(provider)
    if model is None:
        close = closest(provider, SHIPPED_PROVIDERS, cutoff=0.8)
        if close and not _installed(provider):
            return [
                (
                    "",
                    f"no provider is called {provider!r}; did you mean {close[0]!r}? "
                    f"(shipped: {', '.join(SHIPPED_PROVIDERS)})",
                )
            ]
        return []
    if not isinstance(options, Mapping):
        return [("", f"must be a table of options, not {type(options).__name__}")]
    problems: list[tuple[str, str]] = []
    try:
        model.model_validate(dict(options))
    except ValidationError as exc:
        known = _known_keys(model)
        for err in exc.errors():
            key = ".".join(str(p) for p in err["loc"])
            if err["type"] == "extra_forbidden":
                close = closest(str(err["loc"][0]), known)
                hint = f"did you mean {close[0]!r}? " if close else ""
                options_list = ", ".join(known)
                problem = f"unknown option of provider {provider}; {hint}(options: {options_list})"
                problems.append((key, problem))
            else:
                problems.append((key, str(err["msg"]).removeprefix("Value error, ")))
    return problems


def _installed(name: str) -> bool:
    """Whether an installed package exposes a provider ``name`` (entry point)."""
    from importlib.metadata import entry_points

    from agentplug.agent.providers import PROVIDER_ENTRY_POINT_GROUP

    return any(ep.name == name for ep in entry_points(group=PROVIDER_ENTRY_POINT_GROUP))


_FAMILIES: tuple[tuple[tuple[str, ...], str], ...] = (
    (("gpt-", "gpt4", "o1", "o3", "o4", "chatgpt", "text-embedding", "davinci"), "openai"),
    (
        ("llama", "qwen", "mistral", "mixtral", "gemma", "phi", "deepseek", "codellama"),
        "ollama",
    ),
    (("claude", "gemini", "command-r"), "openrouter"),
)


def likely_provider(model: str) -> str | None:
    """The shipped provider a bare model name most likely belongs to (``None``: no guess)."""
    lowered = model.lower()
    for prefixes, provider in _FAMILIES:
        if lowered.startswith(prefixes):
            return provider
    return None


def model_problem(spec: str) -> str | None:
    """Why ``agent.model`` is not ``"<provider>/<model>"`` (``None`` when it is)."""
    provider, sep, model = spec.partition("/")
    if sep and provider.strip() and model.strip():
        return None
    if not sep:
        guess = likely_provider(spec)
        if guess == "openrouter":
            suggestion = f"did you mean 'openrouter/<vendor>/{spec}'?"
        elif guess is not None:
            suggestion = f"did you mean '{guess}/{spec}'?"
        else:
            suggestion = f"the provider is one of: {', '.join(SHIPPED_PROVIDERS)}"
        return (
            f"{spec!r} names no provider: write '<provider>/<model>'; {suggestion} "
            "(a bare model name would run the offline scripted model)"
        )
    return f"{spec!r} has an empty provider or model; write '<provider>/<model>'"
