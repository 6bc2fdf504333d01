"""The pytest plugin, its fixtures and the scenario runner.

The names below are the types of the fixtures (``agentplug_load`` is a
:class:`PluginLoader`, ``agentplug_dispatch`` a :class:`Dispatcher`, ...), for plugin
tests that mypy checks, and the scenario API (``agentplug run`` and the pytest items use
it). They load on first use: importing this package (pytest does, in every session of an
environment where agentplug is installed) loads none of the runtime.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

_LAZY = {
    "PluginLoader": "agentplug.testing.plugin_loader",
    "Dispatcher": "agentplug.testing.recorder",
    "DispatchRecord": "agentplug.testing.recorder",
    "DispatchRecorder": "agentplug.testing.recorder",
    "ApprovalScript": "agentplug.testing.approval_script",
    "Scenario": "agentplug.testing.scenario",
    "ScenarioError": "agentplug.testing.scenario",
    "load_scenario": "agentplug.testing.scenario",
    "parse_scenario": "agentplug.testing.scenario",
    "build_host": "agentplug.testing.scenario",
    "run_scenario": "agentplug.testing.scenario",
}

if TYPE_CHECKING:
    from agentplug.testing.approval_script import ApprovalScript
    from agentplug.testing.plugin_loader import PluginLoader
    from agentplug.testing.recorder import Dispatcher, DispatchRecord, DispatchRecorder
    from agentplug.testing.scenario import (
        Scenario,
        ScenarioError,
        build_host,
        load_scenario,
        parse_scenario,
        run_scenario,
    )


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'agentplug.testing' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "ApprovalScript",
    "DispatchRecord",
    "DispatchRecorder",
    "Dispatcher",
    "PluginLoader",
    "Scenario",
    "ScenarioError",
    "build_host",
    "load_scenario",
    "parse_scenario",
    "run_scenario",
]
