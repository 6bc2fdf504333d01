"""docs/scaling.md, "Two gateways on one machine, no Docker": the blocks run as written.

The ``sh`` blocks of that section are taken from the page in order, each labelled with
its terminal, and run: terminal 1's in ``bash -c`` processes (PostgreSQL set up with
``initdb`` / ``pg_ctl`` / ``createdb``, then the chat, then ``agentplug serve``),
terminal 2's in one long-lived ``bash``. Only what cannot be the same on a test machine
is substituted: the directories under /tmp, the two ports and the approval id that
``pending`` printed (as the page tells the reader to).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import free_port, pg_bin_dir
from tests.entrances.drivers.chat import Terminal

pytestmark = pytest.mark.stress  # a PostgreSQL server, a chat, a server, ten commands

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "scaling.md"
SECTION = "## Two gateways on one machine, no Docker"
APPROVAL_ID = re.compile(r"ap1-[0-9a-f]{6}")


def section_blocks() -> list[tuple[str, str]]:
    """The section's ``sh`` blocks as ``(terminal, text)``, in page order."""
    text = PAGE.read_text(encoding="utf-8")
    body = text.split(SECTION, 1)[1].split("\n## ", 1)[0]
    blocks = []
    for block in re.findall(r"```sh\n(.*?)```", body, flags=re.DOTALL):
        first, _, rest = block.partition("\n")
        label = re.fullmatch(r"# terminal ([12])", first.strip())
        assert label, f"each block of the section starts with '# terminal N': {first!r}"
        blocks.append((label.group(1), rest))
    return blocks


def test_the_section_is_the_sequence_this_test_runs() -> None:
    terminals = [terminal for terminal, _ in section_blocks()]
    assert terminals == ["1", "1", "2", "2", "1", "2"]


class Substitutes:
    """What differs on a test machine: directories, ports, the approval id."""

    def __init__(self, pg_root: Path, demo: Path) -> None:
        self.pg_root = pg_root
        self.demo = demo
        self.pg_port = free_port()
        self.api_port = free_port()

    def __call__(self, block: str) -> str:
        return (
            block.replace("/tmp/agentplug-pg.log", str(self.pg_root / "server.log"))
            .replace("/tmp/agentplug-pg", str(self.pg_root / "data"))
            .replace("/tmp/agentplug-demo", str(self.demo))
            .replace("5433", str(self.pg_port))
            .replace("8733", str(self.api_port))
        )


@pytest.fixture
def pg_root() -> Iterator[Path]:
    """A directory the server's owner can use (``nobody`` when the tests run as root:
    ``initdb`` refuses root); the server is stopped afterwards."""
    bin_dir = pg_bin_dir()
    if bin_dir is None:
        pytest.skip("no PostgreSQL server binary (initdb/pg_ctl on PATH or /usr/lib/postgresql)")
    pytest.importorskip("psycopg", reason="the page's store needs 'agentplug[postgres]'")
    pytest.importorskip("uvicorn", reason="the page's `agentplug serve` needs 'agentplug[api]'")
    if shutil.which("curl") is None:
        pytest.skip("the page posts a message with curl, which is not installed")
    root = Path(tempfile.mkdtemp(prefix="agentplug-doc-pg-"))
    os.chmod(root, 0o755)
    if os.geteuid() == 0:
        shutil.chown(root, "nobody")
    try:
        yield root
    finally:
        if (root / "data" / "postmaster.pid").exists():
            subprocess.run(
                [
                    *_as_owner(),
                    str(bin_dir / "pg_ctl"),
                    "-D",
                    str(root / "data"),
                    "-m",
                    "fast",
                    "stop",
                ],
                capture_output=True,
                timeout=120,
            )
        shutil.rmtree(root, ignore_errors=True)


def _as_owner() -> list[str]:
    return ["runuser", "-u", "nobody", "--"] if os.geteuid() == 0 else []


