"""The runner's ``handle_inbound`` on an in-process :class:`~agentplug.Gateway`.

The gateway loads the installed matrix plugin from the config, like every entrance; its
runner offers the plugin's actions, plus a Python ``exec`` tool (``kind="exec"``) that
receives the exec env the gate resolved, as a host's own command tool does
(docs/agent-runtime.md). Approvals are answered by a :class:`Desk`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agentplug import Gateway
from agentplug.agent import ToolCallContext

from tests.entrances.conftest import installed, matrix_config
from tests.entrances.entrance import (
    Answer,
    Desk,
    Entrance,
    Logs,
    LoopThread,
    Observed,
    instruction,
    trace_decision,
)
from tests.entrances.matrix_plugin import MatrixModel, record_run


class RunnerEntrance(Entrance):
    """``gateway.runner.handle_inbound`` (see the module docstring)."""

    name = "runner"
    exec_tool = "exec"

    def __init__(self, site: Path, folder: Path) -> None:
        super().__init__(Logs(folder / "logs"))
        self.desk = Desk()
        self.thread = LoopThread()
        log_dir = str(self.logs.folder)
        with installed(site):
            self.gateway = Gateway.from_config(
                matrix_config(self.logs.folder),
                load_plugins=True,
                resolver=self.desk,
                provider=MatrixModel({"log_dir": log_dir}),
            )
        assert not self.gateway.host.load_errors, self.gateway.host.load_errors

        def run_command(nonce: str, text: str = "", call: ToolCallContext | None = None) -> str:
            """Run a command (the matrix's exec tool)."""
            handed = call.exec_env if call is not None else None
            return record_run(log_dir, "exec", {"nonce": nonce, "text": text}, handed)

        self.gateway.runner.tools.add_python(run_command, name="exec", kind="exec")
        problems = self.thread.run(self.gateway.start(host_name="matrix runner"))
        assert not problems, problems

    def _turn(self, text: str, nonce: str) -> Any:
        return self.thread.run(
            self.gateway.runner.handle_inbound(
                {
                    "content": text,
                    "channel": "matrix",
                    "sender_id": "tester",
                    "session_key": f"matrix:{nonce}",
                }
            )
        )

    def call_tool(self, tool: str, params: dict[str, Any], *, answer: Answer = None) -> Observed:
        mark = self.logs.mark()
        asked = self.desk.expect(answer)
        result = self._turn(instruction(tool, params), str(params["nonce"]))
        observed = Observed(
            self.name,
            client=result.model_dump_json(),
            reply=result.reply,
            asked=len(self.desk.asked) - asked,
            decision=trace_decision(result.trace),
        )
        return self.collect(observed, mark)

    def send(self, text: str, nonce: str) -> Observed:
        mark = self.logs.mark()
        result = self._turn(json.dumps({"say": text, "nonce": nonce}), nonce)
        observed = Observed(self.name, client=result.model_dump_json(), reply=result.reply)
        return self.collect(observed, mark)

    def close(self) -> None:
        self.thread.run(self.gateway.stop())
        self.thread.stop()
