"""``agentplug new plugin NAME``: the template makes a complete, typed plugin package.

These tests run in-process on the generated files; test_new_plugin_venv.py installs one
into a fresh virtualenv and runs its own tests, mypy and pyright.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import tomllib
from pathlib import Path

import pytest
from agentplug import PluginHost
from agentplug.cli.main import main
from agentplug.cli.new import PluginSpec, plugin_files, sample_event, write_plugin
from agentplug_hookspecs import builtin_declarations

HOOKS = sorted(name for name, d in builtin_declarations().items() if d.deprecation is None)


def test_new_plugin_writes_package_entry_point_readme_scenario_tests_and_py_typed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["new", "plugin", "my-guard", "--directory", str(tmp_path)]) == 0

    folder = tmp_path / "my-guard"
    files = sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())
    assert files == [
        ".gitignore",
        "Makefile",
        "README.md",
        "pyproject.toml",
        "src/my_guard/__init__.py",
        "src/my_guard/py.typed",
        "tests/scenario_my_guard.json",
        "tests/test_my_guard.py",
    ]
    project = tomllib.loads((folder / "pyproject.toml").read_text())
    assert project["project"]["entry-points"]["agentplug"] == {"my-guard": "my_guard"}
    assert "created" in capsys.readouterr().out


def test_the_handler_is_typed_with_the_hook_models_of_the_contract(tmp_path: Path) -> None:
    files = plugin_files(PluginSpec("my-guard", "before_tool_call"))
    module = files["src/my_guard/__init__.py"]

    assert "from agentplug_hookspecs import hookimpl" in module
    assert "from agentplug_hookspecs.tools import ToolCallEvent, ToolCallResult, ToolContext" in (
        module
    )
    assert (
        "def before_tool_call(event: ToolCallEvent, ctx: ToolContext) -> ToolCallResult | None:"
        in module
    )


def test_the_plugin_depends_on_the_contract_and_tests_with_the_runtime() -> None:
    files = plugin_files(PluginSpec("my-guard", "before_tool_call"))
    project = tomllib.loads(files["pyproject.toml"])["project"]

    assert project["dependencies"] == ["agentplug-hookspecs>=0.1,<0.2"]
    assert "agentplug>=0.1,<0.2" in project["optional-dependencies"]["test"]


def test_the_makefile_check_runs_pytest_and_mypy_strict() -> None:
    makefile = plugin_files(PluginSpec("my-guard", "before_tool_call"))["Makefile"]

    assert "check: test typecheck" in makefile
    assert "$(PYTHON) -m pytest -q" in makefile
    assert "$(PYTHON) -m mypy --strict src tests" in makefile


def test_an_unknown_hook_is_refused_with_a_did_you_mean(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["new", "plugin", "x", "--hook", "befor_tool_call", "--directory", str(tmp_path)])

    assert code == 2
    assert "unknown hook 'befor_tool_call'; did you mean 'before_tool_call'?" in (
        capsys.readouterr().err
    )
    assert list(tmp_path.iterdir()) == []


def test_a_deprecated_hook_is_refused_naming_its_replacement(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code = main(["new", "plugin", "x", "--hook", "deactivate", "--directory", str(tmp_path)])

    assert code == 2
    assert "hook 'deactivate' is deprecated; use gateway_stop instead" in capsys.readouterr().err


@pytest.mark.parametrize("name", ["json", "agentplug", "My Plugin", "1st", "a--b"])
def test_a_name_that_is_not_a_safe_package_name_is_refused(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["new", "plugin", name, "--directory", str(tmp_path)]) == 2
    assert "plugin name" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_an_existing_folder_that_is_not_empty_is_left_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "my-guard").mkdir()
    (tmp_path / "my-guard" / "notes.txt").write_text("mine")

    assert main(["new", "plugin", "my-guard", "--directory", str(tmp_path)]) == 2
    assert "already exists and is not empty" in capsys.readouterr().err
    assert [p.name for p in (tmp_path / "my-guard").iterdir()] == ["notes.txt"]


def _import_generated(folder: Path, package: str) -> object:
    init = folder / "src" / package / "__init__.py"
    spec = importlib.util.spec_from_file_location(f"generated_{package}", init)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("hook", HOOKS)
def test_every_hook_gets_a_handler_that_runs_on_the_scenarios_sample_event(
    hook: str, tmp_path: Path
) -> None:
    folder = write_plugin(PluginSpec("probe", hook), tmp_path)
    module = _import_generated(folder, "probe")
    scenario = json.loads((folder / "tests" / "scenario_probe.json").read_text())
    host = PluginHost(scenario["config"])  # as installed: the gates apply
    host.register(module, "probe", bundled=False)

    for step in scenario["steps"]:
        assert step["hook"] == hook
        if builtin_declarations()[hook].kind.value == "sync":
            result = host.call_sync(hook, step["event"])
        else:
            result = asyncio.run(host.dispatch(hook, step["event"]))
        assert [(h.plugin_id, h.status) for h in result.handlers] == [("probe", "ok")]


def test_the_sample_event_is_built_from_the_required_fields_and_validates() -> None:
    decl = builtin_declarations()["cron_changed"]
    event = sample_event(decl)

    assert event == {"reason": "added", "job": {"id": "example"}}
    decl.event.model_validate(event)
