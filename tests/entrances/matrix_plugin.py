"""The rule plugin of the entrance matrix, and its model: one file, installed once, loaded by
every entrance.

Every entrance of the matrix loads this module the way an operator's gateway loads a
plugin: as an installed distribution (entry point ``matrix`` of the ``agentplug`` group),
with the same config (:func:`plugin_entry`). The subprocess entrances (``agentplug chat``,
``agentplug serve``) and the in-process ones (the runner, the MCP proxy, both adapters)
therefore run the very same rules.

Each rule is keyed by tool name (a tool of the same name exists at every entrance: an
action here, an upstream MCP tool, a PydanticAI or LangChain tool):

- ``PUBLIC_BLOCK``: ``before_tool_call`` blocks with :data:`PUBLIC_REASON`;
- ``FAILING_HOOK``: ``before_tool_call`` raises with :data:`SECRET` in its message;
- ``NEEDS_APPROVAL`` / ``SHORT_APPROVAL`` / ``GRANTABLE``: ``before_tool_call`` asks for
  an approval (60 s; :data:`SHORT_TIMEOUT_MS`; one grant per ``nonce``);
- ``POLICY_BLOCKED``: the trusted policy :data:`POLICY_ID` blocks it;
- the exec tool (``RUN_COMMAND`` with ``tool_kind`` ``exec``, or ``exec``):
  ``resolve_exec_env`` contributes ``LD_PRELOAD``, ``PATH`` and :data:`KEPT_NAME`;
- ``NOT_NOW``: an action whose ``validate()`` is false.

Every ``before_tool_call`` and ``after_tool_call`` the plugin sees is written, one JSON
line each, to ``hooks.jsonl`` in the configured ``log_dir``; every run of a matrix tool
to ``runs.jsonl`` (:func:`record_run`). A message whose text holds ``[forbidden]`` is
blocked by ``before_agent_run`` with :data:`SECRET` as its confidential reason;
``message_sending`` rewrites a reply holding ``[rewrite]`` and cancels one holding
``[cancel]``.

The model (:class:`MatrixModel`, entry point ``matrix`` of ``agentplug.providers``)
reads its instruction from the user's message, a JSON object: ``{"call": TOOL, "params":
{...}}`` calls the tool once, then answers ``model read: <the tool result>``; ``{"say":
TEXT}`` answers TEXT (``"pause_ms"`` makes it think that long before its answer after a
tool call). Every request it receives is written to ``model.jsonl`` (what it
read since the user's message, the history before it and the tools offered).
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from agentplug import Action, ActionParameter, ActionResult
from agentplug.agent import ModelRequest, ModelResponse, ToolCall

PLUGIN_ID = "matrix"
POLICY_ID = "matrix-first"
PUBLIC_REASON = "the matrix keeps PUBLIC_BLOCK from running (a public reason)"
POLICY_REASON = "the matrix policy blocked this first"
SECRET = "confidential-7c1e-never-show"
"""In the failing hook's exception and the before_agent_run reason: must never be shown."""
LD_PRELOAD_VALUE = "/tmp/matrix-injected.so"
PATH_VALUE = "/tmp/matrix-injected-bin"
KEPT_NAME, KEPT_VALUE = "MATRIX_MODE", "audited"
REWRITTEN = "the matrix plugin rewrote this reply"
SHORT_TIMEOUT_MS = 300
GRANT_TIMEOUT_MS = 5_000
"""Long enough to answer, short enough that a grant that is not reused fails fast."""

PUBLIC_BLOCK = "PUBLIC_BLOCK"
FAILING_HOOK = "FAILING_HOOK"
NEEDS_APPROVAL = "NEEDS_APPROVAL"
SHORT_APPROVAL = "SHORT_APPROVAL"
GRANTABLE = "GRANTABLE"
POLICY_BLOCKED = "POLICY_BLOCKED"
OBSERVED = "OBSERVED"
RUN_COMMAND = "RUN_COMMAND"
NOT_NOW = "NOT_NOW"
TOOLS = (
    PUBLIC_BLOCK,
    FAILING_HOOK,
    NEEDS_APPROVAL,
    SHORT_APPROVAL,
    GRANTABLE,
    POLICY_BLOCKED,
    OBSERVED,
)
"""Tools every entrance offers under these names (plus its exec tool)."""
EXEC_TOOLS = (RUN_COMMAND, "exec")


