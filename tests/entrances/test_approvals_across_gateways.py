"""An approval asked on gateway A is listed and answered from B with the documented
commands, and the waiting call goes on.

A is a real ``agentplug chat`` or ``agentplug mcp-proxy`` process; B is ``agentplug
approvals pending`` / ``agentplug approvals resolve ID allow-once`` in other processes.
They share one store: a PostgreSQL database (``AGENTPLUG_STATE_URL``, the ``postgres_url``
fixture's server) or one SQLite file in a shared state directory.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.entrances.conftest import matrix_config
from tests.entrances.drivers.chat import Terminal, agentplug_command, subprocess_env
from tests.entrances.entrance import WAIT_S, Logs, new_nonce
from tests.entrances.matrix_plugin import NEEDS_APPROVAL, OBSERVED

pytestmark = pytest.mark.stress  # several processes per test, 10-20 s each

UPSTREAM = Path(__file__).with_name("matrix_upstream.py")


@dataclass
class SharedStore:
    """How A and B find the one store."""

    env: dict[str, str] = field(default_factory=dict)
    """Environment of both (``AGENTPLUG_STATE_URL`` for PostgreSQL)."""
    state_dir: Path | None = None
    """The shared state directory (SQLite): A's ``runtime.state_dir`` / ``--state-dir``,
    B's ``--state-dir``."""

    def b_args(self) -> list[str]:
        return ["--state-dir", str(self.state_dir)] if self.state_dir is not None else []


@pytest.fixture(params=["postgres", "sqlite"])
def shared(request: pytest.FixtureRequest, tmp_path: Path) -> SharedStore:
    if request.param == "postgres":
        url: str = request.getfixturevalue("postgres_url")
        return SharedStore(env={"AGENTPLUG_STATE_URL": url})
    return SharedStore(state_dir=tmp_path / "shared-state")


