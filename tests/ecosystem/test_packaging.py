"""Two distributions from one repository: ``agentplug-hookspecs`` (hookspecs/) and
``agentplug`` (the top level). Each builds an sdist and a wheel that ``twine check``
accepts, holds its own package only, and installs editable as a plain path entry."""

from __future__ import annotations

import importlib.metadata
import sys
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from email.parser import Parser
from pathlib import Path

import agentplug
import agentplug_hookspecs
import pytest

from tests.ecosystem.freshvenv import ROOT, make_venv, pip_install, run


@dataclass(frozen=True)
class Built:
    folder: Path

    def one(self, pattern: str) -> Path:
        [found] = sorted(self.folder.glob(pattern))
        return found


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Built]:
    """``python -m build`` of both distributions (no isolation: the test extra has the
    build requirements), into one folder."""
    out = tmp_path_factory.mktemp("dist")
    for source in (ROOT / "hookspecs", ROOT):
        run(sys.executable, "-m", "build", "--no-isolation", "--outdir", out, source, timeout=600)
    yield Built(out)


def _names(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as archive:
        return archive.namelist()


def _metadata(wheel: Path) -> dict[str, list[str]]:
    with zipfile.ZipFile(wheel) as archive:
        [name] = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        message = Parser().parsestr(archive.read(name).decode())
    return {key: message.get_all(key) or [] for key in ("Name", "Version", "Requires-Dist")}


def test_both_distributions_build_an_sdist_and_a_wheel(built: Built) -> None:
    names = sorted(p.name for p in built.folder.iterdir())

    assert names == [
        f"agentplug-{agentplug.__version__}-py3-none-any.whl",
        f"agentplug-{agentplug.__version__}.tar.gz",
        f"agentplug_hookspecs-{agentplug_hookspecs.__version__}-py3-none-any.whl",
        f"agentplug_hookspecs-{agentplug_hookspecs.__version__}.tar.gz",
    ]


def test_twine_check_passes_on_every_artifact(built: Built) -> None:
    out = run(sys.executable, "-m", "twine", "check", "--strict", *sorted(built.folder.iterdir()))

    assert out.count("PASSED") == 4


def test_the_contract_wheel_holds_the_contract_only_and_is_typed(built: Built) -> None:
    wheel = built.one("agentplug_hookspecs-*.whl")
    packages = {n.split("/")[0] for n in _names(wheel) if ".dist-info" not in n}

    assert packages == {"agentplug_hookspecs"}
    assert "agentplug_hookspecs/py.typed" in _names(wheel)
    requires = sorted(r.split(">")[0] for r in _metadata(wheel)["Requires-Dist"])
    assert requires == ["pluggy", "pydantic"]


def test_the_runtime_wheel_depends_on_a_compatible_range_of_the_contract(built: Built) -> None:
    wheel = built.one("agentplug-*.whl")
    packages = {n.split("/")[0] for n in _names(wheel) if ".dist-info" not in n}

    assert packages == {"agentplug"}
    assert "agentplug-hookspecs<0.2,>=0.1" in _metadata(wheel)["Requires-Dist"]


def test_the_runtime_wheel_ships_py_typed_and_the_plugin_templates(built: Built) -> None:
    names = _names(built.one("agentplug-*.whl"))

    assert "agentplug/py.typed" in names
    assert "agentplug/templates/plugin/src/PACKAGE/__init__.py.tmpl" in names
    assert "agentplug/templates/plugin/src/PACKAGE/py.typed" in names
    assert "agentplug/templates/snippets/handler_before_tool_call.tmpl" in names


def test_the_runtime_wheel_ships_every_file_of_the_control_room(built: Built) -> None:
    names = _names(built.one("agentplug-*.whl"))
    static = Path(__file__).parents[2] / "framework" / "agentplug" / "api" / "static"

    files = sorted(p.name for p in static.iterdir())
    assert "index.html" in files and "app.js" in files
    assert sorted(n for n in names if n.startswith("agentplug/api/static/")) == [
        f"agentplug/api/static/{name}" for name in files
    ]


@pytest.mark.parametrize("distribution", ["agentplug", "agentplug-hookspecs"])
def test_an_editable_install_is_a_plain_path_entry(distribution: str) -> None:
    # The installed record (an ``*.egg-info`` left in a source root may come first).
    pth = [
        f
        for dist in importlib.metadata.distributions(name=distribution)
        for f in dist.files or []
        if f.name.endswith(".pth")
    ]
    if not pth:
        pytest.skip(f"{distribution} is not installed editable here")
    [entry] = pth
    lines = entry.read_text().split()

    # One source root, no import hook (``import __editable___..._finder``).
    assert len(lines) == 1 and not lines[0].startswith("import")
    assert Path(lines[0]) in (ROOT / "framework", ROOT / "hookspecs")


def test_the_runtime_reexports_the_contracts_marker() -> None:
    assert agentplug.hookimpl is agentplug_hookspecs.hookimpl
    assert agentplug.HandlerOptions is agentplug_hookspecs.HandlerOptions


PLUGIN = """
from agentplug_hookspecs import hookimpl
from agentplug_hookspecs.tools import ToolCallEvent, ToolCallResult, ToolContext


@hookimpl(priority=10)
def before_tool_call(event: ToolCallEvent, ctx: ToolContext) -> ToolCallResult | None:
    if event.tool_name == "exec":
        return ToolCallResult(block=True, block_reason="no exec")
    return None
"""

PROBE = """
import importlib.util, contract_only_plugin
from agentplug_hookspecs.tools import ToolCallEvent, ToolContext
assert importlib.util.find_spec("agentplug") is None, "the runtime is installed"
result = contract_only_plugin.before_tool_call(ToolCallEvent(tool_name="exec"), ToolContext())
print(result.block if result else None)
"""


@pytest.mark.stress
def test_the_contract_alone_lets_a_plugin_import_and_type_check_its_handlers(
    built: Built, tmp_path: Path
) -> None:
    python = make_venv(tmp_path / "venv")
    pip_install(python, built.one("agentplug_hookspecs-*.whl"))
    (tmp_path / "contract_only_plugin.py").write_text(PLUGIN)

    assert run(python, "-c", PROBE, cwd=tmp_path).strip() == "True"
    out = run(
        sys.executable,
        "-m",
        "mypy",
        "--strict",
        "--no-incremental",
        "--python-executable",
        python,
        "contract_only_plugin.py",
        cwd=tmp_path,
    )
    assert "Success: no issues found in 1 source file" in out
