"""docs/agent-runtime.md's runnable examples run as written.

A ``python`` block right after a ``<!-- runnable: NAME -->`` line is one example: it runs
as a script in a fresh directory (offline: the scripted provider), and the ``text`` block
right after it, when there is one, is its exact standard output.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "agent-runtime.md"
EXAMPLE = re.compile(
    r"<!-- runnable: ([\w-]+) -->\n```python\n(.*?)```(?:\s*```text\n(.*?)```)?", re.DOTALL
)
REQUIRED = {"sessions", "subagents"}
"""Examples this page must keep (others may be added next to them)."""


def _examples() -> dict[str, tuple[str, str | None]]:
    found: dict[str, tuple[str, str | None]] = {}
    for name, code, output in EXAMPLE.findall(DOC.read_text(encoding="utf-8")):
        assert name not in found, f"two runnable examples are called {name!r}"
        found[name] = (code, output or None)
    return found


def test_the_page_keeps_its_runnable_examples() -> None:
    assert set(_examples()) >= REQUIRED


@pytest.mark.parametrize("name", sorted(_examples()))
def test_a_runnable_example_runs_as_written(name: str, tmp_path: Path) -> None:
    code, expected = _examples()[name]
    script = tmp_path / f"{name}.py"
    script.write_text(code, encoding="utf-8")
    env = {**os.environ, "AGENTPLUG_CACHE_DIR": str(tmp_path / "cache")}
    for variable in ("AGENTPLUG_CONFIG", "AGENTPLUG_STATE_DIR", "AGENTPLUG_STATE_URL"):
        env.pop(variable, None)
    done = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    if expected is not None:
        assert done.stdout == expected
