"""The model-provider interface: messages, tool schemas and options in; a reply out.

A provider is any object with a ``name`` and an async :meth:`ModelProvider.complete`.
It receives a :class:`ModelRequest` (the chat messages in the OpenAI-style shape every
OpenAI-compatible server speaks, the tool schemas and per-call options) and returns a
:class:`ModelResponse`: the text, the tool calls, the usage and the provider's request
id. Streaming is optional: a provider that implements ``stream`` yields
:class:`ModelDelta` chunks, then the response; the runner streams when someone listens
(``runner.stream(...)``, ``on_delta``) and releases the text as the delivery hooks allow
(:mod:`agentplug.agent.streaming`).

Failures are :class:`ProviderError`: one line naming the provider, what went wrong and
what to do. The runner turns them into a failed attempt (no ``llm_output``) and a failed
turn (``agent_end(success=False)``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from agentplug.core.errors import AgentplugError

__all__ = [
    "ModelDelta",
    "ModelProvider",
    "ModelRequest",
    "ModelResponse",
    "ProviderError",
    "StreamingProvider",
    "ToolCall",
    "ToolSchema",
]


class ProviderError(AgentplugError):
    """A provider call failed (HTTP error, timeout, malformed body, bad config).

    ``kind`` is a short machine-readable class: ``http``, ``timeout``, ``malformed``,
    ``config``, ``connection``, ``scripted``, ``limit`` (a response over a bound).
    ``status`` is the HTTP status of an ``http`` error; ``retry_after`` the wait the
    server asked for (the runner retries 429, 5xx, connection failures and timeouts:
    :mod:`agentplug.agent.retries`).
    """

    def __init__(
        self,
        message: str,
        *,
        kind: str = "error",
        status: int | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.kind = kind
        self.status = status
        self.retry_after = retry_after
        """Seconds the server asked to wait before another attempt (``Retry-After``)."""


@dataclass(frozen=True)
class ToolSchema:
    """A tool offered to the model: name, description and a JSON schema of its input."""

    name: str
    description: str
    parameters: Mapping[str, Any] = field(
        default_factory=lambda: {"type": "object", "properties": {}}
    )

    def to_openai(self) -> dict[str, Any]:
        """The chat-completions ``tools[]`` entry."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": dict(self.parameters),
            },
        }


@dataclass(frozen=True)
class ToolCall:
    """One tool call the model asked for: its id, the tool name and the arguments."""

    id: str
    name: str
    arguments: Mapping[str, Any] = field(default_factory=dict)
    raw_arguments: str | None = None
    """The provider's argument text when it was not a JSON object (reported to the model)."""


@dataclass
class ModelRequest:
    """What one provider call receives.

    ``messages`` are ``{"role": "system"|"user"|"assistant"|"tool", "content": ...}``
    dicts (assistant messages may carry ``tool_calls``, tool messages ``tool_call_id``);
    tool result ``details`` are stripped before they get here.
    """

    model: str
    messages: list[dict[str, Any]]
    tools: list[ToolSchema] = field(default_factory=list)
    options: dict[str, Any] = field(default_factory=dict)
    max_response_bytes: int | None = None
    """Most bytes of response to read (``agent.limits.model_response_bytes``); a provider
    that reads more fails the call with a ``limit`` :class:`ProviderError`."""
    max_tool_calls: int | None = None
    """Most tool calls the runner will run from one response
    (``agent.limits.tool_calls_per_response``): a provider may stop building calls past it
    and count the rest in :attr:`ModelResponse.dropped_tool_calls`."""
    output_schema: Mapping[str, Any] | None = None
    """The JSON schema the final answer must match (a turn's ``output_type``); a provider
    that can ask its server for it (``response_format``) does, the runner validates the
    answer either way."""
    output_name: str = "output"
    """The name of :attr:`output_schema` (``response_format.json_schema.name``)."""


@dataclass
class ModelResponse:
    """What one provider call returned."""

    text: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    usage: dict[str, Any] | None = None
    request_id: str | None = None
    """The provider's request id (hashed before any hook sees it)."""
    finish_reason: str | None = None
    dropped_tool_calls: int = 0
    """Tool calls the provider counted but did not build (past
    :attr:`ModelRequest.max_tool_calls`)."""
    model: str | None = None
    """The model that answered, when the server says (it may name a dated version)."""

    @property
    def has_output(self) -> bool:
        """Whether the attempt produced anything (text or tool calls)."""
        return bool(self.text) or bool(self.tool_calls) or self.dropped_tool_calls > 0


@dataclass(frozen=True)
class ModelDelta:
    """A streamed chunk of reply text."""

    text: str


@runtime_checkable
class ModelProvider(Protocol):
    """The interface every model provider implements."""

    name: str
    """The provider id used in ``agent.model: "<name>/<model>"``."""

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """Run one model call; raise :class:`ProviderError` on failure."""
        ...


@runtime_checkable
class StreamingProvider(ModelProvider, Protocol):
    """A provider that can also stream: deltas first, then the final response."""

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelDelta | ModelResponse]:
        """Yield :class:`ModelDelta` chunks, then exactly one :class:`ModelResponse`."""
        ...
