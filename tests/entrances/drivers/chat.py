"""``agentplug chat``: a real subprocess, driven through its stdin and stdout.

One ``agentplug chat --json`` runs for all the cells of a rule module: each cell types
one line (an instruction for the matrix model), answers the approval prompt if one
appears (or lets it time out), and reads the turn's JSON lines up to the ``{"turn": ...}``
summary. The client here is the person at the terminal: what they read is everything the
process printed for the turn (and its stderr).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from tests.entrances.conftest import matrix_config
from tests.entrances.entrance import (
    WAIT_S,
    Answer,
    Entrance,
    Logs,
    Observed,
    instruction,
    trace_decision,
)

PROMPT = "Decision ["
"""How the terminal asks for an approval decision."""
SUMMARY = '{"turn": {'


def agentplug_command() -> list[str]:
    """The ``agentplug`` console script of this interpreter."""
    script = shutil.which("agentplug", path=str(Path(sys.executable).parent))
    return [script] if script else [sys.executable, "-m", "agentplug.cli"]


def subprocess_env(site: Path, folder: Path, **extra: str) -> dict[str, str]:
    """The environment of an entrance subprocess: the matrix plugin installed, nothing of
    the developer's own agentplug settings."""
    env = {
        **os.environ,
        "PYTHONPATH": str(site),
        "AGENTPLUG_CACHE_DIR": str(folder / "cache"),
        "AGENTPLUG_LOG_LEVEL": "WARNING",
        **extra,
    }
    for name in ("AGENTPLUG_CONFIG", "AGENTPLUG_STATE_DIR"):
        env.pop(name, None)
    if "AGENTPLUG_STATE_URL" not in extra:
        env.pop("AGENTPLUG_STATE_URL", None)
    return env


class Terminal:
    """A process whose stdout is collected by a thread, read from marks on."""

    def __init__(
        self,
        argv: list[str],
        env: dict[str, str],
        cwd: Path,
        stderr: Path,
        *,
        new_session: bool = False,
        merge_stderr: bool = False,
    ) -> None:
        self.stderr_path = stderr
        with open(stderr, "wb") as err:
            self.proc = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT if merge_stderr else err,
                env=env,
                cwd=cwd,
                start_new_session=new_session,
            )
        self._out = bytearray()
        self._cond = threading.Condition()
        self._done = False
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        while True:
            chunk = os.read(fd, 65536)
            with self._cond:
                if not chunk:
                    self._done = True
                else:
                    self._out += chunk
                self._cond.notify_all()
            if not chunk:
                return

    @property
    def size(self) -> int:
        with self._cond:
            return len(self._out)

    def text(self, start: int = 0) -> str:
        with self._cond:
            return self._out[start:].decode("utf-8", "replace")

    def type(self, line: str) -> None:
        """Type one line at the terminal."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(line.encode("utf-8") + b"\n")
        self.proc.stdin.flush()

    def wait_for(self, start: int, *needles: str) -> tuple[str, int]:
        """Wait until one of ``needles`` appears after ``start``; return it and where."""
        deadline = time.monotonic() + WAIT_S
        with self._cond:
            while True:
                text = self._out[start:].decode("utf-8", "replace")
                found = [(text.find(n), n) for n in needles if n in text]
                if found:
                    index, needle = min(found)
                    return needle, start + len(text[:index].encode("utf-8"))
                left = deadline - time.monotonic()
                if self._done or left <= 0:
                    raise AssertionError(
                        f"no {needles!r} from the process (exit {self.proc.poll()}); it printed:"
                        f"\n{text}\nstderr:\n{self.stderr()}"
                    )
                self._cond.wait(left)

    def stderr(self) -> str:
        return self.stderr_path.read_text("utf-8", errors="replace")

    def stop(self, last_line: str | None = None) -> int:
        """End the process (typing ``last_line`` first); return its exit status."""
        if self.proc.poll() is None:
            try:
                if last_line is not None:
                    self.type(last_line)
                assert self.proc.stdin is not None
                self.proc.stdin.close()
                return self.proc.wait(WAIT_S)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
        return self.proc.wait(WAIT_S)


def json_rows(text: str) -> list[dict[str, Any]]:
    """The JSON objects printed in ``text``, one per line (a line may start with what an
    approval prompt left on it)."""
    rows = []
    for line in text.splitlines():
        if "{" not in line:
            continue
        try:
            value = json.loads(line[line.index("{") :])
        except ValueError:
            continue
        if isinstance(value, dict):
            rows.append(value)
    return rows


class ChatEntrance(Entrance):
    """``agentplug chat --json`` (see the module docstring)."""

    name = "chat"

    def __init__(self, site: Path, folder: Path) -> None:
        super().__init__(Logs(folder / "logs"))
        config = folder / "agentplug.json"
        config.write_text(json.dumps(matrix_config(self.logs.folder)), encoding="utf-8")
        self.terminal = Terminal(
            [*agentplug_command(), "chat", "--json", "--config", str(config)],
            subprocess_env(site, folder),
            folder,
            folder / "stderr.txt",
            merge_stderr=True,  # --json keeps the approval prompts on stderr
        )

    def _turn(self, line: str, answer: Answer) -> tuple[Observed, list[dict[str, Any]]]:
        start = self.terminal.size
        self.terminal.type(line)
        asked, at = 0, start
        while True:
            needle, where = self.terminal.wait_for(at, PROMPT, SUMMARY)
            if needle == SUMMARY:
                break
            asked += 1
            at = where + len(PROMPT)
            if answer is not None:
                self.terminal.type(answer)
        self.terminal.wait_for(where, "}}\n")  # the summary line is complete
        printed = self.terminal.text(start)
        rows = json_rows(printed)
        summary = next(row["turn"] for row in reversed(rows) if "turn" in row)
        trace = [row for row in rows if "kind" in row]
        observed = Observed(
            self.name,
            client=printed + self.terminal.stderr(),
            reply=summary.get("reply"),
            asked=asked,
            decision=trace_decision(trace),
        )
        return observed, trace

    def call_tool(self, tool: str, params: dict[str, Any], *, answer: Answer = None) -> Observed:
        mark = self.logs.mark()
        observed, _ = self._turn(instruction(tool, params), answer)
        return self.collect(observed, mark)

    def send(self, text: str, nonce: str) -> Observed:
        mark = self.logs.mark()
        observed, _ = self._turn(json.dumps({"say": text, "nonce": nonce}), None)
        return self.collect(observed, mark)

    def close(self) -> None:
        self.terminal.stop("/quit")
