"""What the fixtures of one test share: :class:`FixtureState` (the host and its event
loop), stashed on the test item by :func:`state_for`; and :class:`AgentplugPytestWarning`."""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    import asyncio

    from agentplug_hookspecs import HookDecl

    from agentplug.gateway import PluginHost

__all__ = ["AgentplugPytestWarning", "FixtureState", "state_for"]


class AgentplugPytestWarning(pytest.PytestWarning):
    """A test left something behind (unscripted approval, handler still running)."""


class FixtureState:
    """What the fixtures of one test share: the host and (lazily) an event loop."""

    def __init__(self, host: PluginHost) -> None:
        self.host = host
        self._runner: asyncio.Runner | None = None
        self._hookspecs_loaded = False

    def run(self, coro: Any) -> Any:
        """Run ``coro`` to completion on the test's own event loop (not inside one)."""
        import asyncio

        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            coro.close()
            raise RuntimeError(
                "agentplug's sync helpers cannot run inside a running event loop; in an "
                "async test use `await agentplug_host.dispatch(...)` (or the async helper)"
            )
        if self._runner is None:
            self._runner = asyncio.Runner()
        return self._runner.run(coro)

    def ensure_hookspecs(self) -> None:
        """Add installed third-party hookspecs (group ``agentplug.hookspecs``) once."""
        if self._hookspecs_loaded:
            return
        self._hookspecs_loaded = True
        from agentplug.core.loader import HOOKSPEC_GROUP, discover

        for spec in discover(HOOKSPEC_GROUP, use_cache=False):
            try:
                module = spec.load()
                if not any(d.name in self.host.declarations for d in _declarations_of(module)):
                    self.host.add_hookspecs(module)
            except Exception as exc:  # an unrelated broken package must not fail the test
                warnings.warn(
                    f"agentplug hookspecs {spec.name!r} ({spec.value}) could not be added: {exc!r}",
                    AgentplugPytestWarning,
                    stacklevel=1,
                )

    def close(self) -> None:
        """Close the host (and the loop), warning about handlers still running."""
        host = self.host
        leftover: list[str]
        if self._runner is not None:
            budget = host.config.runtime.shutdown_timeout_ms / 1000
            try:
                leftover = self._runner.run(host.aclose(budget))
            finally:
                self._runner.close()
                self._runner = None
        else:
            leftover = host.tracker.pending
        for label in leftover:
            warnings.warn(
                f"agentplug handler {label} was still running when the test ended "
                "(it outlived its timeout); in async tests `await agentplug_host.aclose()` "
                "to wait for it",
                AgentplugPytestWarning,
                stacklevel=1,
            )


def _declarations_of(module: object) -> list[HookDecl]:
    from agentplug_hookspecs import declarations_in

    return list(declarations_in(module))


_STATE_KEY = pytest.StashKey[FixtureState]()


def state_for(request: pytest.FixtureRequest, host: PluginHost) -> FixtureState:
    """The state of ``request``'s test for ``host`` (made, and closed at the end of the
    test, on first use)."""
    stash: pytest.Stash = request.node.stash
    state: FixtureState | None = stash.get(_STATE_KEY, None)
    if state is None or state.host is not host:
        state = FixtureState(host)
        stash[_STATE_KEY] = state
        request.addfinalizer(state.close)
    return state
