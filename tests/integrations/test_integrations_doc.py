"""docs/integrations.md runs as written: every ``python`` block, in order, in one directory.

A block whose first line is ``# file: NAME`` is written to ``NAME`` instead of run; a
``text`` block right after a block is that block's exact standard output.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "integrations.md"
FENCE = re.compile(r"```(\w+)\n(.*?)```", re.DOTALL)
FILE = re.compile(r"# file: (\S+)\n")

for module, extra in (("mcp", "mcp"), ("pydantic_ai", "pydantic-ai"), ("langchain", "langchain")):
    pytest.importorskip(module, reason=f"the integration examples need agentplug[{extra}]")


def _blocks() -> list[tuple[str, str, str | None]]:
    """(kind, code, expected output) of each python block, in order."""
    fences = FENCE.findall(DOC.read_text(encoding="utf-8"))
    found: list[tuple[str, str, str | None]] = []
    for index, (lang, body) in enumerate(fences):
        if lang != "python":
            continue
        following = fences[index + 1] if index + 1 < len(fences) else None
        expected = following[1] if following and following[0] == "text" else None
        found.append(("file" if FILE.match(body) else "run", body, expected))
    return found


def test_every_integrations_example_runs_as_written(tmp_path: Path) -> None:
    blocks = _blocks()
    assert sum(kind == "run" for kind, _, _ in blocks) >= 4  # MCP, proxy, PydanticAI, LangChain
    # As a reader runs them: the virtualenv is not activated (its bin/ is not on PATH).
    bin_dir = str(Path(sys.executable).parent)
    path = os.pathsep.join(p for p in os.environ.get("PATH", "").split(os.pathsep) if p != bin_dir)
    env = {**os.environ, "PATH": path, "AGENTPLUG_CACHE_DIR": str(tmp_path / "cache")}
    for number, (kind, body, expected) in enumerate(blocks):
        if kind == "file":
            name = FILE.match(body).group(1)  # type: ignore[union-attr]
            (tmp_path / name).write_text(body, encoding="utf-8")
            continue
        script = tmp_path / f"example_{number}.py"
        script.write_text(body, encoding="utf-8")
        done = subprocess.run(
            [sys.executable, str(script)],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, f"example {number} failed:\n{done.stderr[-3000:]}"
        if expected is not None:
            assert done.stdout == expected, f"example {number} printed:\n{done.stdout}"