def _env(tmp_path: Path) -> dict[str, str]:
    bin_dir = pg_bin_dir()
    scripts = Path(sys.executable).parent  # this checkout's `agentplug`
    env = {
        **os.environ,
        "PATH": os.pathsep.join([str(scripts), str(bin_dir), os.environ.get("PATH", "")]),
        "AGENTPLUG_CACHE_DIR": str(tmp_path / "cache"),
    }
    for name in ("AGENTPLUG_CONFIG", "AGENTPLUG_STATE_URL", "AGENTPLUG_STATE_DIR", "PGDATA"):
        env.pop(name, None)
    return env


class Shell:
    """Terminal 2: one ``bash`` that runs the blocks typed into it, one after another."""

    def __init__(self, env: dict[str, str], cwd: Path) -> None:
        cwd.mkdir(parents=True, exist_ok=True)
        self.terminal = Terminal(["bash"], env, cwd, cwd / "stderr.txt")
        self.count = 0

    def run(self, block: str) -> str:
        """Run ``block``; return what it printed (stdout and stderr)."""
        self.count += 1
        done = f"__block_{self.count}_done__"
        start = self.terminal.size
        self.terminal.type(f"{{\n{block}\n}} 2>&1\necho {done}")
        self.terminal.wait_for(start, done + "\n")
        return self.terminal.text(start).split(done, 1)[0]


def _pending_id(shell: Shell, block: str) -> str:
    for _ in range(50):
        found = APPROVAL_ID.search(shell.run(block))
        if found:
            return found.group(0)
    raise AssertionError("`agentplug approvals pending` never listed the approval")


def test_an_approval_asked_on_one_gateway_is_answered_from_another_as_the_page_shows(
    tmp_path: Path, pg_root: Path
) -> None:
    postgres, chat, pending, resolve, serve, post = section_blocks()
    run = Substitutes(pg_root, tmp_path / "demo")
    env = _env(tmp_path)
    started = subprocess.run(
        [*_as_owner(), "bash", "-e", "-c", run(postgres[1])],
        cwd=pg_root,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert started.returncode == 0, started.stdout + started.stderr
    terminal_2 = Shell(env, tmp_path / "terminal-2")
    terminal_1 = Terminal(
        ["bash", "-e", "-c", run(chat[1])], env, tmp_path, tmp_path / "terminal-1.stderr"
    )
    try:
        terminal_1.wait_for(0, "you> ")
        terminal_1.type("be more verbose")
        terminal_1.wait_for(0, "Decision [")
        approval = _pending_id(terminal_2, run(pending[1]))
        assert "allow-once" in terminal_2.run(APPROVAL_ID.sub(approval, run(resolve[1])))
        terminal_1.wait_for(0, "agent> The log level is now debug.")
        shown = terminal_1.text()
        assert f"approval {approval} was decided elsewhere: allow-once by cli" in shown
        assert "approval_by=cli" in shown
        assert terminal_1.stop("/quit") == 0, terminal_1.stderr()

        server = Terminal(
            ["bash", "-e", "-c", run(serve[1])],
            env,
            run.demo,
            tmp_path / "serve.stderr",
            new_session=True,  # stopped with its process group, as Ctrl-C would
        )
        try:
            server.wait_for(0, f"listening on http://127.0.0.1:{run.api_port}")
            start = terminal_2.terminal.size
            terminal_2.run(run(post[1]))
            approval = _pending_id(terminal_2, run(pending[1]))
            assert "allow-once" in terminal_2.run(APPROVAL_ID.sub(approval, run(resolve[1])))
            terminal_2.terminal.wait_for(start, '"reply":"The log level is now debug."')
            assert '"status":"replied"' in terminal_2.terminal.text(start)
        finally:
            os.killpg(server.proc.pid, signal.SIGTERM)
            server.proc.wait(60)
    finally:
        terminal_1.stop()
        terminal_2.terminal.stop("exit")