def plugin_entry(log_dir: Path) -> dict[str, Any]:
    """``plugins`` of a matrix gateway's config: only this plugin, enabled, its policy
    declared (an installed plugin's trusted policy must be) and its conversation hook
    (``before_agent_run``) allowed."""
    return {
        "allow": [PLUGIN_ID],
        "entries": {
            PLUGIN_ID: {
                "enabled": True,
                "config": {"log_dir": str(log_dir)},
                "contracts": {"trusted_tool_policies": [POLICY_ID]},
                "hooks": {"allow_conversation_access": True},
            }
        },
    }


def _append(log_dir: str | os.PathLike[str] | None, name: str, row: Mapping[str, Any]) -> None:
    if not log_dir:
        return
    with open(Path(log_dir) / name, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(dict(row), default=str) + "\n")


def record_run(
    log_dir: str | os.PathLike[str] | None,
    tool: str,
    params: Mapping[str, Any],
    handed_env: Mapping[str, str] | None = None,
) -> str:
    """What every matrix tool does: note that it ran, with what and in which environment
    (its process environment, and the exec env it was handed, if any); answer one line."""
    _append(
        log_dir,
        "runs.jsonl",
        {
            "tool": tool,
            "nonce": params.get("nonce"),
            "params": dict(params),
            "process_env": {k: os.environ.get(k) for k in ("LD_PRELOAD", "PATH", KEPT_NAME)},
            "handed_env": dict(handed_env) if handed_env is not None else None,
            "pid": os.getpid(),
        },
    )
    return f"{tool} ran ({params.get('nonce')})"


def _nonce(event: Any) -> Any:
    params = getattr(event, "params", None) or {}
    return params.get("nonce")


def register(api: Any) -> None:
    """The rules (see the module docstring)."""
    log_dir = api.plugin_config.get("log_dir")

    def policy(event: Any) -> Any:
        if event.tool_name == POLICY_BLOCKED:
            return {"block": True, "block_reason": POLICY_REASON}
        return None

    api.register_trusted_tool_policy(POLICY_ID, policy, description="blocks POLICY_BLOCKED")

    def before_tool_call(event: Any, ctx: Any) -> Any:
        _append(
            log_dir,
            "hooks.jsonl",
            {"hook": "before_tool_call", "tool": event.tool_name, "nonce": _nonce(event)},
        )
        name = event.tool_name
        if name == PUBLIC_BLOCK:
            return {"block": True, "block_reason": PUBLIC_REASON}
        if name == FAILING_HOOK:
            raise RuntimeError(f"the matrix hook failed: {SECRET}")
        if name == NEEDS_APPROVAL:
            return _approval(f"Run {name}?", 60_000, ["allow-once", "deny"])
        if name == SHORT_APPROVAL:
            return _approval(f"Run {name}?", SHORT_TIMEOUT_MS, ["allow-once", "deny"])
        if name == GRANTABLE:
            # One grant per nonce: a grant is scoped by title, so cells never share one.
            return _approval(
                f"Run {name} ({_nonce(event)})?",
                GRANT_TIMEOUT_MS,
                ["allow-once", "allow-always", "deny"],
            )
        return None

    def after_tool_call(event: Any, ctx: Any) -> None:
        _append(
            log_dir,
            "hooks.jsonl",
            {
                "hook": "after_tool_call",
                "tool": event.tool_name,
                "nonce": _nonce(event),
                "event": event.model_dump(mode="json", by_alias=False),
                "ctx": ctx.model_dump(mode="json", by_alias=False) if ctx is not None else None,
            },
        )

    def resolve_exec_env(event: Any) -> dict[str, str]:
        return {"LD_PRELOAD": LD_PRELOAD_VALUE, "PATH": PATH_VALUE, KEPT_NAME: KEPT_VALUE}

    def before_agent_run(event: Any) -> Any:
        if "[forbidden]" in (event.prompt or ""):
            return {"outcome": "block", "reason": SECRET, "message": "(a message the matrix held)"}
        return None

    def message_sending(event: Any) -> Any:
        if "[cancel]" in event.content:
            return {"cancel": True, "cancel_reason": "the matrix cancels [cancel] replies"}
        if "[rewrite]" in event.content:
            return {"content": REWRITTEN}
        return None

    def provide_actions(event: Any) -> list[Action]:
        return actions(log_dir)

    api.on("before_tool_call", before_tool_call)
    api.on("after_tool_call", after_tool_call)
    api.on("resolve_exec_env", resolve_exec_env)
    api.on("before_agent_run", before_agent_run)
    api.on("message_sending", message_sending)
    api.on("provide_actions", provide_actions)


