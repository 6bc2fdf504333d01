"""The ``agent`` section of the operator config.

```yaml
agent:
  model: openai/gpt-4o-mini      # "<provider>/<model>"; default scripted/default
  system_prompt: You are a helpful assistant.
  max_steps: 8                   # model calls per turn (tool loops included)
  context_token_budget: 32000    # compaction starts when the transcript passes it
  context_window_tokens: 128000  # the model's own window, when known (a lower bound wins)
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
  providers:                     # options of each provider (unknown ones are errors)
    openai: {base_url: http://127.0.0.1:11434/v1, api_key_env: OPENAI_API_KEY}
    scripted: {responses: ["Hello!"], file: replies.json}
  max_subagent_depth: 2          # how deep sub-agents may call sub-agents
  max_subagents_per_turn: 8      # sub-agents one turn may start
  subagents:                     # other agents this one may call as tools
    researcher:
      description: Finds facts and reports them with sources.
      model: openai/gpt-4o       # any key of this section; unset ones are the parent's
      system_prompt: You research.
      background: false          # true: the answer comes later, as a message
      timeout_s: 120
```
"""

from __future__ import annotations

import re
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
from pydantic_core import InitErrorDetails, PydanticCustomError

from agentplug.agent.action_tools import SAFE, ToolPolicy
from agentplug.agent.limits import AgentLimits
from agentplug.agent.mcp import McpServerConfig
from agentplug.agent.providers.options import model_problem, provider_option_problems
from agentplug.agent.retries import RetryConfig
from agentplug.core.errors import ConfigError

__all__ = ["AgentConfig", "AgentToolsConfig", "StreamConfig", "SubagentConfig", "agent_config"]

DEFAULT_MODEL = "scripted/default"
_SUBAGENT_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_NOT_INHERITED = frozenset({"system_prompt", "tools", "subagents"})
"""Keys a sub-agent does not take from its parent: its own prompt, tools and sub-agents."""


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
    context_window_tokens: int | None = Field(default=None, gt=0)
    """The model's own context window, when known: the budget when no lower
    ``context_token_budget`` is set (hooks see it as ``context_window_reference_tokens``
    when the configured budget is lower)."""
    compaction_keep_messages: int = Field(default=6, ge=0)
    deliver_timeout_ms: int = Field(default=15_000, gt=0, le=600_000)
    """Default budget of each before-deliver stage of the reply dispatcher."""
    tools: AgentToolsConfig = Field(default_factory=AgentToolsConfig)
    limits: AgentLimits = Field(default_factory=AgentLimits)
    """Bounds on what a model sends (tool calls, arguments, results, reply, bytes, time)."""
    providers: dict[str, dict[str, Any]] = Field(default_factory=dict)
    """Options per provider name (``openai``, ``scripted``, third-party names); the
    shipped providers' options are checked (an unknown one is an error)."""
    fallback_models: list[str] = Field(default_factory=list)
    """``"<provider>/<model>"`` tried in order when ``model`` keeps failing."""
    retry: RetryConfig = Field(default_factory=RetryConfig)
    """Attempts per model and the waits between them (429, 5xx, connection, timeout)."""
    stream: StreamConfig = Field(default_factory=StreamConfig)
    """What streamed text may leave before the reply is delivered."""
    max_subagent_depth: int = Field(default=2, ge=0, le=8)
    """How deep sub-agents may nest: 1 lets this agent call its sub-agents but not theirs;
    0 turns sub-agents off."""
    max_subagents_per_turn: int = Field(default=8, ge=1, le=1_000)
    """Sub-agents one turn may start (a model asking for more reads a refusal): each is a
    whole turn of model calls, so a model must not be able to fan out without bound."""
    subagents: dict[str, SubagentConfig] = Field(default_factory=dict)
    """Other agents this one may call as tools, by id (see :class:`SubagentConfig`)."""

    @field_validator("model")
    @classmethod
    def _model_names_its_provider(cls, value: str) -> str:
        problem = model_problem(value)
        if problem is not None:
            raise ValueError(problem)
        return value

    @field_validator("fallback_models")
    @classmethod
    def _fallbacks_name_their_provider(cls, value: list[str]) -> list[str]:
        for name in value:
            problem = model_problem(name)
            if problem is not None:
                raise ValueError(problem)
        return value

    @field_validator("providers")
    @classmethod
    def _known_provider_options(cls, value: dict[str, dict[str, Any]]) -> Any:
        details: list[InitErrorDetails] = []
        for name, options in value.items():
            for key, problem in provider_option_problems(name, options):
                loc = (name, *key.split(".")) if key else (name,)
                error = PydanticCustomError("provider_option", "{problem}", {"problem": problem})
                details.append(InitErrorDetails(type=error, loc=loc, input=options))
        if details:
            raise ValidationError.from_exception_data("AgentConfig", details)
        return value

    @field_validator("subagents")
    @classmethod
    def _subagent_ids(cls, value: dict[str, SubagentConfig]) -> dict[str, SubagentConfig]:
        for name in value:
            if not _SUBAGENT_ID.match(name):
                raise ValueError(
                    f"sub-agent id {name!r} must be 1-64 letters, digits, '_' or '-' (the "
                    "model calls it as a tool of that name)"
                )
        return value

    def subagent(self, name: str) -> AgentConfig:
        """The settings sub-agent ``name`` runs with: its own keys, and every other key
        the parent's (except ``system_prompt``, ``tools`` and ``subagents``)."""
        entry = self.subagents[name]
        inherited = {
            key: getattr(self, key)
            for key in AgentConfig.model_fields
            if key not in _NOT_INHERITED and key not in entry.model_fields_set
        }
        own = {key: getattr(entry, key) for key in AgentConfig.model_fields if key not in inherited}
        return AgentConfig.model_validate({**inherited, **own})


class SubagentConfig(AgentConfig):
    """``agent.subagents.<id>``: an agent the parent's model may call as a tool.

    Every ``agent`` key may be given; the ones left out are the parent's, except
    ``system_prompt``, ``tools`` and ``subagents`` (its own, default when unset).
    """

    description: str = Field(min_length=1, max_length=2_000)
    """What the sub-agent does: the tool description its parent's model reads."""
    background: bool = False
    """``true``: the call returns at once and the answer is delivered as a message to the
    requester when it comes (``subagent_delivery_target`` when nothing routes it)."""
    timeout_s: float | None = Field(default=None, gt=0, le=86_400)
    """Stop the sub-agent's turn after this long (``subagent_ended`` outcome ``timeout``)."""


AgentConfig.model_rebuild()


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
            elif err["type"] == "missing" and err["loc"][-1] == "description":
                issues.append(
                    (key, "a sub-agent needs a description (its parent's model chooses it by that)")
                )
            else:
                issues.append((key, str(err["msg"]).removeprefix("Value error, ")))
        raise ConfigError(issues, source) from None
