"""Processes of the cross-process approval tests: gateways, racers and their output.

Each process runs ``approval_gateway.py`` (see its docstring for the modes) with its
stdin, stdout and stderr piped.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

GATEWAY = str(Path(__file__).with_name("approval_gateway.py"))


def shared_store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The store URL of a ``params=["sqlite", "postgres"]`` fixture (PostgreSQL skips
    when no ``postgres_url`` fixture exists)."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'state.sqlite3'}"
    try:
        url: str = request.getfixturevalue("postgres_url")
    except pytest.FixtureLookupError:
        pytest.skip("postgres_url fixture not available")
    return url


def gateway(*args: str) -> subprocess.Popen[str]:
    """Start ``approval_gateway.py`` with ``args``."""
    return subprocess.Popen(
        [sys.executable, GATEWAY, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def start_together(racers: list[subprocess.Popen[str]]) -> None:
    """Wait until every racer is connected, then release them all at once."""
    for racer in racers:
        assert racer.stdout is not None and racer.stdin is not None
        line = racer.stdout.readline()
        assert line.strip() == "READY", (line, racer.stderr.read() if racer.stderr else "")
    for racer in racers:
        assert racer.stdin is not None
        racer.stdin.write("go\n")
        racer.stdin.flush()


def pending_id(proc: subprocess.Popen[str]) -> str:
    """The approval id an ``ask`` gateway published."""
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.startswith("PENDING "), (line, proc.stderr.read() if proc.stderr else "")
    return line.split()[1]


def printed(proc: subprocess.Popen[str]) -> dict[str, Any]:
    """The last JSON line a gateway printed (it must exit 0)."""
    out, err = proc.communicate(
        input="" if proc.stdin and not proc.stdin.closed else None, timeout=60
    )
    assert proc.returncode == 0, err
    data: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return data
