"""Fresh virtualenvs for the ecosystem tests: what a plugin author gets from a checkout.

Installs come from the package index (pip's cache makes a second run quick); the
checkout's two distributions are installed editable, as the docs tell authors to.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
INSTALL_TIMEOUT = 900


def run(*args: str | Path, cwd: Path | None = None, timeout: int = 600) -> str:
    """Run a command; on failure, the assertion shows its output."""
    done = subprocess.run(
        [str(a) for a in args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PYTHONDONTWRITEBYTECODE": "1"},
    )
    assert done.returncode == 0, (
        f"{' '.join(str(a) for a in args)} exited {done.returncode}:\n"
        f"{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
    )
    return done.stdout


def make_venv(folder: Path) -> Path:
    """A new virtualenv at ``folder`` (with pip); returns its python."""
    run(sys.executable, "-m", "venv", folder, timeout=300)
    return folder / "bin" / "python"


def pip_install(python: Path, *args: str | Path) -> None:
    """``pip install`` into the environment of ``python``."""
    run(python, "-m", "pip", "install", "--quiet", *args, timeout=INSTALL_TIMEOUT)


def install_checkout(python: Path, *extra: str | Path) -> None:
    """The checkout's two distributions, editable (``pip install -e hookspecs -e .``),
    plus ``extra`` requirements, built without build isolation (setuptools comes first)."""
    pip_install(python, "setuptools>=77", "wheel")
    pip_install(python, "--no-build-isolation", "-e", ROOT / "hookspecs", "-e", ROOT, *extra)