def gateway_b(shared: SharedStore, folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``agentplug approvals ...`` in its own process (no plugin, the shared store only)."""
    env = subprocess_env(Path(folder / "no-site"), folder, **shared.env)
    return subprocess.run(
        [*agentplug_command(), "approvals", *args, *shared.b_args()],
        env=env,
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=WAIT_S,
    )


def pending_on_b(shared: SharedStore, folder: Path) -> dict[str, Any]:
    """Wait until B lists one pending approval; return it."""
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        listed = gateway_b(shared, folder, "pending", "--json")
        assert listed.returncode == 0, listed.stderr
        rows: list[dict[str, Any]] = json.loads(listed.stdout)
        if rows:
            (row,) = rows
            return row
        time.sleep(0.1)
    raise AssertionError("gateway B never listed the approval")


def resolve_on_b(shared: SharedStore, folder: Path, approval_id: str) -> None:
    done = gateway_b(shared, folder, "resolve", approval_id, "allow-once")
    assert done.returncode == 0, done.stderr
    assert "allow-once" in done.stdout


# -- chat --------------------------------------------------------------------------------


def _chat(matrix_site: Path, tmp_path: Path, shared: SharedStore) -> tuple[Terminal, Logs]:
    logs = Logs(tmp_path / "logs")
    config = matrix_config(logs.folder)
    if shared.state_dir is not None:
        config["runtime"] = {"state_dir": str(shared.state_dir)}
    path = tmp_path / "agentplug.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    terminal = Terminal(
        [*agentplug_command(), "chat", "--config", str(path)],
        subprocess_env(matrix_site, tmp_path, **shared.env),
        tmp_path,
        tmp_path / "stderr.txt",
    )
    return terminal, logs


def _wait_for_run(logs: Logs, nonce: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        if any(row["nonce"] == nonce for row in logs.since({}, "runs.jsonl")):
            return
        time.sleep(0.02)
    raise AssertionError("the approved tool never ran")


def test_an_approval_asked_in_chat_is_resolved_from_another_gateway_and_the_turn_goes_on(
    matrix_site: Path, tmp_path: Path, shared: SharedStore
) -> None:
    chat, logs = _chat(matrix_site, tmp_path, shared)
    try:
        nonce = new_nonce()
        # The model takes a while after the tool (pause_ms): the turn is still running
        # when the person types the next line.
        chat.type(
            json.dumps({"call": NEEDS_APPROVAL, "params": {"nonce": nonce}, "pause_ms": 1500})
        )
        chat.wait_for(0, "Decision [")
        pending = pending_on_b(shared, tmp_path)
        assert (pending["tool_name"], pending["plugin_id"]) == (NEEDS_APPROVAL, "matrix")
        resolve_on_b(shared, tmp_path, pending["id"])
        _wait_for_run(logs, nonce)  # the prompt in chat was abandoned when the store decided
        chat.type(json.dumps({"say": "a new message", "nonce": new_nonce()}))
        chat.wait_for(0, "agent> a new message")
        printed = chat.text()
        assert f"agent> model read: {NEEDS_APPROVAL} ran ({nonce})" in printed
        assert "approval=allow-once" in printed and "approval_by=cli" in printed
        assert f"approval {pending['id']} was decided elsewhere: allow-once by cli" in printed
        assert "Unrecognised answer" not in printed
    finally:
        status = chat.stop("/quit")
    assert status == 0, chat.stderr()


# -- mcp-proxy ---------------------------------------------------------------------------


def _proxy_params(matrix_site: Path, tmp_path: Path, shared: SharedStore, logs: Logs) -> Any:
    from mcp import StdioServerParameters

    servers = {
        "up": {
            "command": sys.executable,
            "args": [str(UPSTREAM)],
            "env": {"MATRIX_LOG_DIR": str(logs.folder)},
            "prefix": False,
        }
    }
    config = matrix_config(logs.folder)
    config["agent"]["tools"] = {"mcp_servers": servers}
    path = tmp_path / "agentplug.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    state_dir = shared.state_dir or tmp_path / "proxy-state"
    env = subprocess_env(matrix_site, tmp_path, **shared.env)
    # The SDK passes a stdio server only an allow-listed environment: the store's URL, the
    # plugin's site and the cache go explicitly.
    keep = ("PYTHONPATH", "AGENTPLUG_CACHE_DIR", "AGENTPLUG_STATE_URL", "AGENTPLUG_LOG_LEVEL")
    return StdioServerParameters(
        command=agentplug_command()[0],
        args=[
            *agentplug_command()[1:],
            "mcp-proxy",
            "--config",
            str(path),
            "--state-dir",
            str(state_dir),
        ],
        env={k: env[k] for k in keep if k in env},
        cwd=str(tmp_path),
    )


def test_an_approval_asked_through_mcp_proxy_is_resolved_from_another_gateway(
    matrix_site: Path, tmp_path: Path, shared: SharedStore
) -> None:
    pytest.importorskip("mcp", reason="the MCP proxy needs the 'mcp' extra")
    from mcp import Client

    logs = Logs(tmp_path / "logs")
    params = _proxy_params(matrix_site, tmp_path, shared, logs)
    nonce = new_nonce()

    async def session() -> tuple[Any, Any, dict[str, Any]]:
        async with Client(params, read_timeout_seconds=WAIT_S) as client:
            call = asyncio.ensure_future(client.call_tool(NEEDS_APPROVAL, {"nonce": nonce}))
            pending = await asyncio.to_thread(pending_on_b, shared, tmp_path)
            await asyncio.to_thread(resolve_on_b, shared, tmp_path, pending["id"])
            approved = await call
            after = await client.call_tool(OBSERVED, {"nonce": nonce})
            return approved, after, pending

    approved, after, pending = asyncio.run(session())
    assert (pending["tool_name"], pending["plugin_id"]) == (NEEDS_APPROVAL, "matrix")
    assert not approved.is_error
    assert approved.content[0].text == f"{NEEDS_APPROVAL} ran ({nonce})"
    assert [row["tool"] for row in logs.since({}, "runs.jsonl")] == [NEEDS_APPROVAL, OBSERVED]
    assert not after.is_error
