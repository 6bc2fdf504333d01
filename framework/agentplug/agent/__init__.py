"""The agent runtime: the turn runner, model providers and tools.

``AgentRunner`` drives every hook of a turn in the documented order
(docs/agent-runtime.md); ``agentplug.agent.providers`` holds the provider interface and
the shipped ``scripted`` and ``openai`` providers; ``ToolRegistry`` offers actions and
plain Python tools to the model.
"""

from __future__ import annotations

from agentplug.agent.config import AgentConfig, agent_config
from agentplug.agent.mcp import McpServerConfig, McpToolSource
from agentplug.agent.pipeline import CallIds, ToolCallPipeline, ToolCallRecord, ToolRequest
from agentplug.agent.providers import (
    ModelProvider,
    ModelRequest,
    ModelResponse,
    ProviderError,
    ProviderRegistry,
    ToolCall,
    ToolSchema,
)
from agentplug.agent.providers.openai import OpenAIProvider
from agentplug.agent.providers.scripted import ScriptedProvider
from agentplug.agent.runner import AgentRunner, SyncAgentRunner
from agentplug.agent.sessions import SessionSummary, UnknownSession
from agentplug.agent.spawn import SubagentRun
from agentplug.agent.tools import Tool, ToolCallContext, ToolOutput, ToolRegistry, ToolSource
from agentplug.agent.trace import TurnTrace
from agentplug.agent.transcript import SessionRecord, StateStoreTranscripts, TranscriptStore
from agentplug.agent.turn import InboundMessage, TurnResult
from agentplug.agent.turnlog import TurnLog

__all__ = [
    "AgentConfig",
    "AgentRunner",
    "CallIds",
    "InboundMessage",
    "McpServerConfig",
    "McpToolSource",
    "ModelProvider",
    "ModelRequest",
    "ModelResponse",
    "OpenAIProvider",
    "ProviderError",
    "ProviderRegistry",
    "ScriptedProvider",
    "SessionRecord",
    "SessionSummary",
    "StateStoreTranscripts",
    "SubagentRun",
    "SyncAgentRunner",
    "Tool",
    "ToolCall",
    "ToolCallContext",
    "ToolCallPipeline",
    "ToolCallRecord",
    "ToolOutput",
    "ToolRegistry",
    "ToolRequest",
    "ToolSchema",
    "ToolSource",
    "TranscriptStore",
    "TurnLog",
    "TurnResult",
    "TurnTrace",
    "UnknownSession",
    "agent_config",
]
