"""The PydanticAI adapter: an ``Agent`` with :class:`AgentplugCapability`, offline.

The model is a PydanticAI ``FunctionModel`` that behaves like the matrix model: it
reads its instruction from the user prompt, calls the tool once, then answers ``model
read: <what came back>`` (and writes each request to ``model.jsonl``). Two entrances:

- **tools**: the matrix tools are the agent's own tools (the exec one carries
  ``tool_kind: exec`` in its metadata);
- **output**: each matrix tool is an *output function* (``Agent(output_type=[fn, str])``);
  a blocked output function makes the model read the reason and answer in text.

Approvals are answered by a :class:`Desk`; the client is the caller of ``agent.run``: it
reads the run's output and its messages.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentplug import Gateway
from agentplug.adapters.pydantic_ai import AgentplugCapability
from pydantic_ai import Agent, Tool
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from tests.entrances.conftest import installed, matrix_config
from tests.entrances.entrance import (
    Answer,
    Desk,
    Entrance,
    Logs,
    LoopThread,
    Observed,
    audit_decision,
    audit_mark,
    instruction,
)
from tests.entrances.matrix_plugin import RUN_COMMAND, TOOLS, record_run
from tests.entrances.matrix_plugin import instruction as read_instruction


def _since_prompt(messages: list[ModelMessage]) -> tuple[dict[str, Any], list[str]]:
    """The instruction of the last user prompt and what came back after it."""
    asked: dict[str, Any] = {}
    returned: list[str] = []
    for message in messages:
        if not isinstance(message, ModelRequest):
            continue
        for part in message.parts:
            if isinstance(part, UserPromptPart) and isinstance(part.content, str):
                asked, returned = read_instruction(part.content), []
            elif isinstance(part, ToolReturnPart):
                returned.append(str(part.content))
            elif isinstance(part, RetryPromptPart):
                returned.append(part.model_response())
    return asked, returned


def matrix_function_model(log_dir: Path, output: bool) -> FunctionModel:
    """The matrix model as a PydanticAI ``FunctionModel`` (``output``: call the output
    tool that runs the named output function)."""

    def script(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        asked, returned = _since_prompt(messages)
        with open(log_dir / "model.jsonl", "a", encoding="utf-8") as fh:
            row = {"nonce": asked.get("nonce"), "at": time.time(), "read": returned}
            fh.write(json.dumps(row) + "\n")
        if "call" in asked and not returned:
            name = str(asked["call"])
            if output:  # the output tool that runs the one output function
                name = info.output_tools[0].name
            args = dict(asked.get("params") or {})
            return ModelResponse(
                parts=[ToolCallPart(name, args, tool_call_id=f"call-{asked['nonce']}")]
            )
        if returned:
            return ModelResponse(parts=[TextPart("model read: " + " | ".join(returned))])
        return ModelResponse(parts=[TextPart(str(asked.get("say", "")))])

    return FunctionModel(script)


def _matrix_tool(name: str, log_dir: Path) -> Callable[..., str]:
    def run(nonce: str, text: str = "") -> str:
        return record_run(log_dir, name, {"nonce": nonce, "text": text})

    run.__name__ = name
    run.__doc__ = f"The matrix tool {name}."
    return run


class _PydanticEntrance(Entrance):
    output = False

    def __init__(self, site: Path, folder: Path) -> None:
        super().__init__(Logs(folder / "logs"))
        self.desk = Desk()
        self.thread = LoopThread()
        with installed(site):
            self.gateway = Gateway.from_config(
                matrix_config(self.logs.folder), load_plugins=True, resolver=self.desk
            )
        assert not self.gateway.host.load_errors, self.gateway.host.load_errors
        assert not self.thread.run(self.gateway.start(host_name="matrix pydantic-ai"))
        self.capability = AgentplugCapability(self.gateway)
        self.model = matrix_function_model(self.logs.folder, self.output)

    def agent(self, tool: str) -> Agent[None, Any]:
        raise NotImplementedError

    def _run(self, prompt: str, agent: Agent[None, Any]) -> Observed:
        self.capability.last_delivery = None
        result = self.thread.run(agent.run(prompt))
        output = result.output
        delivery = self.capability.last_delivery
        reply = None if delivery is not None and delivery.suppressed else str(output)
        return Observed(
            self.name,
            client=json.dumps({"output": output}, default=str)
            + result.all_messages_json().decode("utf-8"),
            reply=reply,
        )

    def call_tool(self, tool: str, params: dict[str, Any], *, answer: Answer = None) -> Observed:
        mark = self.logs.mark()
        audit = self.gateway.tool_calls.gate.audit
        before = audit_mark(audit)
        asked = self.desk.expect(answer)
        observed = self._run(instruction(tool, params), self.agent(tool))
        observed.asked = len(self.desk.asked) - asked
        observed.decision = audit_decision(audit, tool, before)
        return self.collect(observed, mark)

    def send(self, text: str, nonce: str) -> Observed:
        mark = self.logs.mark()
        observed = self._run(json.dumps({"say": text, "nonce": nonce}), self.agent(TOOLS[0]))
        return self.collect(observed, mark)

    def close(self) -> None:
        self.thread.run(self.gateway.stop())
        self.thread.stop()


class PydanticToolsEntrance(_PydanticEntrance):
    """The agent's own tools, gated (``wrap_tool_execute``)."""

    name = "pydantic-ai-tools"

    def agent(self, tool: str) -> Agent[None, Any]:
        folder = self.logs.folder
        tools = [Tool(_matrix_tool(name, folder), name=name) for name in TOOLS]
        tools.append(
            Tool(
                _matrix_tool(RUN_COMMAND, folder), name=RUN_COMMAND, metadata={"tool_kind": "exec"}
            )
        )
        return Agent(self.model, tools=tools, capabilities=[self.capability])


class PydanticOutputEntrance(_PydanticEntrance):
    """An output function, gated (``wrap_output_process``); text output allowed too."""

    name = "pydantic-ai-output"
    output = True

    def agent(self, tool: str) -> Agent[None, Any]:
        output_type: list[Any] = [_matrix_tool(tool, self.logs.folder), str]
        return Agent(self.model, output_type=output_type, capabilities=[self.capability])
