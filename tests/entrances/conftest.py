"""The entrance matrix's shared parts: the rule plugin installed once, the config every
entrance runs with, and one module-scoped driver fixture per entrance.

``entrance`` is parametrised indirectly by the rule modules (``cells(...)``): its value is
the name of an entrance, and the fixture hands the test that entrance's driver, started
once per rule module (per xdist worker), so a subprocess entrance starts once for all the
cells of a module.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import shutil
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.entrances import matrix_plugin
from tests.entrances.entrance import Entrance

PLUGIN_MODULE = "agentplug_matrix"
"""The name the matrix plugin is installed under (a copy of ``matrix_plugin.py``)."""

ENTRANCES = (
    "runner",
    "chat",
    "serve",
    "mcp-proxy",
    "pydantic-ai-tools",
    "pydantic-ai-output",
    "langchain",
)

NO_TURN = (
    "runs no agent turn of its own (the MCP client owns the conversation), so "
    "before_agent_run never fires and nothing is delivered here"
)
FRAMEWORK_TURN = (
    "the {framework} agent runs the turn, not agentplug: before_agent_run does not fire "
    "at this entrance (its tool calls and final output are gated)"
)
NO_ACTIONS = "offers {what}, not agentplug actions: there is no action and so no validate() to ask"
OUTPUT_NOT_EXEC = (
    "an output function is gated with tool_kind 'output': it never runs a command, so no "
    "exec env is resolved for it"
)
MCP_DELIVERS_NOTHING = (
    "delivers nothing: a tool result goes back to the MCP client, which writes its own "
    "replies, so message_sending has nothing to rewrite or cancel here"
)


def cells(**not_applicable: str) -> list[Any]:
    """One ``entrance`` parameter per entrance; those named in ``not_applicable`` (with
    ``_`` for ``-``) are skipped with the reason given."""
    out = []
    for name in ENTRANCES:
        reason = not_applicable.get(name.replace("-", "_"))
        marks = [pytest.mark.skip(reason=f"{name} {reason}")] if reason else []
        out.append(pytest.param(name, id=name, marks=marks))
    return out


def matrix_config(log_dir: Path, **extra: Any) -> dict[str, Any]:
    """The operator config of every matrix gateway: the plugin and the matrix model."""
    return {
        "plugins": matrix_plugin.plugin_entry(log_dir),
        "agent": {"model": "matrix/m", "providers": {"matrix": {"log_dir": str(log_dir)}}},
        **extra,
    }


def install_matrix(site: Path) -> Path:
    """Install the matrix plugin in ``site`` as a distribution: the module, and entry
    points for the plugin (``agentplug``) and its model (``agentplug.providers``)."""
    site.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(Path(matrix_plugin.__file__), site / f"{PLUGIN_MODULE}.py")
    info = site / "agentplug_matrix-1.0.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: agentplug-matrix\nVersion: 1.0\n", encoding="utf-8"
    )
    (info / "entry_points.txt").write_text(
        f"[agentplug]\nmatrix = {PLUGIN_MODULE}:register\n\n"
        f"[agentplug.providers]\nmatrix = {PLUGIN_MODULE}:provider\n",
        encoding="utf-8",
    )
    return site


@contextlib.contextmanager
def installed(site: Path) -> Iterator[None]:
    """``site`` on ``sys.path`` while an in-process gateway loads its plugins (only then:
    other tests of the worker must not find the matrix plugin); the entry-point cache in
    ``site`` too, not in the user's cache directory."""
    cache = os.environ.get("AGENTPLUG_CACHE_DIR")
    os.environ["AGENTPLUG_CACHE_DIR"] = str(site.parent / f"{site.name}-cache")
    sys.path.insert(0, str(site))
    importlib.invalidate_caches()
    try:
        yield
    finally:
        with contextlib.suppress(ValueError):
            sys.path.remove(str(site))
        importlib.invalidate_caches()
        if cache is None:
            os.environ.pop("AGENTPLUG_CACHE_DIR", None)
        else:
            os.environ["AGENTPLUG_CACHE_DIR"] = cache


