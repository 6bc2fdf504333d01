"""``agentplug actions run "what is the weather in Paris"`` with the openai provider."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.agent.chat_server import chat_server


def _run(tmp_path: Path, text: str, config: dict[str, Any]) -> tuple[int, dict[str, Any], str]:
    path = tmp_path / "agentplug.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    args = [
        sys.executable,
        "-m",
        "agentplug.cli",
        "actions",
        "run",
        text,
        "--json",
        "--config",
        str(path),
    ]
    env = {**os.environ, "AGENTPLUG_CACHE_DIR": str(tmp_path / "cache")}
    done = subprocess.run(args, capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120)
    lines = done.stdout.strip().splitlines()
    return done.returncode, json.loads(lines[-1]) if lines else {}, done.stderr


def _config(base_url: str, host_port: str) -> dict[str, Any]:
    return {
        "agent": {"model": "openai/test-model", "providers": {"openai": {"base_url": base_url}}},
        "security": {"ssrf": {"allowHosts": [host_port]}},
        "customActions": [
            {
                "id": "weather",
                "name": "CHECK_WEATHER",
                "description": "Check the current weather for a given city",
                "similes": ["WEATHER", "FORECAST"],
                "parameters": [{"name": "city", "description": "the city", "required": True}],
                "handler": {
                    "type": "http",
                    "method": "GET",
                    "url": f"http://{host_port}/weather/{{{{city}}}}",
                },
                "enabled": True,
                "createdAt": "2026-01-01T00:00:00Z",
                "updatedAt": "2026-01-01T00:00:00Z",
            }
        ],
    }


def test_actions_run_understands_plain_language_with_the_openai_provider(tmp_path: Path) -> None:
    with chat_server() as server:
        server.reply('{"action": "CHECK_WEATHER"}')
        server.reply('{"city": "Paris"}')
        server.get_text = "Paris: sunny +21C"
        host_port = server.base_url.split("//")[1].split("/")[0]
        code, report, stderr = _run(
            tmp_path, "what is the weather in Paris", _config(server.base_url, host_port)
        )
        paths = [r["path"] for r in server.requests]
    assert code == 0, (report, stderr)
    assert report["action"] == "CHECK_WEATHER" and report["outcome"] == "success"
    assert "Paris: sunny +21C" in report["result"]["text"]
    assert paths == ["/v1/chat/completions", "/v1/chat/completions", "/weather/Paris"]


def test_actions_run_without_a_model_keeps_the_deterministic_flow(tmp_path: Path) -> None:
    config: dict[str, Any] = {
        "customActions": _config("http://127.0.0.1:9/v1", "127.0.0.1:9")["customActions"]
    }
    code, report, _ = _run(tmp_path, "what is the weather in Paris", config)
    assert code == 1
    assert report["action"] == "CHECK_WEATHER"
    assert "city" in report["result"]["text"]
