"""The tutorial pages run as written, and every Python example of the guides is typed.

Each tutorial page's code blocks run in order in a fresh folder (see ``docblocks`` for
how each kind of block runs); the Python examples of the plugin guide, the testing guide
and the tutorial pages pass ``mypy --strict``.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.ecosystem.docblocks import Reader, blocks, python_examples

TUTORIAL_PAGES = ["quickstart.md", "plugin-guide.md", "approvals.md", "maintainers.md"]
TYPED_PAGES = ["plugin-guide.md", "testing.md", *TUTORIAL_PAGES[2:], "quickstart.md"]


@pytest.mark.parametrize("page", TUTORIAL_PAGES)
def test_every_code_block_of_the_tutorial_page_runs_in_order(page: str, tmp_path: Path) -> None:
    reader = Reader(tmp_path)
    reader.read(page)

    runnable = [b for b in blocks(page) if b.lang in ("python", "sh") and b.title is None]
    assert runnable and reader.ran, f"docs/{page}: no block ran"
    if page == "quickstart.md":  # the template's plugin passed its own `make check`
        assert any(command.startswith("make check") for command in reader.ran)


@pytest.mark.parametrize("page", sorted(set(TYPED_PAGES)))
def test_every_python_example_of_the_page_passes_mypy_strict(page: str, tmp_path: Path) -> None:
    files = python_examples(page, tmp_path)
    if not files:
        pytest.skip(f"docs/{page} has no Python example")
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", "--explicit-package-bases",
         *[str(f.relative_to(tmp_path)) for f in files]],
        cwd=tmp_path, capture_output=True, text=True, timeout=600,
        env={"MYPYPATH": f"{tmp_path}:{tmp_path / 'src'}", "PATH": "/usr/bin:/bin"},
    )  # fmt: skip

    assert done.returncode == 0, f"docs/{page}:\n{done.stdout}{done.stderr}"


def test_the_guides_import_the_hook_models_they_annotate_with() -> None:
    for page in ("plugin-guide.md", "testing.md"):
        python = "\n".join(b.body for b in blocks(page) if b.lang == "python")
        assert "from agentplug_hookspecs.tools import" in python, page
        assert "ToolCallEvent" in python and "ToolContext" in python, page
        assert "def before_tool_call(event, ctx)" not in python, page
