"""The ``agent`` section of the operator config.

```yaml
agent:
  model: openai/gpt-4o-mini      # "<provider>/<model>"; default scripted/default
  system_prompt: You are a helpful assistant.
  max_steps: 8                   # model calls per turn (tool loops included)
  context_token_budget: 32000    # compaction starts when the transcript passes it
  compaction_keep_messages: 6    # recent messages kept verbatim after a compaction
  deliver_timeout_ms: 15000      # default budget of a before-deliver stage
  limits:                        # bounds on model input (docs/limits.md has the table)
    tool_calls_per_response: 64
    model_response_bytes: 16777216
    tokens_per_turn: 200000      # usage limits (off unless set)
  fallback_models: [openai/gpt-4o]   # tried in order when the model keeps failing
  retry: {attempts: 3, initial_backoff_s: 0.5, max_backoff_s: 8, max_retry_after_s: 30}
  stream: {deltas: auto, block_chars: 200}   # what streamed text leaves before delivery
  tools:
    actions: true                # offer actions (built-in, plugin, custom) as tools...
    allow: ["@safe"]             # ...these: names, globs, @safe (no side effects; default)
    without_approval: []         # allowed side-effecting actions that run without asking
    exclude: []                  # tool names never offered nor run (wins over allow)
    concurrency: 4               # tool calls of one response run at once
    mcp_servers:                 # MCP servers' tools, named <server>__<tool>
      files: {command: python, args: [files_server.py]}
      search: {url: http://127.0.0.1:8000/mcp}
  providers:
    openai: {base_url: http://127.0.0.1:11434/v1, api_key_env: OPENAI_API_KEY}
    scripted: {responses: ["Hello!"], file: replies.json}
```
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
)
from pydantic.alias_generators import to_camel

from agentplug.agent.action_tools import SAFE, ToolPolicy
from agentplug.agent.limits import AgentLimits
from agentplug.agent.mcp import McpServerConfig
from agentplug.agent.retries import RetryConfig
from agentplug.core.errors import ConfigError

__all__ = ["AgentConfig", "AgentToolsConfig", "StreamConfig", "agent_config"]

DEFAULT_MODEL = "scripted/default"


class _Strict(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True
    )


class AgentToolsConfig(_Strict):
    """``agent.tools``: which tools the model is offered (docs/agent-runtime.md#tools)."""

    actions: bool = True
    """Offer actions (built-in, plugin, custom) to the model as tools, as ``allow`` says."""
    allow: list[str] = Field(default_factory=lambda: [SAFE])
    """The actions the model may call: names, ``fnmatch`` globs (``"MY_*"``) and
    ``"@safe"``, every action that declares no side effects (the default)."""
    without_approval: list[str] = Field(default_factory=list)
    """Allowed side-effecting actions (names or globs) that run without an approval;
    every other allowed side-effecting action is asked for one at each call."""
    exclude: list[str] = Field(default_factory=list)
    """Tool names or globs (any source, case-insensitive) never offered to the model, and
    refused when it names them anyway; wins over ``allow``."""
    mcp_servers: dict[str, McpServerConfig] = Field(default_factory=dict)
    """MCP servers whose tools join the registry (``{command, args, env}`` or ``{url}``)."""
    concurrency: int = Field(default=4, ge=1, le=64)
    """Tool calls of one model response run at once (1: one after another); the gate
    still decides them one by one, in call order."""

    @field_validator("allow", "without_approval", "exclude")
    @classmethod
    def _patterns(cls, value: list[str], info: ValidationInfo) -> list[str]:
        for entry in value:
            if not entry.strip():
                raise ValueError("an empty entry matches nothing; remove it")
            if entry.startswith("@") and (entry != SAFE or info.field_name != "allow"):
                if info.field_name == "exclude" and entry == SAFE:
                    raise ValueError(
                        f"{SAFE!r} in exclude would offer nothing safe; set "
                        "agent.tools.actions to false to offer no action"
                    )
                raise ValueError(
                    f"{entry!r} is not an action name or glob; the only '@' entry is "
                    f"{SAFE!r} (every action without side effects), and only in allow"
                )
        return value

    def policy(self) -> ToolPolicy:
        """The :class:`~agentplug.agent.action_tools.ToolPolicy` of these settings."""
        return ToolPolicy(tuple(self.allow), tuple(self.without_approval), tuple(self.exclude))


class StreamConfig(_Strict):
    """``agent.stream``: what streamed text may leave before the reply is delivered
    (:mod:`agentplug.agent.streaming`)."""

    deltas: Literal["auto", "preview", "blocks", "final"] = "auto"
    """``auto``: ``preview`` when nothing could rewrite or cancel the reply, else
    ``blocks``; ``preview`` is accepted only under that same condition (it falls back to
    ``blocks`` otherwise); ``final``: no text before the final reply."""
    block_chars: int = Field(default=200, ge=1, le=1024 * 1024)
    """Characters of the first block (``blocks``); each later block doubles the text."""


class AgentConfig(_Strict):
    """``agent``: the turn runner's settings (see the module docstring)."""

    model: str = DEFAULT_MODEL
    """``"<provider>/<model>"``; ``before_model_resolve`` may override either part."""
    system_prompt: str | None = None
    max_steps: int = Field(default=8, ge=1, le=100)
    """Model calls per turn before the runner stops the tool loop."""
    context_token_budget: int | None = Field(default=None, gt=0)
    """Token budget of the transcript; compaction runs when it is passed."""
    compaction_keep_messages: int = Field(default=6, ge=0)
    deliver_timeout_ms: int = Field(default=15_000, gt=0, le=600_000)
    """Default budget of each before-deliver stage of the reply dispatcher."""
    tools: AgentToolsConfig = Field(default_factory=AgentToolsConfig)
    limits: AgentLimits = Field(default_factory=AgentLimits)
    """Bounds on what a model sends (tool calls, arguments, results, reply, bytes, time)."""
    providers: dict[str, dict[str, Any]] = Field(default_factory=dict)
    """Options per provider name (``openai``, ``scripted``, third-party names)."""
    fallback_models: list[str] = Field(default_factory=list)
    """``"<provider>/<model>"`` tried in order when ``model`` keeps failing."""
    retry: RetryConfig = Field(default_factory=RetryConfig)
    """Attempts per model and the waits between them (429, 5xx, connection, timeout)."""
    stream: StreamConfig = Field(default_factory=StreamConfig)
    """What streamed text may leave before the reply is delivered."""


def agent_config(
    raw: Mapping[str, Any] | AgentConfig | None, source: str | None = None
) -> AgentConfig:
    """Validate the ``agent`` section; a :class:`ConfigError` names every bad key."""
    if isinstance(raw, AgentConfig):
        return raw
    try:
        return AgentConfig.model_validate(dict(raw or {}))
    except ValidationError as exc:
        issues = []
        for err in exc.errors():
            key = "agent." + ".".join(str(p) for p in err["loc"])
            if err["type"] == "extra_forbidden":
                issues.append((key, "unknown key (see docs/agent-runtime.md for the keys)"))
            else:
                issues.append((key, err["msg"]))
        raise ConfigError(issues, source) from None
