"""The agent runtime: the turn runner, model providers and tools.

``AgentRunner`` drives every hook of a turn in the documented order
(docs/agent-runtime.md); ``agentplug.agent.providers`` holds the provider interface and
the shipped ``scripted`` and ``openai`` providers; ``ToolRegistry`` offers actions and
plain Python tools to the model; ``runner.stream(...)`` yields the stream events
(``TextDelta``, ``ToolCallRequested``, ``ToolDecision``, ``ToolResult``, ``UsageUpdate``,
``ModelRetry``, ``FinalReply``).
"""

from __future__ import annotations

from agentplug.agent.config import AgentConfig, agent_config
from agentplug.agent.mcp import McpServerConfig, McpToolSource
from agentplug.agent.pipeline import CallIds, ToolCallPipeline, ToolCallRecord, ToolRequest
from agentplug.agent.providers import (
    ModelDelta,
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
from agentplug.agent.retries import RetryConfig
from agentplug.agent.runner import AgentRunner, SyncAgentRunner
from agentplug.agent.sessions import SessionSummary, UnknownSession
from agentplug.agent.spawn import SubagentRun
from agentplug.agent.streaming import (
    FinalReply,
    ModelRetry,
    StreamEvent,
    TextDelta,
    ToolCallRequested,
    ToolDecision,
    ToolResult,
    UsageUpdate,
)
from agentplug.agent.tools import Tool, ToolCallContext, ToolOutput, ToolRegistry, ToolSource
from agentplug.agent.trace import TurnTrace
from agentplug.agent.transcript import SessionRecord, StateStoreTranscripts, TranscriptStore
from agentplug.agent.turn import InboundMessage, TurnResult
from agentplug.agent.turnlog import TurnLog
from agentplug.agent.usage import TokenUsage, TurnUsage

__all__ = [
    "AgentConfig",
    "AgentRunner",
    "CallIds",
    "FinalReply",
    "InboundMessage",
    "McpServerConfig",
    "McpToolSource",
    "ModelDelta",
    "ModelProvider",
    "ModelRequest",
    "ModelResponse",
    "ModelRetry",
    "OpenAIProvider",
    "ProviderError",
    "ProviderRegistry",
    "RetryConfig",
    "ScriptedProvider",
    "SessionRecord",
    "SessionSummary",
    "StateStoreTranscripts",
    "StreamEvent",
    "SubagentRun",
    "SyncAgentRunner",
    "TextDelta",
    "TokenUsage",
    "Tool",
    "ToolCall",
    "ToolCallContext",
    "ToolCallPipeline",
    "ToolCallRecord",
    "ToolCallRequested",
    "ToolDecision",
    "ToolOutput",
    "ToolRegistry",
    "ToolRequest",
    "ToolResult",
    "ToolSchema",
    "ToolSource",
    "TranscriptStore",
    "TurnLog",
    "TurnResult",
    "TurnTrace",
    "TurnUsage",
    "UnknownSession",
    "UsageUpdate",
    "agent_config",
]
