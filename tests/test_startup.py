"""Start-up stays light: what ``import agentplug`` and ``agentplug --help`` load.

Plugin modules import ``agentplug`` for ``hookimpl`` only, and pytest imports the
agentplug pytest plugin in every session of an environment where agentplug is installed:
``import agentplug`` loads the marker layer (pluggy) and nothing else. Hook models are
built on first use (``defer_build``), and every one of them still builds. Timings live in
``bench/bench_startup.py``; these tests check what is loaded, never how long it took.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import json
import pkgutil
import subprocess
import sys
from typing import Any

import agentplug_hookspecs
import pytest
from agentplug.cli.main import LAZY_COMMANDS, build_parser
from agentplug_hookspecs import HookModel, builtin_declarations
from pydantic import BaseModel
from pydantic_core import SchemaValidator

# The whole of what ``import agentplug`` may load from this project.
IMPORT_AGENTPLUG_LOADS = {
    "agentplug",
    "agentplug.config",
    "agentplug.config.errors",
    "agentplug.core",
    "agentplug.core.errors",
    "agentplug.core.markers",
    "agentplug_hookspecs",
    "agentplug_hookspecs._markers",
    "agentplug_hookspecs._names",
}
# Layers and libraries that neither ``import agentplug`` nor ``agentplug --help`` may load.
HEAVY = (
    "agentplug.actions",
    "agentplug.agent",
    "agentplug.api",
    "agentplug.plugins",
    "agentplug.sandbox",
    "agentplug.security",
    "agentplug.services",
    "agentplug.store",
    "agentplug.testing",
    "agentplug.core.host",
    "agentplug_hookspecs._model",
    "agentplug_hookspecs._semantics",
    "agentplug_hookspecs.actions",
    "agentplug_hookspecs.agent",
    "agentplug_hookspecs.lifecycle",
    "agentplug_hookspecs.messages",
    "agentplug_hookspecs.sessions",
    "agentplug_hookspecs.tools",
    "httpx",
    "pydantic",
    "starlette",
    "uvicorn",
)


def _modules_after(code: str) -> set[str]:
    """``sys.modules`` of a fresh interpreter after running ``code``."""
    probe = f"import json, sys\n{code}\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120
    )
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


def test_import_agentplug_loads_the_marker_layer_only() -> None:
    loaded = _modules_after("import agentplug")

    ours = {m for m in loaded if m.split(".")[0] in ("agentplug", "agentplug_hookspecs")}
    assert ours == IMPORT_AGENTPLUG_LOADS
    assert sorted(m for m in loaded if m.startswith(HEAVY)) == []


def test_import_agentplug_is_enough_to_write_a_plugin() -> None:
    loaded = _modules_after(
        "from agentplug import hookimpl\n"
        "@hookimpl(priority=5, timeout_ms=100)\n"
        "def before_tool_call(event):\n"
        "    return None"
    )

    assert sorted(m for m in loaded if m.startswith(HEAVY)) == []


def test_agentplug_help_loads_no_command_group() -> None:
    loaded = _modules_after(
        "from agentplug.cli.main import main\n"
        "try:\n"
        "    main(['--help'])\n"
        "except SystemExit:\n"
        "    pass"
    )

    assert sorted(m for m in loaded if m.startswith(HEAVY)) == []


def test_a_command_loads_its_own_group_only() -> None:
    loaded = _modules_after(
        "from agentplug.cli.main import main\n"
        "try:\n"
        "    main(['approvals', '--help'])\n"
        "except SystemExit:\n"
        "    pass"
    )

    assert "agentplug.cli.approvals" in loaded
    assert sorted(m for m in loaded if m.startswith(("agentplug.api", "agentplug.plugins"))) == []


def _summaries(parser: argparse.ArgumentParser) -> dict[str, str | None]:
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {choice.dest: choice.help for choice in action._choices_actions}


def test_lazy_command_summaries_match_what_each_group_registers() -> None:
    full = _summaries(build_parser())
    listed = _summaries(build_parser(["--help"]))

    assert {name: full[name] for name in LAZY_COMMANDS} == {
        name: summary for name, (summary, _) in LAZY_COMMANDS.items()
    }
    assert listed == full


@pytest.mark.parametrize("command", sorted(LAZY_COMMANDS))
def test_each_lazy_command_parses_as_when_fully_built(command: str) -> None:
    full = build_parser()
    lazy = build_parser([command, "--help"])

    assert lazy.format_help() == full.format_help()
    sub = next(a for a in lazy._actions if isinstance(a, argparse._SubParsersAction))
    full_sub = next(a for a in full._actions if isinstance(a, argparse._SubParsersAction))
    assert sub.choices[command].format_help() == full_sub.choices[command].format_help()


def test_hook_models_are_built_on_first_use_not_at_import() -> None:
    code = (
        "from agentplug_hookspecs import tools\n"
        "assert not tools.ToolCallEvent.__pydantic_complete__\n"
        "tools.ToolCallEvent(tool_name='exec')\n"
        "assert tools.ToolCallEvent.__pydantic_complete__"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def _contract_models() -> list[type[BaseModel]]:
    found: dict[str, type[BaseModel]] = {}
    for info in pkgutil.iter_modules(agentplug_hookspecs.__path__):
        module = importlib.import_module(f"agentplug_hookspecs.{info.name}")
        for name, value in vars(module).items():
            if (
                inspect.isclass(value)
                and issubclass(value, BaseModel)
                and value.__module__ == module.__name__
            ):
                found[f"{module.__name__}.{name}"] = value
    for decl in builtin_declarations().values():
        for model in (decl.event, decl.ctx, decl.result, decl.outcome):
            if model is not None:
                found[f"{model.__module__}.{model.__qualname__}"] = model
    return [found[key] for key in sorted(found)]


MODELS = _contract_models()


def test_every_hook_payload_model_is_collected() -> None:
    payloads = {m for d in builtin_declarations().values() for m in (d.event, d.ctx, d.outcome)}
    assert payloads <= set(MODELS)
    assert len(MODELS) > 80
    assert sum(issubclass(m, HookModel) for m in MODELS) > 80


@pytest.mark.parametrize("model", MODELS, ids=lambda m: f"{m.__module__}.{m.__qualname__}")
def test_every_contract_model_builds(model: Any) -> None:
    assert model.model_rebuild(force=True, raise_errors=True) is True
    assert model.__pydantic_complete__
    assert isinstance(model.__pydantic_validator__, SchemaValidator)
