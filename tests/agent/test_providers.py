"""Provider registry: config names, third-party entry points, the agent config section."""

from __future__ import annotations

import asyncio

import pytest
from agentplug import PluginHost
from agentplug.agent import AgentRunner, ProviderError, ProviderRegistry, agent_config
from agentplug.agent.providers import split_model
from agentplug.core.errors import ConfigError

from tests.conftest import FakeDist

ECHO = """
from agentplug.agent import ModelResponse


class Echo:
    name = "echo"

    def __init__(self, options):
        self.prefix = options.get("prefix", "echo")

    async def complete(self, request):
        last = request.messages[-1]["content"]
        return ModelResponse(text=f"{self.prefix}: {last} ({request.model})")


def make(options):
    return Echo(options)
"""


def test_a_third_party_provider_joins_through_the_entry_point_group(fake_dist: FakeDist) -> None:
    fake_dist(
        "fakeplug-echo",
        "fakeplug_echo",
        ECHO,
        {"echo": "fakeplug_echo:make"},
        group="agentplug.providers",
    )
    config = {
        "model": "echo/tiny",
        "tools": {"actions": False},
        "providers": {"echo": {"prefix": "ECHO"}},
    }
    runner = AgentRunner(PluginHost(), config=config)
    result = asyncio.run(runner.run_turn("hello", session_key="s1"))
    assert result.reply == "ECHO: hello (tiny)"
    assert "echo" in runner.providers.names()


def test_a_broken_provider_entry_point_does_not_stop_the_others(
    fake_dist: FakeDist, caplog: pytest.LogCaptureFixture
) -> None:
    fake_dist(
        "fakeplug-bad",
        "fakeplug_bad",
        "raise ImportError('no')\n",
        {"bad": "fakeplug_bad:make"},
        group="agentplug.providers",
    )
    registry = ProviderRegistry()
    with pytest.raises(ProviderError, match="unknown model provider 'bad'"):
        registry.get("bad")
    assert "provider 'bad'" in caplog.text and "failed to load" in caplog.text
    assert registry.get("scripted").name == "scripted"


def test_openai_presets_point_at_local_servers() -> None:
    provider = ProviderRegistry().get("ollama")
    assert provider.url == "http://127.0.0.1:11434/v1/chat/completions"  # type: ignore[attr-defined]


def test_split_model_keeps_slashes_in_the_model_name() -> None:
    assert split_model("openrouter/meta-llama/llama-3") == ("openrouter", "meta-llama/llama-3")
    assert split_model("gpt-4o") == ("scripted", "gpt-4o")


def test_an_unknown_agent_config_key_names_the_key() -> None:
    with pytest.raises(ConfigError, match=r"agent\.max_stepz"):
        agent_config({"max_stepz": 3})


def test_an_invalid_agent_config_value_names_the_key() -> None:
    with pytest.raises(ConfigError, match=r"agent\.max_steps"):
        agent_config({"max_steps": 0})