def _approval(title: str, timeout_ms: int, decisions: list[str]) -> dict[str, Any]:
    return {
        "require_approval": {
            "title": title,
            "description": "a rule of the entrance matrix",
            "timeout_ms": timeout_ms,
            "allowed_decisions": decisions,
        }
    }


def _action(name: str, log_dir: Any, **extra: Any) -> Action:
    def handler(runtime: Any, message: Any, state: Any, options: Any) -> ActionResult:
        params = options.parameters if options is not None else {}
        return ActionResult(success=True, text=record_run(log_dir, name, params))

    return Action(
        name=name,
        description=f"The matrix tool {name}.",
        handler=handler,
        parameters=[
            ActionParameter(name="nonce", description="the cell", required=True),
            ActionParameter(name="text", description="anything", required=False),
        ],
        side_effects=False,
        **extra,
    )


def actions(log_dir: Any) -> list[Action]:
    """The matrix tools as actions (how the runner, ``chat`` and ``serve`` offer tools)."""
    found = [_action(name, log_dir) for name in TOOLS]
    found.append(_action(RUN_COMMAND, log_dir, metadata={"tool_kind": "exec"}))
    found.append(_action(NOT_NOW, log_dir, validate=lambda runtime, message, state: False))
    return found


# -- the model -----------------------------------------------------------------------------


def instruction(text: str) -> dict[str, Any]:
    """The instruction a user message holds (``{"say": text}`` when it is not JSON)."""
    try:
        value = json.loads(text)
    except ValueError:
        return {"say": text}
    return value if isinstance(value, dict) else {"say": text}


class MatrixModel:
    """The matrix's model provider (see the module docstring)."""

    name = "matrix"

    def __init__(self, options: Mapping[str, Any] | None = None) -> None:
        self.log_dir = (options or {}).get("log_dir")

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """Call the tool the user's message names, or say what it says."""
        messages = request.messages
        last_user = max(i for i, m in enumerate(messages) if m.get("role") == "user")
        asked = instruction(str(messages[last_user].get("content") or ""))
        since = messages[last_user + 1 :]
        _append(
            self.log_dir,
            "model.jsonl",
            {
                "nonce": asked.get("nonce"),
                "at": time.time(),
                "read": [str(m.get("content") or "") for m in since],
                "history": [str(m.get("content") or "") for m in messages[:last_user]],
                "tools": [t.name for t in request.tools],
            },
        )
        results = [str(m.get("content") or "") for m in since if m.get("role") == "tool"]
        if "call" in asked and not results:
            call = ToolCall(
                id=f"call-{asked.get('nonce')}",
                name=str(asked["call"]),
                arguments=dict(asked.get("params") or {}),
            )
            return ModelResponse(tool_calls=[call], finish_reason="tool_calls")
        if results:
            # A slow model: the turn goes on a while after its tool call (``pause_ms``).
            await asyncio.sleep(float(asked.get("pause_ms") or 0) / 1000)
            return ModelResponse(text="model read: " + " | ".join(results), finish_reason="stop")
        return ModelResponse(text=str(asked.get("say", "")), finish_reason="stop")


def provider(options: Mapping[str, Any]) -> MatrixModel:
    """Entry point ``matrix`` of the ``agentplug.providers`` group."""
    return MatrixModel(options)
