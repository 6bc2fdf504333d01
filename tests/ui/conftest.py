"""Fixtures of the control room's tests: a real headless Chromium (Playwright launches it
with a fresh profile directory of its own each time)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.ui.browser import CHROMIUM_ARGS, browser_problem, chromium_path

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")


@pytest.fixture(autouse=True)
def no_sweeps(monkeypatch: pytest.MonkeyPatch) -> None:
    """The feed's periodic look at the inbox off: whatever a test sees live was pushed
    by a change notification."""
    from agentplug.api import events

    monkeypatch.setattr(events, "SWEEP_S", 3600.0)


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    """One headless Chromium per test module (each test opens its own context)."""
    problem = browser_problem()
    if problem is not None:
        pytest.skip(problem)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        try:
            browser = playwright.chromium.launch(
                executable_path=chromium_path(), args=CHROMIUM_ARGS
            )
        except Exception as exc:  # a broken install: say so, do not fail every test
            pytest.skip(f"Chromium did not start: {str(exc).splitlines()[0]}")
        try:
            yield browser
        finally:
            browser.close()
