"""The agent layer's public names: the runner and its results at the front door, the
providers and tools in the public subpackage ``agentplug.agent``."""

from __future__ import annotations

import subprocess
import sys

import agentplug

NAMES = ("AgentRunner", "InboundMessage", "TurnResult", "ScriptedProvider", "ToolCallPipeline")
AGENT_NAMES = (
    "ToolRegistry",
    "ModelProvider",
    "ModelRequest",
    "ModelResponse",
    "ProviderError",
    "ProviderRegistry",
    "OpenAIProvider",
    "McpServerConfig",
    "McpToolSource",
    "CallIds",
)


def test_import_agentplug_does_not_import_the_agent_layer() -> None:
    code = "import sys, agentplug; print(any(m.startswith('agentplug.agent') for m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


def test_the_agent_names_are_public_documented_and_resolve() -> None:
    for name in NAMES:
        assert name in agentplug.__all__, name
        value = getattr(agentplug, name)
        assert value.__doc__, name


def test_the_providers_and_tools_are_public_in_the_agent_subpackage() -> None:
    import agentplug.agent

    for name in AGENT_NAMES:
        assert name in agentplug.agent.__all__, name
        assert getattr(agentplug.agent, name).__doc__, name
