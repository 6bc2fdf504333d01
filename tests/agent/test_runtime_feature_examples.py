"""The runnable examples of docs/agent-runtime.md run as written and print what the page
says they print (streaming, retries, usage and limits, structured output, parallel tools,
tracing): each ``python title="examples/..."`` block runs as a script in a fresh folder,
and the ``text`` block after it is its exact output."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.ecosystem.docblocks import Block, blocks

PAGE = "agent-runtime.md"
EXAMPLES = [
    (block, following)
    for block, following in zip(blocks(PAGE), [*blocks(PAGE)[1:], None], strict=True)
    if block.lang == "python" and (block.title or "").startswith("examples/")
]


def test_the_page_has_an_example_for_each_runtime_feature() -> None:
    names = {Path(block.title or "").stem for block, _ in EXAMPLES}
    assert {"streaming", "blocks", "retries", "usage", "structured", "parallel", "tracing"} <= names


@pytest.mark.parametrize(
    ("block", "expected"), EXAMPLES, ids=[Path(b.title or "").stem for b, _ in EXAMPLES]
)
def test_the_example_runs_and_prints_what_the_page_shows(
    block: Block, expected: Block | None, tmp_path: Path
) -> None:
    where = f"docs/{PAGE}:{block.line}"
    assert expected is not None and expected.lang == "text", f"{where}: no output block"
    script = tmp_path / Path(block.title or "example.py").name
    script.write_text(block.body, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, f"{where}: {done.stderr[-2000:]}"
    assert done.stdout == expected.body, f"{where} printed:\n{done.stdout}"
