"""``make ui-screenshots`` keeps working and docs/ui.md shows what it takes."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.ui.browser import browser_problem
from tests.ui.screenshots import SHOTS

DOCS = Path(__file__).parents[2] / "docs"


def test_the_control_room_page_shows_every_screenshot_the_script_takes() -> None:
    shown = re.findall(r"\(img/(ui-[a-z-]+\.png)\)", (DOCS / "ui.md").read_text("utf-8"))
    assert sorted(shown) == sorted(SHOTS)
    assert all((DOCS / "img" / name).stat().st_size > 1000 for name in SHOTS)


def test_the_screenshot_script_writes_every_picture(tmp_path: Path) -> None:
    problem = browser_problem()
    if problem is not None:
        pytest.skip(problem)
    from tests.ui.screenshots import take

    written = take(tmp_path)
    assert [p.name for p in written] == list(SHOTS)
    for path in written:
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