@pytest.fixture(scope="session")
def matrix_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site directory holding the installed matrix plugin."""
    return install_matrix(tmp_path_factory.mktemp("matrix-site"))


DriverFactory = Callable[[Path, Path], Entrance]


def _driver(
    tmp_path_factory: pytest.TempPathFactory, site: Path, name: str, factory: DriverFactory
) -> Iterator[Entrance]:
    folder = tmp_path_factory.mktemp(f"entrance-{name}")
    driver = factory(site, folder)
    try:
        yield driver
    finally:
        driver.close()


@pytest.fixture(scope="module")
def runner_entrance(
    tmp_path_factory: pytest.TempPathFactory, matrix_site: Path
) -> Iterator[Entrance]:
    from tests.entrances.drivers.runner import RunnerEntrance

    yield from _driver(tmp_path_factory, matrix_site, "runner", RunnerEntrance)


@pytest.fixture(scope="module")
def chat_entrance(
    tmp_path_factory: pytest.TempPathFactory, matrix_site: Path
) -> Iterator[Entrance]:
    from tests.entrances.drivers.chat import ChatEntrance

    yield from _driver(tmp_path_factory, matrix_site, "chat", ChatEntrance)


@pytest.fixture(scope="module")
def serve_entrance(
    tmp_path_factory: pytest.TempPathFactory, matrix_site: Path
) -> Iterator[Entrance]:
    pytest.importorskip("uvicorn", reason="agentplug serve needs the 'api' extra")
    from tests.entrances.drivers.serve import ServeEntrance

    yield from _driver(tmp_path_factory, matrix_site, "serve", ServeEntrance)


@pytest.fixture(scope="module")
def mcp_proxy_entrance(
    tmp_path_factory: pytest.TempPathFactory, matrix_site: Path
) -> Iterator[Entrance]:
    pytest.importorskip("mcp", reason="the MCP proxy needs the 'mcp' extra")
    from tests.entrances.drivers.mcp_proxy import McpProxyEntrance

    yield from _driver(tmp_path_factory, matrix_site, "mcp-proxy", McpProxyEntrance)


@pytest.fixture(scope="module")
def pydantic_ai_tools_entrance(
    tmp_path_factory: pytest.TempPathFactory, matrix_site: Path
) -> Iterator[Entrance]:
    pytest.importorskip("pydantic_ai", reason="the PydanticAI adapter needs its extra")
    from tests.entrances.drivers.pydantic_ai_agent import PydanticToolsEntrance

    yield from _driver(tmp_path_factory, matrix_site, "pydantic-tools", PydanticToolsEntrance)


@pytest.fixture(scope="module")
def pydantic_ai_output_entrance(
    tmp_path_factory: pytest.TempPathFactory, matrix_site: Path
) -> Iterator[Entrance]:
    pytest.importorskip("pydantic_ai", reason="the PydanticAI adapter needs its extra")
    from tests.entrances.drivers.pydantic_ai_agent import PydanticOutputEntrance

    yield from _driver(tmp_path_factory, matrix_site, "pydantic-output", PydanticOutputEntrance)


@pytest.fixture(scope="module")
def langchain_entrance(
    tmp_path_factory: pytest.TempPathFactory, matrix_site: Path
) -> Iterator[Entrance]:
    pytest.importorskip("langchain.agents", reason="the LangChain adapter needs its extra")
    from tests.entrances.drivers.langchain_agent import LangChainEntrance

    yield from _driver(tmp_path_factory, matrix_site, "langchain", LangChainEntrance)


@pytest.fixture
def entrance(request: pytest.FixtureRequest) -> Entrance:
    """The driver of the entrance this cell is about (``cells(...)`` parametrises it)."""
    name = str(request.param).replace("-", "_")
    driver: Entrance = request.getfixturevalue(f"{name}_entrance")
    return driver
