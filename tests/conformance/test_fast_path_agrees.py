"""The fast path and the general path give the same dispatch (HOOKS.md §2).

A plan of plain ``def`` handlers takes the fast path (:mod:`agentplug.core.fastpath`) until
one handler does more than return ``None`` in time; the general path
(:meth:`agentplug.core.runs.Run.chain`) runs every plan. Here the same plugins dispatch the
same event on two hosts, one compiled with the fast path and one without, for every kind
of hook and every way the handler in the middle can end; the outcome, each handler's
status and error, and what the last handler saw must be the same. (The rest of the
conformance suite runs once on each path too: see ``dispatch_path`` in ``conftest.py``.)
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any

import pytest
from agentplug import PluginHost
from agentplug.core import fastpath

from .conftest import SHORT_MS, dispatch, make_host, on

OVERRUN_S = 6 * SHORT_MS / 1000

# hook -> (event, a valid non-None result, an invalid result)
HOOKS: dict[str, tuple[dict[str, Any], dict[str, Any], dict[str, Any]]] = {
    "before_tool_call": (
        {"tool_name": "exec", "params": {"cmd": "ls"}},
        {"params": {"cmd": "pwd"}},
        {"block": "maybe?"},
    ),
    "message_sending": ({"content": "hi"}, {"content": "HI"}, {"content": ["not", "text"]}),
    "before_prompt_build": ({"prompt": "hi"}, {"append_context": "A"}, {"append_context": 3.5}),
    "inbound_claim": ({"content": "hi"}, {"handled": True}, {"handled": "perhaps"}),
    "message_received": ({"content": "hi"}, {"content": "ignored"}, {"content": ["ignored"]}),
}


async def _valid_later(result: dict[str, Any]) -> dict[str, Any]:
    return result


def _middle(behaviour: str, valid: dict[str, Any], invalid: dict[str, Any]) -> Callable[..., Any]:
    """A plain ``def`` handler (so the plan is one the fast path runs) ending as told."""

    def handler(event: Any, ctx: Any) -> Any:
        if behaviour == "returns a result":
            return valid
        if behaviour == "returns an invalid result":
            return invalid
        if behaviour == "raises":
            raise RuntimeError("middle failed")
        if behaviour == "returns a coroutine":
            return _valid_later(valid)
        if behaviour == "overruns its budget":
            time.sleep(OVERRUN_S)
        return None

    return handler


@pytest.fixture(autouse=True)
def dispatch_path() -> str:
    """This module takes both paths in each test itself (overrides ``conftest.py``'s)."""
    return "both"


def _dispatch_on(
    monkeypatch: pytest.MonkeyPatch, path: str, hook: str, behaviour: str
) -> tuple[Any, ...]:
    event, valid, invalid = HOOKS[hook]
    seen: list[tuple[str, dict[str, Any]]] = []

    def last(event: Any, ctx: Any) -> None:
        seen.append((event.context.plugin_id, event.model_dump()))

    monkeypatch.setattr(fastpath, "ENABLED", path == "fast")  # read as the plan is built
    host: PluginHost = make_host({"middle": {"hooks": {"timeout_ms": SHORT_MS}}})
    host.register(on(hook, lambda event, ctx: None, priority=3), "first")
    host.register(on(hook, _middle(behaviour, valid, invalid), priority=2), "middle")
    host.register(on(hook, last, priority=1), "last")
    assert all(h.inline_sync for h in host.plan(hook))  # a plan the fast path runs
    result = dispatch(host, hook, event)
    trace = [(r.plugin_id, r.hook, r.status, r.error) for r in result.handlers]
    # An overrun's error (in the trace, and the outcome of a fail-closed hook) quotes how
    # long the handler ran, which no two runs share.
    return _no_ms(result.outcome.model_dump()), _no_ms(trace), seen


def _no_ms(value: Any) -> str:
    return re.sub(r"\d+ ms", "N ms", repr(value))


@pytest.mark.parametrize(
    "behaviour",
    [
        "returns None",
        "returns a result",
        "returns an invalid result",
        "raises",
        "returns a coroutine",
        "overruns its budget",
    ],
)
@pytest.mark.parametrize("hook", list(HOOKS))
def test_the_fast_path_gives_the_outcome_and_statuses_of_the_general_path(
    hook: str, behaviour: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    fast = _dispatch_on(monkeypatch, "fast", hook, behaviour)
    general = _dispatch_on(monkeypatch, "general", hook, behaviour)
    assert fast == general
