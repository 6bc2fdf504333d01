"""Helpers for the HOOKS.md conformance suite: hosts, plugins in the three styles, runners.

Every conformance test runs twice (the autouse ``dispatch_path`` fixture): once as a host
dispatches, with the fast path for plans of plain ``def`` handlers, and once with the fast
path switched off (:data:`agentplug.core.fastpath.ENABLED`), so that every rule, reduction
and faulty handler is held to the same outcomes and statuses on both paths.
"""

from __future__ import annotations

import asyncio
import logging
import types
from collections.abc import Callable, Coroutine, Iterator, Mapping
from typing import Any, TypeVar

import pytest
from agentplug import HandlerStatus, PluginHost
from agentplug.core import fastpath
from agentplug.core.results import DispatchResult

T = TypeVar("T")

# Small budgets for handlers that are made to outlive them. Tests assert on statuses,
# never on elapsed time: a handler that "outlives" its budget waits on an event the test
# sets only after the dispatch returned, or sleeps far longer than the budget.
SHORT_MS = 50
LONG_MS = 600_000


@pytest.fixture(autouse=True, params=["fast", "general"])
def dispatch_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """``fast``: hosts dispatch as they do in production; ``general``: plans compiled in
    the test never take the fast path (``fastpath.ENABLED`` is read when a plan is built)."""
    monkeypatch.setattr(fastpath, "ENABLED", request.param == "fast")
    return str(request.param)


def make_host(entries: Mapping[str, Mapping[str, Any]] | None = None, **config: Any) -> PluginHost:
    """A host with ``plugins.entries`` = ``entries`` plus any other top-level config."""
    data: dict[str, Any] = dict(config)
    if entries is not None:
        data["plugins"] = {"entries": {k: dict(v) for k, v in entries.items()}}
    return PluginHost(data)


def run(coro: Coroutine[Any, Any, T]) -> T:
    """Run one coroutine on a fresh event loop (no pytest-asyncio)."""
    return asyncio.run(coro)


def dispatch(
    host: PluginHost, hook: str, event: Any = None, ctx: Any = None
) -> DispatchResult[Any]:
    """Blocking ``host.dispatch`` on a fresh loop (for handlers that never outlive it)."""
    return run(host.dispatch(hook, event, ctx))


def statuses(result: DispatchResult[Any]) -> list[tuple[str, HandlerStatus]]:
    """``(plugin_id, status)`` per handler, in execution order."""
    return [(r.plugin_id, r.status) for r in result.handlers]


def status_of(result: DispatchResult[Any], plugin_id: str) -> HandlerStatus:
    """The status of the only handler of ``plugin_id`` in ``result``."""
    found = [r.status for r in result.handlers if r.plugin_id == plugin_id]
    assert len(found) == 1, f"expected one handler of {plugin_id!r}, got {found}"
    return found[0]


class ApiPlugin:
    """A ``register(api)`` style plugin: ``ApiPlugin(("hook", fn, {"priority": 5}), ...)``."""

    def __init__(self, *registrations: tuple[str, Callable[..., Any], Mapping[str, Any]]) -> None:
        self.registrations = registrations
        self.api: Any = None

    def register(self, api: Any) -> None:
        self.api = api
        for hook, fn, options in self.registrations:
            api.on(hook, fn, **options)


def on(hook: str, fn: Callable[..., Any], **options: Any) -> ApiPlugin:
    """A one-handler ``register(api)`` plugin."""
    return ApiPlugin((hook, fn, options))


def module_plugin(name: str, **functions: Callable[..., Any]) -> types.ModuleType:
    """A module plugin whose attributes are ``functions`` (decorate them with @hookimpl)."""
    module = types.ModuleType(name)
    for attr, fn in functions.items():
        setattr(module, attr, fn)
    return module


@pytest.fixture
def agentplug_logs(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    """Every ``agentplug`` log record, down to DEBUG."""
    with caplog.at_level(logging.DEBUG, logger="agentplug"):
        yield caplog
