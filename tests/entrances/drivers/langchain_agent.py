"""The LangChain adapter: ``create_agent`` with :class:`AgentplugMiddleware`, offline.

The model is a LangChain chat model that behaves like the matrix model (it reads its
instruction from the user message, calls the tool once, then answers ``model read:
<the tool message>``; each request goes to ``model.jsonl``). The matrix tools are
LangChain tools (the exec one carries ``tool_kind: exec`` in its metadata). Approvals
are answered by a :class:`Desk`; the client is the caller of ``agent.ainvoke``: it reads
the final state's messages.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from agentplug import Gateway
from agentplug.adapters.langchain import AgentplugMiddleware
from langchain.agents import create_agent
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import StructuredTool

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


class MatrixChatModel(BaseChatModel):
    """The matrix model as a LangChain chat model (tools are accepted and ignored: the
    instruction names the tool)."""

    log_dir: str

    @property
    def _llm_type(self) -> str:
        return "matrix"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Any:
        return self

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        last = max(i for i, m in enumerate(messages) if isinstance(m, HumanMessage))
        asked = read_instruction(str(messages[last].content))
        returned = [str(m.content) for m in messages[last + 1 :] if isinstance(m, ToolMessage)]
        with open(Path(self.log_dir) / "model.jsonl", "a", encoding="utf-8") as fh:
            row = {"nonce": asked.get("nonce"), "at": time.time(), "read": returned}
            fh.write(json.dumps(row) + "\n")
        if "call" in asked and not returned:
            call = {
                "name": str(asked["call"]),
                "args": dict(asked.get("params") or {}),
                "id": f"call-{asked.get('nonce')}",
            }
            message = AIMessage(content="", tool_calls=[call])
        elif returned:
            message = AIMessage(content="model read: " + " | ".join(returned))
        else:
            message = AIMessage(content=str(asked.get("say", "")))
        return ChatResult(generations=[ChatGeneration(message=message)])


def _matrix_tool(name: str, log_dir: Path, **options: Any) -> StructuredTool:
    def run(nonce: str, text: str = "") -> str:
        return record_run(log_dir, name, {"nonce": nonce, "text": text})

    fn: Callable[..., str] = run
    return StructuredTool.from_function(
        fn, name=name, description=f"The matrix tool {name}.", **options
    )


class LangChainEntrance(Entrance):
    """A ``create_agent`` agent's tool calls and final reply, gated (module docstring)."""

    name = "langchain"

    def __init__(self, site: Path, folder: Path) -> None:
        super().__init__(Logs(folder / "logs"))
        self.desk = Desk()
        self.thread = LoopThread()
        with installed(site):
            self.gateway = Gateway.from_config(
                matrix_config(self.logs.folder), load_plugins=True, resolver=self.desk
            )
        assert not self.gateway.host.load_errors, self.gateway.host.load_errors
        assert not self.thread.run(self.gateway.start(host_name="matrix langchain"))
        self.middleware = AgentplugMiddleware(self.gateway)
        log_dir = self.logs.folder
        tools = [_matrix_tool(name, log_dir) for name in TOOLS]
        tools.append(_matrix_tool(RUN_COMMAND, log_dir, metadata={"tool_kind": "exec"}))
        self.agent = create_agent(
            MatrixChatModel(log_dir=str(log_dir)), tools=tools, middleware=[self.middleware]
        )

    def _invoke(self, content: str, nonce: str) -> Observed:
        self.middleware.last_delivery = None
        state = self.thread.run(
            self.agent.ainvoke(
                {"messages": [{"role": "user", "content": content}]},
                {"configurable": {"thread_id": f"matrix-{nonce}"}},
            )
        )
        messages = state["messages"]
        final = messages[-1]
        delivery = self.middleware.last_delivery
        suppressed = delivery is not None and delivery.suppressed
        return Observed(
            self.name,
            client=json.dumps([m.model_dump() for m in messages], default=str),
            reply=None if suppressed else str(final.content),
        )

    def call_tool(self, tool: str, params: dict[str, Any], *, answer: Answer = None) -> Observed:
        mark = self.logs.mark()
        audit = self.gateway.tool_calls.gate.audit
        before = audit_mark(audit)
        asked = self.desk.expect(answer)
        observed = self._invoke(instruction(tool, params), str(params["nonce"]))
        observed.asked = len(self.desk.asked) - asked
        observed.decision = audit_decision(audit, tool, before)
        return self.collect(observed, mark)

    def send(self, text: str, nonce: str) -> Observed:
        mark = self.logs.mark()
        observed = self._invoke(json.dumps({"say": text, "nonce": nonce}), nonce)
        return self.collect(observed, mark)

    def close(self) -> None:
        self.thread.run(self.gateway.stop())
        self.thread.stop()
