"""A real headless Chromium for the control room's tests, driven by Playwright.

The browser is the distribution's (Debian's ``chromium`` package, ``/usr/bin/chromium``;
``$AGENTPLUG_CHROMIUM`` names another), never one Playwright downloads. :func:`browser_problem`
says why no browser can run (the tests skip with that reason).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from pathlib import Path

CHROMIUM_ENV = "AGENTPLUG_CHROMIUM"
"""Environment variable naming the Chromium binary (default: ``chromium`` on ``PATH``)."""

CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    # A page "from another site" for the cross-origin tests, answered by 127.0.0.1.
    "--host-resolver-rules=MAP foreign.test 127.0.0.1",
]


def chromium_path() -> str | None:
    """The Chromium binary to drive, or ``None``."""
    chosen = os.environ.get(CHROMIUM_ENV)
    if chosen:
        return chosen if Path(chosen).exists() else None
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    return None


def browser_problem() -> str | None:
    """Why the browser tests cannot run here, or ``None`` when they can."""
    if importlib.util.find_spec("playwright") is None:
        return "the browser tests need Playwright: pip install 'agentplug[test]' (make test does)"
    if chromium_path() is None:
        return (
            "no Chromium binary: install Debian's chromium and chromium-driver packages "
            f"(.ci/run does), or set ${CHROMIUM_ENV}"
        )
    return None
