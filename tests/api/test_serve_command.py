"""``agentplug serve``: loopback only, a private token file, a clear message without the extra."""

from __future__ import annotations

import argparse
import json
import os
import signal
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from agentplug.api import host_header_is_loopback
from agentplug.api.serve import add_serve_command

WAIT_S = 60.0
"""Upper bound for the server process to answer (never a timing assertion)."""


def run_serve(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="agentplug")
    add_serve_command(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["serve", *argv])
    code: int = args.func(args)
    return code


@pytest.mark.parametrize("address", ["0.0.0.0", "::", "192.168.1.10", "example.com", ""])
def test_serve_refuses_to_bind_anything_but_loopback(
    address: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = run_serve(["--host", address, "--port", "0", "--state-dir", str(tmp_path)])
    assert code == 2
    error = capsys.readouterr().err
    assert "refusing to bind" in error
    assert "loopback" in error
    assert not (tmp_path / "api-token").exists()  # refused before anything was written


@pytest.mark.parametrize(
    ("header", "loopback"),
    [
        ("localhost", True),
        ("localhost:8731", True),
        ("127.0.0.1:8731", True),
        ("127.1.2.3", True),
        ("[::1]:8731", True),
        ("[::1]", True),
        ("localhost.attacker.example", False),
        ("127.0.0.1.nip.io:8731", False),
        ("attacker.example:8731", False),
        ("[::2]:80", False),
        ("localhost:80x", False),
        ("", False),
        (None, False),
    ],
)
def test_host_header_check_accepts_only_loopback_names(header: str | None, loopback: bool) -> None:
    assert host_header_is_loopback(header) is loopback


def _python() -> str:
    return sys.executable


def test_serve_without_the_api_extra_names_the_extra_and_exits_non_zero(tmp_path: Path) -> None:
    blocked = (
        "import sys\nfor m in ('starlette', 'uvicorn', 'websockets'):\n    sys.modules[m] = None\n"
    )
    script = blocked + (
        "import agentplug, agentplug.cli.main, agentplug.api, agentplug.api.serve\n"
        "from agentplug.api.serve import main\n"
        f"raise SystemExit(main(['--port', '0', '--state-dir', {str(tmp_path)!r}]))\n"
    )
    done = subprocess.run(
        [_python(), "-c", script], capture_output=True, text=True, timeout=WAIT_S, check=False
    )
    assert done.returncode != 0
    assert "'api' extra" in done.stderr
    assert "pip install 'agentplug[api]'" in done.stderr
    assert "starlette" in done.stderr


def test_serve_listens_on_loopback_with_a_private_token_and_stops_on_sigterm(
    tmp_path: Path,
) -> None:
    pytest.importorskip("starlette")
    pytest.importorskip("uvicorn")
    httpx = pytest.importorskip("httpx")
    config = tmp_path / "agentplug.json"
    config.write_text(json.dumps({"customActions": [], "other": {"kept": True}}), "utf-8")
    state_dir = tmp_path / "state"
    proc = subprocess.Popen(
        [
            _python(),
            "-m",
            "agentplug.api.serve",
            "--port",
            "0",
            "--config",
            str(config),
            "--state-dir",
            str(state_dir),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "AGENTPLUG_CACHE_DIR": str(tmp_path / "cache")},
        cwd=tmp_path,  # installed plugins may write files to the working directory
    )
    watchdog = threading.Timer(WAIT_S, proc.kill)
    watchdog.start()
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("agentplug API listening on http://127.0.0.1:"), line + (
            proc.stderr.read() if proc.stderr and proc.poll() is not None else ""
        )
        url = line.split()[4]
        token_file = state_dir / "api-token"
        assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
        token = token_file.read_text(encoding="utf-8").strip()
        assert token not in line  # the token is never printed

        assert httpx.get(f"{url}/api/health").json()["ok"] is True
        assert httpx.get(f"{url}/api/custom-actions").status_code == 401
        authorized = httpx.get(
            f"{url}/api/custom-actions", headers={"Authorization": f"Bearer {token}"}
        )
        assert authorized.status_code == 200
        assert authorized.json() == {"actions": [], "errors": []}

        proc.send_signal(signal.SIGTERM)
        assert proc.wait(WAIT_S) == 0
    finally:
        watchdog.cancel()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()


def test_serve_serves_the_control_room_and_says_where(tmp_path: Path) -> None:
    pytest.importorskip("starlette")
    pytest.importorskip("uvicorn")
    import httpx

    from tests.api.served import start_serve

    served = start_serve(tmp_path, {})
    try:
        assert served.proc.stdout is not None
        assert served.proc.stdout.readline().strip() == f"control room: {served.url}/ui/"
        page = httpx.get(f"{served.url}/ui/")
        assert page.status_code == 200 and "<title>agentplug control room</title>" in page.text
        assert "script-src 'self'" in page.headers["content-security-policy"]
    finally:
        served.stop()
