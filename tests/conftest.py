"""Shared test helpers: fake installed distributions on a temporary sys.path entry, and
the ``javascript`` marker (tests of JavaScript code actions, which need the ``js`` extra)."""

from __future__ import annotations

import importlib.util
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

JS_SKIP_REASON = (
    "JavaScript code actions need the embedded V8 runtime: pip install 'agentplug[js]' "
    "(mini-racer); `make test` installs it"
)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "javascript: runs JavaScript code actions (skipped without mini-racer)"
    )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    if importlib.util.find_spec("py_mini_racer") is not None:
        return
    skip = pytest.mark.skip(reason=JS_SKIP_REASON)
    for item in items:
        if item.get_closest_marker("javascript") is not None:
            item.add_marker(skip)


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
