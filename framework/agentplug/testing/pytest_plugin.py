"""pytest plugin: fixtures for testing agentplug plugins, and scenario files as tests.

Installed with the distribution as the ``pytest11`` entry point ``agentplug``; opt out
with ``pytest -p no:agentplug``. See ``docs/testing.md``.

Fixtures (function scope):

``agentplug_config``
    The operator config (a dict) of ``agentplug_host``. Override the fixture in a test
    module or ``conftest.py``, or use ``@pytest.mark.agentplug_config({...})`` (applied on
    top of the fixture value; the closest marker wins, dicts are merged deeply).
``agentplug_gateway``
    An isolated :class:`~agentplug.Gateway` built from that config (its state in memory
    unless the config names a state directory or URL): ``.sessions``, ``.actions``,
    ``.approvals``, ``.tool_calls``, ``.runner``.
``agentplug_host``
    The gateway's :class:`~agentplug.PluginHost`. No installed plugin
    (entry point) is loaded unless the test is marked ``@pytest.mark.agentplug_entry_points``
    (every installed plugin, with the config's filters) or
    ``@pytest.mark.agentplug_entry_points("name", ...)`` (just those), or loads one with
    ``agentplug_load``.
``agentplug_load``
    ``agentplug_load(target, plugin_id=None, *, bundled=None)`` registers a plugin object,
    a ``"package.module"`` / ``"package.module:attr"`` path, or an installed entry point
    by name on ``agentplug_host``.
``agentplug_dispatch``
    ``agentplug_dispatch(hook, event=None, ctx=None)`` runs one dispatch from a plain
    (non-async) test, like ``asyncio.run`` but on one event loop per test.
``agentplug_recorder``
    Records every dispatch of ``agentplug_host`` (hook, event, ctx, outcome, handler
    reports). It wraps the host *instance's* ``dispatch`` and ``call_sync`` methods for the
    duration of the test (the class is untouched).
``agentplug_approvals``
    A scriptable approval resolver (``.script("web_search", "allow-once")``) with an
    :class:`~agentplug.services.approvals.ApprovalBroker` wired to it (``.broker``) and
    ``.tool_call(...)`` to run ``before_tool_call`` plus the approval round-trip.

Scenario files named ``scenario_*.json`` (ini option ``agentplug_scenarios``) are
collected as one test item per file; steps may carry ``expect``, ``expect_handlers`` and
``expect_approval`` (checked by :mod:`agentplug.testing.scenario_check`, as ``agentplug run``
does). ``AGENTPLUG_PYTEST_DISABLE=1`` or ``agentplug_disable = true`` turns scenario
collection off.

This module imports nothing from the agentplug runtime at import time: pytest loads it
in every session of an environment where agentplug is installed.

The fixtures live in :mod:`agentplug.testing.fixtures` (registered as a plugin in
:func:`pytest_configure`), the scenario items in :mod:`agentplug.testing.scenario_items`;
the helper classes (:class:`PluginLoader`, :class:`Dispatcher`, :class:`DispatchRecorder`,
:class:`ApprovalScript`, ...) in their own modules and are importable from here (lazily).
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import pytest

if TYPE_CHECKING:
    from agentplug.testing.approval_script import ApprovalScript, ToolCallCheck
    from agentplug.testing.fixture_state import AgentplugPytestWarning
    from agentplug.testing.plugin_loader import PluginLoader
    from agentplug.testing.recorder import Dispatcher, DispatchRecord, DispatchRecorder
    from agentplug.testing.scenario_items import ScenarioFailure, ScenarioFile, ScenarioItem

__all__ = [
    "DISABLE_ENV",
    "AgentplugPytestWarning",
    "ApprovalScript",
    "DispatchRecord",
    "DispatchRecorder",
    "Dispatcher",
    "PluginLoader",
    "ScenarioFailure",
    "ScenarioFile",
    "ScenarioItem",
    "ToolCallCheck",
]

DISABLE_ENV: Final = "AGENTPLUG_PYTEST_DISABLE"
"""Environment variable: a true value (``1``, ``true``, ``yes``, ``on``) skips scenario files."""
DEFAULT_SCENARIO_GLOBS: Final = ("scenario_*.json",)
_TRUE: Final = frozenset({"1", "true", "yes", "on"})

_LAZY: Final = {
    "AgentplugPytestWarning": "agentplug.testing.fixture_state",
    "ApprovalScript": "agentplug.testing.approval_script",
    "Decision": "agentplug.testing.approval_script",
    "DispatchRecord": "agentplug.testing.recorder",
    "DispatchRecorder": "agentplug.testing.recorder",
    "Dispatcher": "agentplug.testing.recorder",
    "PluginLoader": "agentplug.testing.plugin_loader",
    "ScenarioFailure": "agentplug.testing.scenario_items",
    "ScenarioFile": "agentplug.testing.scenario_items",
    "ScenarioItem": "agentplug.testing.scenario_items",
    "ToolCallCheck": "agentplug.testing.approval_script",
}
"""Where the names this module re-exports live (imported on first access)."""


def __getattr__(name: str) -> Any:
    # Lazy: pytest imports this module in every session, so the helper modules load only
    # when a name is asked for (or the fixtures are registered).
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


# -- pytest hooks ----------------------------------------------------------------------


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini(
        "agentplug_scenarios",
        type="args",
        default=list(DEFAULT_SCENARIO_GLOBS),
        help="agentplug: glob(s) of scenario files collected as tests "
        "(matched against the end of the path; default scenario_*.json)",
    )
    parser.addini(
        "agentplug_disable",
        type="bool",
        default=False,
        help=f"agentplug: do not collect scenario files (also: {DISABLE_ENV}=1)",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "agentplug_config(config=None, **keys): agentplug operator config for the "
        "agentplug_host fixture, merged (deeply) over the agentplug_config fixture",
    )
    config.addinivalue_line(
        "markers",
        "agentplug_plugin_config(plugin_id, config): shortcut for "
        "agentplug_config({'plugins': {'entries': {plugin_id: {'config': config}}}})",
    )
    config.addinivalue_line(
        "markers",
        "agentplug_entry_points(*names): let agentplug_host load installed plugins: "
        "all of them (config filters apply) or only the named entry points",
    )
    from agentplug.testing import fixtures  # the fixtures, as a plugin of their own

    if not config.pluginmanager.is_registered(fixtures):
        config.pluginmanager.register(fixtures, fixtures.__name__)


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> ScenarioFile | None:
    config = parent.config
    globs: list[str] = config.getini("agentplug_scenarios") or list(DEFAULT_SCENARIO_GLOBS)
    if not any(file_path.match(pattern) for pattern in globs):
        return None
    if scenarios_disabled(config):
        return None
    from agentplug.testing.scenario_items import ScenarioFile

    return ScenarioFile.from_parent(parent, path=file_path)


def scenarios_disabled(config: pytest.Config) -> bool:
    """True when ``AGENTPLUG_PYTEST_DISABLE`` or the ini option ``agentplug_disable`` is set."""
    if os.environ.get(DISABLE_ENV, "").strip().lower() in _TRUE:
        return True
    return bool(config.getini("agentplug_disable"))
