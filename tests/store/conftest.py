"""The backends every store test runs on: ``store`` (memory, SQLite, PostgreSQL) and
``shared_url`` (the durable ones, which several processes open by URL)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from agentplug.store import StateStore, open_store_url


def backend_url(request: pytest.FixtureRequest, backend: str, tmp_path: Path) -> str:
    """The URL of a new, empty store of ``backend`` (``memory``, ``sqlite``, ``postgres``)."""
    if backend == "memory":
        return "memory:"
    if backend == "sqlite":
        return f"sqlite:///{tmp_path / 'state.sqlite3'}"
    try:
        return str(request.getfixturevalue("postgres_url"))
    except pytest.FixtureLookupError:
        pytest.skip("postgres_url fixture not available")


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StateStore]:
    """A new, empty store of each backend."""
    s = open_store_url(backend_url(request, request.param, tmp_path))
    yield s
    s.close()


@pytest.fixture(params=["sqlite", "postgres"])
def shared_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The URL of a durable store that several processes open."""
    return backend_url(request, request.param, tmp_path)
