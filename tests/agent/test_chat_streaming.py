"""``agentplug chat`` prints the reply as it streams in (a real subprocess against the
OpenAI-compatible protocol server on 127.0.0.1), and never prints text a delivery hook
would have stopped."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

from tests.agent.chat_server import Stream, chat_server, text_chunks

LIVENESS_S = 60.0
"""How long the test waits for the streamed text before it kills the chat (a bound on a
hang, not a timing assertion)."""


def _config(tmp_path: Path, base_url: str) -> Path:
    config = tmp_path / "agentplug.json"
    agent = {
        "model": "openai/test-model",
        "retry": {"attempts": 1},
        "tools": {"actions": False},
        "providers": {"openai": {"base_url": base_url, "timeout_s": 30}},
    }
    config.write_text(json.dumps({"agent": agent}), encoding="utf-8")
    return config


def _start(tmp_path: Path, config: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "AGENTPLUG_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("AGENTPLUG_CONFIG", None)
    return subprocess.Popen(
        [sys.executable, "-m", "agentplug.cli", "chat", "--config", str(config), "--no-plugins"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
        env=env,
    )


def test_chat_prints_the_reply_while_the_model_is_still_answering(tmp_path: Path) -> None:
    with chat_server() as server:
        # The first words, then the stream stalls: the turn cannot have ended yet.
        server.raw(200, Stream(tuple(text_chunks("Thinking out loud: ")), done=False, hang=True))
        process = _start(tmp_path, _config(tmp_path, server.base_url))
        watchdog = threading.Timer(LIVENESS_S, process.kill)  # a regression fails, never hangs
        watchdog.start()
        try:
            assert process.stdin is not None and process.stdout is not None
            process.stdin.write("hello\n")
            process.stdin.flush()
            seen = ""
            while "Thinking out loud:" not in seen:
                char = process.stdout.read(1)
                assert char, f"chat ended before printing the streamed text: {seen!r}"
                seen += char
            assert "agent> Thinking out loud:" in seen
            assert process.poll() is None  # still in the turn: the text came as it arrived
        finally:
            watchdog.cancel()
            process.kill()
            process.communicate(timeout=30)


def test_chat_prints_a_streamed_reply_once(tmp_path: Path) -> None:
    with chat_server() as server:
        server.stream_reply("Once is enough.", size=3)
        process = _start(tmp_path, _config(tmp_path, server.base_url))
        out, err = process.communicate("hello\n/quit\n", timeout=120)
    assert process.returncode == 0, out + err
    assert out.count("Once is enough.") == 1 and "agent> Once is enough.\n" in out
