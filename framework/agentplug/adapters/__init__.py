"""Adapters that put agentplug's plugins in front of other agent frameworks.

* :mod:`agentplug.adapters.pydantic_ai`: :class:`AgentplugCapability` for a PydanticAI
  ``Agent`` (extra ``agentplug[pydantic-ai]``);
* :mod:`agentplug.adapters.langchain`: :class:`AgentplugMiddleware` for LangChain 1.x
  ``create_agent`` (extra ``agentplug[langchain]``).

Both run each tool call through the gateway's
:class:`~agentplug.agent.pipeline.ToolCallPipeline` (the runner's own tool-call path) and
the final text through ``message_sending`` /
``reply_payload_sending``. Nothing here imports a framework until you import its
adapter module, so ``import agentplug`` stays light (docs/integrations.md).
"""

from __future__ import annotations

__all__: list[str] = []
