"""The agent layer's public names: re-exported lazily from ``agentplug``."""

from __future__ import annotations

import subprocess
import sys

import agentplug

NAMES = (
    "AgentRunner",
    "InboundMessage",
    "TurnResult",
    "ToolRegistry",
    "ModelProvider",
    "ModelRequest",
    "ModelResponse",
    "ProviderError",
    "ProviderRegistry",
    "ScriptedProvider",
    "OpenAIProvider",
    "ReplyDispatcher",
    "upstream_request_id_hash",
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
