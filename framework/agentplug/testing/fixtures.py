"""The agentplug fixtures (``agentplug_config``, ``agentplug_host``, ``agentplug_load``,
``agentplug_dispatch``, ``agentplug_run``, ``agentplug_recorder``, ``agentplug_approvals``).

:mod:`agentplug.testing.pytest_plugin` registers this module as a pytest plugin in
``pytest_configure``; like it, it imports nothing from the agentplug runtime at import time.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Coroutine, Iterator
from typing import TYPE_CHECKING, Any, TypeVar, cast

import pytest

from agentplug.testing.approval_script import ApprovalScript
from agentplug.testing.fixture_config import config_mapping, config_with_markers
from agentplug.testing.fixture_state import AgentplugPytestWarning, state_for
from agentplug.testing.plugin_loader import PluginLoader
from agentplug.testing.recorder import Dispatcher, DispatchRecorder

T = TypeVar("T")

if TYPE_CHECKING:
    from agentplug.gateway import Gateway, PluginHost


@pytest.fixture
def agentplug_config(request: pytest.FixtureRequest) -> dict[str, Any]:
    """The operator config of ``agentplug_host`` (``{}`` plus ``agentplug_config`` markers)."""
    return config_with_markers({}, request.node)


@pytest.fixture
def agentplug_gateway(request: pytest.FixtureRequest, agentplug_config: Any) -> Gateway:
    """An isolated gateway: the config above, its state in memory unless the config names
    a state directory or URL, no installed plugin unless the test asks."""
    from agentplug.gateway import Gateway

    return Gateway(config_with_markers(config_mapping(agentplug_config), request.node))


@pytest.fixture
def agentplug_host(request: pytest.FixtureRequest, agentplug_gateway: Gateway) -> PluginHost:
    """The host of ``agentplug_gateway``: register plugins, dispatch hooks."""
    host = agentplug_gateway.host
    state = state_for(request, host)
    marker = request.node.get_closest_marker("agentplug_entry_points")
    if marker is not None:
        if marker.args:
            loader = PluginLoader(state)
            for name in marker.args:
                loader.entry_point(str(name))
        else:
            host.load_installed(use_cache=False)
            for error in host.load_errors:
                warnings.warn(
                    f"installed agentplug plugin failed to load: {error} "
                    "(see agentplug_host.load_errors)",
                    AgentplugPytestWarning,
                    stacklevel=1,
                )
    return host


@pytest.fixture
def agentplug_load(request: pytest.FixtureRequest, agentplug_host: PluginHost) -> PluginLoader:
    """``agentplug_load(obj | "pkg.mod[:attr]" | "entry-point-name", plugin_id=None)``."""
    return PluginLoader(state_for(request, agentplug_host))


@pytest.fixture
def agentplug_dispatch(request: pytest.FixtureRequest, agentplug_host: PluginHost) -> Dispatcher:
    """``agentplug_dispatch(hook, event=None, ctx=None)`` for plain (non-async) tests."""
    return Dispatcher(state_for(request, agentplug_host))


@pytest.fixture
def agentplug_run(
    request: pytest.FixtureRequest, agentplug_host: PluginHost
) -> Callable[[Coroutine[Any, Any, T]], T]:
    """``agentplug_run(coro)``: run a coroutine on the test's event loop (the one the other
    sync helpers use), so handlers that outlive their budget are awaited at teardown
    instead of being cancelled by a second ``asyncio.run`` loop."""
    state = state_for(request, agentplug_host)

    def run(coro: Coroutine[Any, Any, T]) -> T:
        return cast("T", state.run(coro))

    return run


@pytest.fixture
def agentplug_recorder(agentplug_host: PluginHost) -> Iterator[DispatchRecorder]:
    """Records every dispatch of ``agentplug_host`` during the test."""
    recorder = DispatchRecorder(agentplug_host)
    recorder.install()
    yield recorder
    recorder.uninstall()


@pytest.fixture
def agentplug_approvals(
    request: pytest.FixtureRequest, agentplug_host: PluginHost
) -> ApprovalScript:
    """A scriptable approval resolver with an ``ApprovalBroker`` (``.broker``)."""
    return ApprovalScript(state_for(request, agentplug_host))
