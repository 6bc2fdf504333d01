"""Shared test helpers: fake installed distributions on a temporary sys.path entry."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest


@pytest.fixture
def site_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A temporary directory on ``sys.path`` acting as an extra site-packages."""
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setenv("AGENTPLUG_CACHE_DIR", str(tmp_path / "cache"))
    before = set(sys.modules)
    yield site
    for name in set(sys.modules) - before:
        if name.startswith("fakeplug_"):
            del sys.modules[name]


FakeDist = Callable[..., Path]


@pytest.fixture
def fake_dist(site_dir: Path) -> FakeDist:
    """Install a fake distribution: a module plus a dist-info with entry points."""

    def make(
        dist: str,
        module: str,
        source: str,
        entry_points: dict[str, str] | None = None,
        group: str = "agentplug",
    ) -> Path:
        (site_dir / f"{module}.py").write_text(textwrap.dedent(source), encoding="utf-8")
        info = site_dir / f"{dist.replace('-', '_')}-1.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(
            f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n", encoding="utf-8"
        )
        eps = entry_points if entry_points is not None else {dist: module}
        lines = [f"[{group}]"] + [f"{name} = {value}" for name, value in eps.items()]
        (info / "entry_points.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
        return info

    return make
