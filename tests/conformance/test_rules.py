"""HOOKS.md §2: the rules every hook follows, one test per rule.

Plugins are real: objects with ``@hookimpl`` methods, modules, and ``register(api)``
plugins, all registered through ``PluginHost.register``.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import types
import warnings
from typing import Any

import pytest
from agentplug import (
    ConfigError,
    HandlerStatus,
    HookSignatureError,
    PluginLoadError,
    UnknownHookError,
    hookimpl,
)
from agentplug_hookspecs import (
    Context,
    Event,
    FailurePolicy,
    FieldMerge,
    HookKind,
    builtin_declarations,
    declare,
    thaw,
)
from agentplug_hookspecs.agent import ContextResult
from agentplug_hookspecs.tools import ToolCallEvent
from pydantic import ValidationError

from .conftest import (
    LONG_MS,
    SHORT_MS,
    ApiPlugin,
    dispatch,
    make_host,
    module_plugin,
    on,
    run,
    status_of,
    statuses,
)

TOOL_EVENT = {"tool_name": "exec", "params": {"command": "ls"}}

# A minimal valid event for each hook used below with several hooks at once.
EVENTS: dict[str, dict[str, Any]] = {
    "before_tool_call": TOOL_EVENT,
    "message_sending": {"content": "hello"},
    "before_prompt_build": {"prompt": "hi"},
    "inbound_claim": {"content": "hi"},
    "before_install": {"name": "pkg"},
    "before_agent_run": {"prompt": "hi"},
    "before_agent_finalize": {"reply": "done"},
    "reply_payload_sending": {"payload": {"text": "hi"}},
    "resolve_exec_env": {},
    "before_model_resolve": {"prompt": "hi"},
    "before_agent_reply": {"prompt": "hi"},
    "llm_input": {"prompt": "hi"},
    "llm_output": {},
    "agent_end": {},
    "agent_turn_prepare": {"prompt": "hi"},
    "before_agent_start": {"prompt": "hi"},
    "heartbeat_prompt_contribution": {"prompt": "hi"},
    "message_received": {"content": "hi"},
    "gateway_stop": {},
    "after_tool_call": {"tool_name": "exec"},
}

CONVERSATION_HOOKS = (
    "before_model_resolve",
    "before_agent_reply",
    "llm_input",
    "llm_output",
    "before_agent_finalize",
    "agent_end",
    "before_agent_run",
)
PROMPT_HOOKS = (
    "agent_turn_prepare",
    "before_prompt_build",
    "before_agent_start",
    "heartbeat_prompt_contribution",
)


def _recorder(log: list[str], name: str, result: Any = None) -> Any:
    def handler(event: Any) -> Any:
        log.append(name)
        return result

    return handler


def _custom_hooks(**defaults: int | None) -> types.ModuleType:
    """A namespace declaring one merge hook per keyword, with that default timeout."""
    namespace = types.ModuleType("conformance_custom_hooks")
    for name, default in defaults.items():

        def spec(event: Event, ctx: Context) -> ContextResult | None:
            """A hook added by the conformance suite."""

        spec.__name__ = spec.__qualname__ = name
        declared = declare(
            kind=HookKind.MERGE,
            event=Event,
            ctx=Context,
            result=ContextResult,
            outcome=ContextResult,
            reduction=FieldMerge(concat=("prepend_context",)),
            group="Conformance",
            default_timeout_ms=default,
        )(spec)
        setattr(namespace, name, declared)
    return namespace


# -- 1. Order ------------------------------------------------------------------------


def test_order_descending_priority() -> None:
    host = make_host()
    log: list[str] = []

    class Low:
        @hookimpl(priority=-5)
        def before_tool_call(self, event: Any) -> None:
            log.append("low")

    @hookimpl(priority=100)
    def before_tool_call(event: Any) -> None:
        log.append("high")

    host.register(Low(), "low")
    host.register(module_plugin("high_mod", before_tool_call=before_tool_call), "high")
    host.register(on("before_tool_call", _recorder(log, "mid"), priority=10), "mid")
    host.register(on("before_tool_call", _recorder(log, "zero")), "zero")

    result = dispatch(host, "before_tool_call", TOOL_EVENT)

    assert log == ["high", "mid", "zero", "low"]
    assert [r.priority for r in result.handlers] == [100, 10, 0, -5]


def test_order_equal_priority_keeps_registration_order() -> None:
    # pluggy alone would call the last registered first (LIFO); the runtime must not.
    host = make_host()
    log: list[str] = []
    for name in ("first", "second", "third"):
        host.register(on("before_prompt_build", _recorder(log, name), priority=7), name)
    host.register(
        ApiPlugin(
            ("before_prompt_build", _recorder(log, "fourth.a"), {"priority": 7}),
            ("before_prompt_build", _recorder(log, "fourth.b"), {"priority": 7}),
        ),
        "fourth",
    )

    dispatch(host, "before_prompt_build", {"prompt": "x"})

    assert log == ["first", "second", "third", "fourth.a", "fourth.b"]


def test_order_equal_priority_keeps_registration_order_for_observation_start() -> None:
    host = make_host()
    log: list[str] = []
    for name in ("a", "b", "c"):
        host.register(on("message_received", _recorder(log, name)), name)

    result = dispatch(host, "message_received", {"content": "x"})

    assert log == ["a", "b", "c"]
    assert [r.plugin_id for r in result.handlers] == ["a", "b", "c"]


# -- 2. Sequential vs parallel -------------------------------------------------------


def test_observation_handlers_run_concurrently() -> None:
    # The higher-priority handler can only finish once the lower one has started:
    # with sequential execution it would time out.
    host = make_host({"early": {"hooks": {"timeout_ms": 5_000}}})
    log: list[str] = []

    async def main() -> Any:
        other_started = asyncio.Event()

        async def early(event: Any) -> None:
            log.append("early:start")
            await other_started.wait()
            log.append("early:end")

        async def late(event: Any) -> None:
            log.append("late:start")
            other_started.set()

        host.register(on("message_received", early, priority=10), "early")
        host.register(on("message_received", late, priority=0), "late")
        return await host.dispatch("message_received", {"content": "x"})

    result = run(main())

    assert statuses(result) == [("early", HandlerStatus.OK), ("late", HandlerStatus.OK)]
    assert log == ["early:start", "late:start", "early:end"]


@pytest.mark.parametrize(
    "hook", ["before_tool_call", "message_sending", "before_prompt_build", "inbound_claim"]
)
def test_decision_handlers_run_sequentially(hook: str) -> None:
    host = make_host()
    log: list[str] = []

    async def first(event: Any) -> None:
        log.append("first:start")
        for _ in range(3):
            await asyncio.sleep(0)
        log.append("first:end")

    async def second(event: Any) -> None:
        log.append("second:start")

    host.register(on(hook, first, priority=1), "first")
    host.register(on(hook, second, priority=0), "second")

    dispatch(host, hook, EVENTS[hook])

    assert log == ["first:start", "first:end", "second:start"]


def test_fire_and_forget_observation_may_overlap_later_events() -> None:
    host = make_host()
    log: list[str] = []

    async def main() -> None:
        release = asyncio.Event()

        async def observer(event: Any) -> None:
            log.append("observed:start")
            await release.wait()
            log.append("observed:end")

        host.register(on("message_received", observer), "obs")
        host.register(on("before_tool_call", _recorder(log, "decided")), "dec")

        task = host.emit("message_received", {"content": "x"})
        await asyncio.sleep(0)
        await host.dispatch("before_tool_call", TOOL_EVENT)
        assert log == ["observed:start", "decided"]
        release.set()
        result = await task
        assert statuses(result) == [("obs", HandlerStatus.OK)]
        assert await host.aclose(5) == []

    run(main())
    assert log == ["observed:start", "decided", "observed:end"]


# -- 3. Timeouts ---------------------------------------------------------------------


def _blocking_plugin(state: dict[str, Any], hook: str = "before_tool_call", **options: Any) -> Any:
    """A handler of ``hook`` that waits for ``state['release']`` (set by the test)."""

    async def handler(event: Any) -> None:
        state["started"] = True
        try:
            await state["release"].wait()
        except asyncio.CancelledError:
            state["cancelled"] = True
            raise
        state["finished"] = True

    return on(hook, handler, **options)


def test_timeout_stops_waiting_without_cancelling() -> None:
    host = make_host()
    state: dict[str, Any] = {"started": False, "cancelled": False, "finished": False}
    after: list[str] = []

    async def main() -> Any:
        state["release"] = asyncio.Event()
        host.register(
            _blocking_plugin(state, "message_sending", priority=10, timeout_ms=SHORT_MS), "slow"
        )
        host.register(on("message_sending", _recorder(after, "next")), "next")
        result = await host.dispatch("message_sending", {"content": "hi"})
        # The runtime stopped waiting and went on, while the handler still runs.
        assert after == ["next"]
        assert state == {**state, "started": True, "finished": False, "cancelled": False}
        state["release"].set()
        await host.aclose(5)
        return result

    result = run(main())

    assert statuses(result) == [("slow", HandlerStatus.TIMEOUT), ("next", HandlerStatus.OK)]
    assert "timed out" in (result.handlers[0].error or "")
    assert (state["finished"], state["cancelled"]) == (True, False)


def test_timed_out_skip_handler_lets_the_chain_continue() -> None:
    host = make_host()
    state: dict[str, Any] = {}

    async def main() -> Any:
        release = asyncio.Event()

        async def slow(event: Any) -> dict[str, str]:
            await release.wait()
            return {"content": "too late"}

        host.register(on("message_sending", slow, priority=10, timeout_ms=SHORT_MS), "slow")
        host.register(on("message_sending", lambda event: {"content": "fast"}), "fast")
        result = await host.dispatch("message_sending", {"content": "orig"})
        state["pending"] = host.tracker.pending
        release.set()
        await host.aclose(5)
        return result

    result = run(main())

    assert statuses(result) == [("slow", HandlerStatus.TIMEOUT), ("fast", HandlerStatus.OK)]
    assert result.outcome.content == "fast"
    assert state["pending"] == ["slow:message_sending"]


def test_timed_out_handler_is_tracked_until_it_finishes() -> None:
    host = make_host()
    state: dict[str, Any] = {"finished": False}

    async def main() -> None:
        state["release"] = asyncio.Event()
        host.register(_blocking_plugin(state, timeout_ms=SHORT_MS), "slow")
        await host.dispatch("before_tool_call", TOOL_EVENT)
        assert host.tracker.pending == ["slow:before_tool_call"]
        state["release"].set()
        assert await host.aclose(5) == []
        assert host.tracker.pending == []

    run(main())
    assert state["finished"] is True


def test_shutdown_reports_abandoned_handlers_still_running() -> None:
    host = make_host()
    state: dict[str, Any] = {"finished": False}

    async def main() -> list[str]:
        state["release"] = asyncio.Event()
        host.register(_blocking_plugin(state, timeout_ms=SHORT_MS), "slow")
        await host.dispatch("before_tool_call", TOOL_EVENT)
        leftover = await host.aclose(0.01)
        state["release"].set()
        assert await host.aclose(5) == []
        return leftover

    assert run(main()) == ["slow:before_tool_call"]
    assert state["finished"] is True


def test_observation_timeout_stops_waiting_without_cancelling() -> None:
    host = make_host()
    state: dict[str, Any] = {"cancelled": False, "finished": False}

    async def main() -> Any:
        release = asyncio.Event()

        async def slow(event: Any) -> None:
            try:
                await release.wait()
            except asyncio.CancelledError:
                state["cancelled"] = True
                raise
            state["finished"] = True

        host.register(on("message_received", slow, timeout_ms=SHORT_MS), "slow")
        host.register(on("message_received", lambda event: None), "quick")
        result = await host.dispatch("message_received", {"content": "x"})
        assert host.tracker.pending == ["slow:message_received"]
        release.set()
        assert await host.aclose(5) == []
        return result

    result = run(main())

    assert statuses(result) == [("slow", HandlerStatus.TIMEOUT), ("quick", HandlerStatus.OK)]
    assert state == {"cancelled": False, "finished": True}


def test_blocking_sync_handler_in_a_thread_times_out_without_cancelling() -> None:
    host = make_host()
    release = threading.Event()
    finished = threading.Event()

    def blocking(event: Any) -> None:
        release.wait(30)
        finished.set()

    host.register(on("before_tool_call", blocking, timeout_ms=SHORT_MS, thread=True), "slow")

    async def main() -> Any:
        result = await host.dispatch("before_tool_call", TOOL_EVENT)
        assert host.tracker.pending == ["slow:before_tool_call"]
        release.set()
        assert await host.aclose(5) == []
        return result

    result = run(main())

    assert status_of(result, "slow") is HandlerStatus.TIMEOUT
    assert finished.is_set()


def _timeout_outcome(
    host: Any, hook: str = "before_tool_call", sleep_s: float = 0.25, **options: Any
) -> tuple[HandlerStatus, str]:
    """Register one handler sleeping ``sleep_s``; return its status and timeout source.

    A budget of SHORT_MS always fires before the handler's much longer sleep (both are
    timers of the same loop), so the status says which budget applied.
    """

    async def sleeper(event: Any) -> None:
        await asyncio.sleep(sleep_s)

    host.register(on(hook, sleeper, **options), "p")
    (handler,) = host.plan(hook)

    async def main() -> Any:
        result = await host.dispatch(hook, EVENTS.get(hook, {}))
        await host.aclose(5)
        return result

    return status_of(run(main()), "p"), handler.timeout_source


def test_timeout_precedence_per_hook_override_wins() -> None:
    short = make_host(
        {"p": {"hooks": {"timeouts": {"before_tool_call": SHORT_MS}, "timeout_ms": LONG_MS}}}
    )
    status, source = _timeout_outcome(short, timeout_ms=LONG_MS)
    assert status is HandlerStatus.TIMEOUT
    assert source == "plugins.entries.p.hooks.timeouts.before_tool_call"

    long = make_host(
        {"p": {"hooks": {"timeouts": {"before_tool_call": LONG_MS}, "timeout_ms": SHORT_MS}}}
    )
    status, _ = _timeout_outcome(long, timeout_ms=SHORT_MS)
    assert status is HandlerStatus.OK


def test_timeout_precedence_per_hook_override_only_applies_to_its_hook() -> None:
    host = make_host({"p": {"hooks": {"timeouts": {"message_sending": SHORT_MS}}}})
    status, source = _timeout_outcome(host)
    assert status is HandlerStatus.OK
    assert source == "hook default"


def test_timeout_precedence_plugin_timeout_ms_beats_author() -> None:
    short = make_host({"p": {"hooks": {"timeout_ms": SHORT_MS}}})
    status, source = _timeout_outcome(short, timeout_ms=LONG_MS)
    assert status is HandlerStatus.TIMEOUT
    assert source == "plugins.entries.p.hooks.timeout_ms"

    long = make_host({"p": {"hooks": {"timeoutMs": LONG_MS}}})  # the seed's camelCase
    status, _ = _timeout_outcome(long, timeout_ms=SHORT_MS)
    assert status is HandlerStatus.OK


def test_timeout_precedence_author_beats_hook_default() -> None:
    host = make_host()
    status, source = _timeout_outcome(host, timeout_ms=SHORT_MS)
    assert status is HandlerStatus.TIMEOUT
    assert source == "author timeout_ms"

    class Author:
        @hookimpl(timeout_ms=SHORT_MS)
        async def before_tool_call(self, event: Any) -> None:
            await asyncio.sleep(0.25)

    decorated = make_host()
    decorated.register(Author(), "author")
    assert status_of(dispatch(decorated, "before_tool_call", TOOL_EVENT), "author") is (
        HandlerStatus.TIMEOUT
    )


def test_timeout_precedence_hook_default_beats_runtime_default() -> None:
    host = make_host(runtime={"default_timeout_ms": SHORT_MS})
    host.add_hookspecs(_custom_hooks(conformance_short_default=LONG_MS))
    status, source = _timeout_outcome(host, "conformance_short_default")
    assert status is HandlerStatus.OK
    assert source == "hook default"

    short = make_host(runtime={"default_timeout_ms": LONG_MS})
    short.add_hookspecs(_custom_hooks(conformance_short_default=SHORT_MS))
    status, _ = _timeout_outcome(short, "conformance_short_default")
    assert status is HandlerStatus.TIMEOUT


def test_timeout_runtime_default_applies_when_hook_declares_none() -> None:
    host = make_host(runtime={"defaultTimeoutMs": SHORT_MS})
    host.add_hookspecs(_custom_hooks(conformance_no_default=None))
    status, source = _timeout_outcome(host, "conformance_no_default")
    assert status is HandlerStatus.TIMEOUT
    assert source == "runtime.default_timeout_ms"


def test_timeout_runtime_default_is_30000_ms() -> None:
    host = make_host()
    host.add_hookspecs(_custom_hooks(conformance_no_default=None))
    host.register(on("conformance_no_default", lambda: None), "p")
    (handler,) = host.plan("conformance_no_default")
    assert handler.timeout_s == 30.0


@pytest.mark.parametrize(
    ("hook", "seconds"),
    [
        ("before_model_resolve", 30),
        ("before_prompt_build", 15),
        ("before_agent_run", 15),
        ("before_agent_finalize", 15),
        ("before_tool_call", 15),
        ("resolve_exec_env", 15),
        ("message_sending", 15),
        ("reply_payload_sending", 15),
        ("channel_pairing_requested", 2),
        ("gateway_stop", 5),
        ("message_received", 30),
        ("inbound_claim", 30),
    ],
)
def test_timeout_hook_defaults_follow_the_catalogue(hook: str, seconds: int) -> None:
    host = make_host()
    host.register(on(hook, lambda: None), "p", bundled=True)
    (handler,) = host.plan(hook)
    assert handler.timeout_s == seconds
    assert handler.timeout_source == "hook default"


@pytest.mark.parametrize(
    ("path", "key"),
    [
        (
            ("plugins", "entries", "p", "hooks", "timeouts", "before_tool_call"),
            "plugins.entries.p.hooks.timeouts.before_tool_call",
        ),
        (("plugins", "entries", "p", "hooks", "timeout_ms"), "plugins.entries.p.hooks.timeout_ms"),
        (("plugins", "entries", "p", "hooks", "timeoutMs"), "plugins.entries.p.hooks.timeoutMs"),
        (("runtime", "default_timeout_ms"), "runtime.default_timeout_ms"),
    ],
)
@pytest.mark.parametrize("value", [600_001, 0, -1, 1.5, "100", True])
def test_config_timeout_above_600000_is_rejected_naming_the_key(
    path: tuple[str, ...], key: str, value: Any
) -> None:
    config: dict[str, Any] = {}
    node = config
    for part in path[:-1]:
        node = node.setdefault(part, {})
    node[path[-1]] = value

    with pytest.raises(ConfigError) as info:
        make_host(**config)

    assert key in str(info.value)
    assert [k for k, _ in info.value.issues] == [key]


def test_config_timeout_of_600000_is_accepted() -> None:
    host = make_host(
        {"p": {"hooks": {"timeout_ms": 600_000, "timeouts": {"before_tool_call": 600_000}}}},
        runtime={"default_timeout_ms": 600_000},
    )
    host.register(on("before_tool_call", lambda: None), "p")
    assert host.plan("before_tool_call")[0].timeout_s == 600.0


@pytest.mark.parametrize("value", [600_001, 0, -5, 2.5, True])
def test_author_timeout_out_of_range_is_rejected(value: Any) -> None:
    def before_tool_call(event: Any) -> None:
        pass

    with pytest.raises(ValueError, match="600000"):
        hookimpl(timeout_ms=value)(before_tool_call)

    host = make_host()
    with pytest.raises(PluginLoadError, match=r"'bad'.*600000"):
        host.register(on("before_tool_call", lambda: None, timeout_ms=value), "bad")
    assert host.plugins == []


# -- 4. Failure policy ---------------------------------------------------------------


def test_failure_policies_match_the_catalogue() -> None:
    decls = builtin_declarations()
    fail_closed = {n for n, d in decls.items() if d.failure is FailurePolicy.FAIL_CLOSED}
    assert fail_closed == {"before_tool_call", "before_agent_run", "before_install"}
    for name, decl in decls.items():
        if decl.kind is HookKind.OBSERVE:
            assert decl.failure is FailurePolicy.OBSERVE, name
        elif name not in fail_closed:
            assert decl.failure is FailurePolicy.SKIP, name


def _failing(mode: str) -> Any:
    """A handler failing by ``mode``: raise, time out or return a wrong shape."""
    if mode == "raise":

        def raising(event: Any) -> None:
            raise RuntimeError("boom")

        return raising
    if mode == "timeout":

        async def hanging(event: Any) -> None:
            await asyncio.sleep(0.25)

        return hanging

    def wrong(event: Any) -> Any:
        return {"no_such_field": True}

    return wrong


def _dispatch_and_drain(host: Any, hook: str, event: Any) -> Any:
    async def main() -> Any:
        result = await host.dispatch(hook, event)
        await host.aclose(5)
        return result

    return run(main())


@pytest.mark.parametrize("mode", ["raise", "timeout", "wrong_shape"])
def test_failure_policy_fail_closed_blocks_and_stops_the_chain(mode: str) -> None:
    host = make_host()
    ran: list[str] = []
    host.register(on("before_tool_call", _failing(mode), priority=5, timeout_ms=SHORT_MS), "bad")
    host.register(on("before_tool_call", _recorder(ran, "lower")), "lower")

    result = _dispatch_and_drain(host, "before_tool_call", TOOL_EVENT)

    expected = HandlerStatus.TIMEOUT if mode == "timeout" else HandlerStatus.ERROR
    assert statuses(result) == [("bad", expected), ("lower", HandlerStatus.SKIPPED)]
    assert ran == []
    assert result.outcome.blocked is True
    assert result.outcome.blocked_by == "bad"


@pytest.mark.parametrize("mode", ["raise", "timeout", "wrong_shape"])
def test_failure_policy_skip_ignores_the_failed_handler_and_keeps_the_others(mode: str) -> None:
    host = make_host()
    host.register(on("before_prompt_build", lambda: {"prepend_context": "a"}, priority=9), "a")
    host.register(on("before_prompt_build", _failing(mode), priority=5, timeout_ms=SHORT_MS), "bad")
    host.register(on("before_prompt_build", lambda: {"prepend_context": "c"}), "c")

    result = _dispatch_and_drain(host, "before_prompt_build", {"prompt": "x"})

    expected = HandlerStatus.TIMEOUT if mode == "timeout" else HandlerStatus.ERROR
    assert statuses(result) == [("a", HandlerStatus.OK), ("bad", expected), ("c", HandlerStatus.OK)]
    assert result.outcome.prepend_context == "a\n\nc"


@pytest.mark.parametrize("mode", ["raise", "timeout"])
def test_failure_policy_observe_logs_and_continues(
    mode: str, agentplug_logs: pytest.LogCaptureFixture
) -> None:
    host = make_host()
    ran: list[str] = []
    host.register(on("after_tool_call", _failing(mode), priority=5, timeout_ms=SHORT_MS), "bad")
    host.register(on("after_tool_call", _recorder(ran, "good")), "good")

    result = _dispatch_and_drain(host, "after_tool_call", {"tool_name": "exec"})

    expected = HandlerStatus.TIMEOUT if mode == "timeout" else HandlerStatus.ERROR
    assert statuses(result) == [("bad", expected), ("good", HandlerStatus.OK)]
    assert ran == ["good"]
    assert result.outcome.kind == "observe"
    assert any(
        "after_tool_call" in r.getMessage() and "bad" in r.getMessage()
        for r in agentplug_logs.records
        if r.levelno >= logging.WARNING
    )


@pytest.mark.parametrize(
    "returned",
    ["allow", 42, ["content"], {"contnet": "typo"}, {"content": 7}, {"cancel": "maybe"}],
)
def test_wrong_shape_result_is_a_failed_handler(returned: Any) -> None:
    host = make_host()
    host.register(on("message_sending", lambda: returned, priority=1), "bad")
    host.register(on("message_sending", lambda event: {"content": event.content + "!"}), "ok")

    result = dispatch(host, "message_sending", {"content": "hi"})

    assert statuses(result) == [("bad", HandlerStatus.ERROR), ("ok", HandlerStatus.OK)]
    assert "invalid result for message_sending" in (result.handlers[0].error or "")
    assert result.outcome.content == "hi!"
    assert result.outcome.cancelled is False


async def _cancels_itself(event: Any) -> None:
    raise asyncio.CancelledError


async def _awaits_a_cancelled_task(event: Any) -> None:
    victim = asyncio.get_running_loop().create_task(asyncio.sleep(30))
    await asyncio.sleep(0)
    victim.cancel()
    await victim


@pytest.mark.parametrize("handler", [_cancels_itself, _awaits_a_cancelled_task])
@pytest.mark.parametrize(
    ("hook", "event"),
    [
        ("before_tool_call", TOOL_EVENT),
        ("message_sending", {"content": "hi"}),
        ("message_received", {"content": "hi"}),
    ],
)
def test_handler_raising_cancelled_error_is_a_failed_handler(
    hook: str, event: dict[str, Any], handler: Any
) -> None:
    # A handler's own CancelledError is a failure like any other exception; it must not
    # escape the dispatch (which would look to the host as if *it* had been cancelled).
    host = make_host()
    host.register(on(hook, handler, priority=1), "cancelled")
    host.register(on(hook, lambda: None), "next")

    result = dispatch(host, hook, event)

    assert status_of(result, "cancelled") is HandlerStatus.ERROR
    if hook == "before_tool_call":
        assert result.outcome.blocked is True
        assert result.outcome.blocked_by == "cancelled"
    else:
        assert status_of(result, "next") is HandlerStatus.OK


@pytest.mark.parametrize(
    ("hook", "event"),
    [("before_tool_call", TOOL_EVENT), ("message_received", {"content": "hi"})],
)
def test_cancelling_the_dispatch_propagates_and_leaves_the_handler_running(
    hook: str, event: dict[str, Any]
) -> None:
    host = make_host()
    state: dict[str, Any] = {"cancelled": False, "finished": False}

    async def main() -> None:
        started, release = asyncio.Event(), asyncio.Event()

        async def handler(event: Any) -> None:
            started.set()
            try:
                await release.wait()
            except asyncio.CancelledError:
                state["cancelled"] = True
                raise
            state["finished"] = True

        host.register(on(hook, handler), "p")
        task = asyncio.get_running_loop().create_task(host.dispatch(hook, event))
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert host.tracker.pending == [f"p:{hook}"]
        release.set()
        assert await host.aclose(5) == []

    run(main())
    assert state == {"cancelled": False, "finished": True}


def test_failure_log_line_names_hook_and_plugin_without_secrets(
    agentplug_logs: pytest.LogCaptureFixture,
) -> None:
    secret = "sk-SECRET-canary-4711"
    host = make_host()

    def leaky(event: Any) -> None:
        raise ValueError(f"could not reach api with key {secret}\nsecond line")

    host.register(on("message_sending", leaky), "leaky")

    result = dispatch(host, "message_sending", {"content": "hi"})

    failures = [r for r in agentplug_logs.records if r.levelno >= logging.WARNING]
    assert failures
    for record in failures:
        text = record.getMessage()
        assert "message_sending" in text and "leaky" in text
        assert "\n" not in text
        assert secret not in text
    assert secret not in (result.handlers[0].error or "")


# -- 5. Per-plugin config ------------------------------------------------------------


def test_per_plugin_config_injected_without_mutation() -> None:
    host = make_host(
        {"alpha": {"config": {"token": "A", "nested": {"n": 1}}}, "beta": {"config": {"x": 2}}}
    )
    seen: dict[str, Any] = {}
    events: list[Any] = []

    class Alpha:
        @hookimpl(priority=2)
        def before_tool_call(self, event: Any) -> None:
            seen["alpha"] = event.context.plugin_config
            events.append(event)

    def beta(event: Any) -> None:
        seen["beta"] = event.context.plugin_config
        events.append(event)

    def gamma(event: Any) -> None:
        seen["gamma"] = event.context.plugin_config
        events.append(event)

    host.register(Alpha(), "alpha", bundled=False)
    host.register(on("before_tool_call", beta, priority=1), "beta")
    host.register(
        module_plugin("gamma", register=lambda api: api.on("before_tool_call", gamma)), "gamma"
    )
    event = ToolCallEvent(tool_name="exec", params={"command": "ls"})
    before = event.model_dump()

    dispatch(host, "before_tool_call", event)

    assert seen["alpha"] == {"token": "A", "nested": {"n": 1}}
    assert seen["beta"] == {"x": 2}
    assert seen["gamma"] == {}
    # One shared event object, never copied or mutated per handler.
    assert all(e is event for e in events)
    assert event.model_dump() == before
    assert event.context.plugin_config == {}


def test_per_plugin_config_is_seen_after_await_and_in_concurrent_handlers() -> None:
    host = make_host({"a": {"config": {"who": "a"}}, "b": {"config": {"who": "b"}}})
    seen: dict[str, list[str]] = {"a": [], "b": []}

    def make(name: str) -> Any:
        async def handler(event: Any) -> None:
            seen[name].append(event.context.plugin_config["who"])
            await asyncio.sleep(0)
            seen[name].append(event.context.plugin_config["who"])

        return handler

    for name in ("a", "b"):
        host.register(
            ApiPlugin(
                ("message_received", make(name), {}),
                ("message_sending", make(name), {}),
            ),
            name,
        )

    dispatch(host, "message_received", {"content": "x"})
    dispatch(host, "message_sending", {"content": "x"})

    assert seen == {"a": ["a"] * 4, "b": ["b"] * 4}


def test_per_plugin_config_is_read_only() -> None:
    host = make_host({"p": {"config": {"limit": 1, "items": [1]}}})
    errors: list[type[BaseException]] = []

    def handler(event: Any) -> None:
        for attempt in (
            lambda: event.context.plugin_config.__setitem__("limit", 99),
            lambda: event.context.plugin_config["items"].append(2),
        ):
            try:
                attempt()
            except Exception as exc:
                errors.append(type(exc))

    host.register(on("before_tool_call", handler), "p")
    dispatch(host, "before_tool_call", TOOL_EVENT)
    dispatch(host, "before_tool_call", TOOL_EVENT)

    assert errors == [TypeError] * 4
    assert host.config.entry("p").config == {"limit": 1, "items": [1]}


def test_plugin_config_available_through_api() -> None:
    host = make_host({"p": {"config": {"mode": "strict"}}})
    plugin = ApiPlugin()
    host.register(plugin, "p")
    assert plugin.api.plugin_config == {"mode": "strict"}


# -- 6. Isolation --------------------------------------------------------------------


def test_isolation_mutating_the_event_raises_and_nothing_leaks() -> None:
    host = make_host()
    failures: list[type[BaseException]] = []
    seen: list[dict[str, Any]] = []

    def vandal(event: Any) -> None:
        for attempt in (
            lambda: event.params.__setitem__("command", "rm -rf /"),
            lambda: event.params.update({"extra": 1}),
            lambda: event.params["argv"].append("--force"),
            lambda: setattr(event, "tool_name", "other"),
            lambda: event.derived_paths.append("/etc"),
        ):
            try:
                attempt()
            except (TypeError, ValidationError) as exc:
                failures.append(type(exc))

    def witness(event: Any) -> None:
        seen.append(event.model_dump())

    host.register(on("before_tool_call", vandal, priority=1), "vandal")
    host.register(on("before_tool_call", witness), "witness")
    payload = {
        "tool_name": "exec",
        "params": {"command": "ls", "argv": ["-l"]},
        "derived_paths": ["/tmp"],
    }

    result = dispatch(host, "before_tool_call", payload)

    assert len(failures) == 5
    assert seen[0]["tool_name"] == "exec"
    assert seen[0]["params"] == {"command": "ls", "argv": ["-l"]}
    assert seen[0]["derived_paths"] == ["/tmp"]
    assert result.outcome.params == {"command": "ls", "argv": ["-l"]}
    assert payload["params"] == {"command": "ls", "argv": ["-l"]}


def test_isolation_untyped_and_extra_event_fields_are_read_only() -> None:
    # Fields typed as plain lists/Any and extra host fields are shared with every
    # handler and the host just like the typed JSON fields.
    host = make_host()
    failures: list[str] = []
    seen: list[Any] = []

    def vandal(event: Any) -> None:
        for label, attempt in (
            ("files", lambda: event.files.append("evil.py")),
            ("builtin_scan", lambda: event.builtin_scan.findings.append({"x": 1})),
            ("extra", lambda: event.host_data["items"].append("evil")),
        ):
            try:
                attempt()
            except (TypeError, ValidationError):
                failures.append(label)

    def witness(event: Any) -> None:
        seen.append(
            (list(event.files), list(event.builtin_scan.findings), list(event.host_data["items"]))
        )

    host.register(on("before_install", vandal, priority=1), "vandal")
    host.register(on("before_install", witness), "witness")

    dispatch(
        host, "before_install", {"name": "pkg", "files": ["a.py"], "host_data": {"items": ["ok"]}}
    )

    assert failures == ["files", "builtin_scan", "extra"]
    assert seen == [(["a.py"], [], ["ok"])]


def test_isolation_ctx_is_read_only() -> None:
    host = make_host()
    failures: list[type[BaseException]] = []
    seen: list[Any] = []

    def vandal(event: Any, ctx: Any) -> None:
        for attempt in (
            lambda: setattr(ctx, "session_key", "other"),
            lambda: ctx.trace.__setitem__("id", "forged"),
            lambda: ctx.host_info.append("forged"),
        ):
            try:
                attempt()
            except (TypeError, ValidationError) as exc:
                failures.append(type(exc))

    def witness(event: Any, ctx: Any) -> None:
        seen.append((ctx.session_key, dict(ctx.trace), list(ctx.host_info)))

    host.register(on("before_tool_call", vandal, priority=1), "vandal")
    host.register(on("before_tool_call", witness), "witness")

    dispatch(
        host,
        "before_tool_call",
        TOOL_EVENT,
        {"session_key": "s1", "trace": {"id": "t1"}, "host_info": ["h"]},
    )

    assert len(failures) == 3
    assert seen == [("s1", {"id": "t1"}, ["h"])]


def test_isolation_returned_result_is_the_only_channel() -> None:
    host = make_host()
    seen: list[Any] = []
    host.register(on("before_tool_call", lambda: {"params": {"command": "ls -a"}}, priority=1), "w")
    host.register(on("before_tool_call", lambda event: seen.append(dict(event.params))), "r")

    result = dispatch(host, "before_tool_call", TOOL_EVENT)

    assert seen == [{"command": "ls -a"}]
    assert result.outcome.params == {"command": "ls -a"}
    # The outcome holds exactly what the handlers saw, read-only (what an approver
    # approved cannot drift); thaw() gives the host a mutable copy.
    with pytest.raises(TypeError):
        result.outcome.params["command"] = "changed"
    mutable = thaw(result.outcome.params)
    mutable["command"] = "changed"
    assert result.outcome.params == {"command": "ls -a"}


# -- 7. Conversation access ----------------------------------------------------------


def _gate_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "allow_conversation_access" in r.getMessage()]


@pytest.mark.parametrize("hook", CONVERSATION_HOOKS)
def test_conversation_gate_refuses_installed_plugin_without_opt_in(
    hook: str, agentplug_logs: pytest.LogCaptureFixture
) -> None:
    host = make_host()
    ran: list[str] = []
    record = host.register(on(hook, _recorder(ran, "installed")), "snoop", bundled=False)

    (message,) = _gate_warnings(agentplug_logs)
    assert "snoop" in message and hook in message
    assert "plugins.entries.snoop.hooks.allow_conversation_access" in message
    assert message in record.warnings

    result = dispatch(host, hook, EVENTS[hook])
    assert ran == []
    assert statuses(result) == [("snoop", HandlerStatus.BLOCKED_BY_GATE)]


@pytest.mark.parametrize("hook", CONVERSATION_HOOKS)
def test_conversation_gate_allows_installed_plugin_with_opt_in(
    hook: str, agentplug_logs: pytest.LogCaptureFixture
) -> None:
    host = make_host({"snoop": {"hooks": {"allowConversationAccess": True}}})
    ran: list[str] = []
    host.register(on(hook, _recorder(ran, "installed")), "snoop", bundled=False)

    result = dispatch(host, hook, EVENTS[hook])

    assert _gate_warnings(agentplug_logs) == []
    assert ran == ["installed"]
    assert statuses(result) == [("snoop", HandlerStatus.OK)]


@pytest.mark.parametrize("hook", CONVERSATION_HOOKS)
def test_conversation_gate_allows_bundled_plugin_by_default(hook: str) -> None:
    host = make_host()
    ran: list[str] = []
    host.register(on(hook, _recorder(ran, "bundled")), "core", bundled=True)

    result = dispatch(host, hook, EVENTS[hook])

    assert ran == ["bundled"]
    assert statuses(result) == [("core", HandlerStatus.OK)]


@pytest.mark.parametrize("hook", CONVERSATION_HOOKS)
def test_conversation_gate_explicit_false_refuses_bundled_plugin(
    hook: str, agentplug_logs: pytest.LogCaptureFixture
) -> None:
    host = make_host({"core": {"hooks": {"allow_conversation_access": False}}})
    ran: list[str] = []
    host.register(on(hook, _recorder(ran, "bundled")), "core", bundled=True)

    result = dispatch(host, hook, EVENTS[hook])

    assert ran == []
    assert statuses(result) == [("core", HandlerStatus.BLOCKED_BY_GATE)]
    assert any("core" in m and hook in m for m in _gate_warnings(agentplug_logs))


def test_conversation_gate_refused_hook_is_not_listed_as_registered() -> None:
    host = make_host()
    record = host.register(
        ApiPlugin(
            ("llm_input", lambda: None, {}),
            ("before_tool_call", lambda: None, {}),
        ),
        "snoop",
        bundled=False,
    )
    assert record.hooks == ["before_tool_call"]
    assert record.refused_hooks == ["llm_input"]


def test_conversation_gate_covers_exactly_the_raw_conversation_hooks() -> None:
    gated = {n for n, d in builtin_declarations().items() if d.conversation_gate}
    assert gated == set(CONVERSATION_HOOKS)


def test_conversation_gate_does_not_touch_other_hooks_of_the_same_plugin() -> None:
    host = make_host()
    ran: list[str] = []
    host.register(
        ApiPlugin(
            ("llm_input", _recorder(ran, "llm_input"), {}),
            ("before_tool_call", _recorder(ran, "before_tool_call"), {}),
        ),
        "mixed",
        bundled=False,
    )

    dispatch(host, "llm_input", {"prompt": "x"})
    dispatch(host, "before_tool_call", TOOL_EVENT)

    assert ran == ["before_tool_call"]


# -- 8. Prompt injection -------------------------------------------------------------


@pytest.mark.parametrize("hook", PROMPT_HOOKS)
def test_prompt_injection_gate_disables_prompt_mutating_hooks(
    hook: str, agentplug_logs: pytest.LogCaptureFixture
) -> None:
    host = make_host({"inject": {"hooks": {"allowPromptInjection": False}}})
    ran: list[str] = []

    def contribute(event: Any) -> dict[str, str]:
        ran.append("inject")
        return {"prepend_context": "INJECTED"}

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        host.register(on(hook, contribute, priority=5), "inject", bundled=True)
        host.register(on(hook, lambda: {"prepend_context": "kept"}), "other", bundled=True)

    result = dispatch(host, hook, EVENTS[hook])

    assert ran == []
    assert statuses(result) == [
        ("inject", HandlerStatus.BLOCKED_BY_GATE),
        ("other", HandlerStatus.OK),
    ]
    assert result.outcome.prepend_context == "kept"
    assert any(
        "inject" in r.getMessage() and "allow_prompt_injection" in r.getMessage()
        for r in agentplug_logs.records
    )


def test_prompt_injection_gate_leaves_other_hooks_running() -> None:
    host = make_host({"inject": {"hooks": {"allow_prompt_injection": False}}})
    host.register(on("message_sending", lambda: {"content": "rewritten"}), "inject")
    assert dispatch(host, "message_sending", {"content": "x"}).outcome.content == "rewritten"


def test_prompt_injection_gate_covers_exactly_the_prompt_hooks() -> None:
    gated = {n for n, d in builtin_declarations().items() if d.prompt_gate}
    assert gated == set(PROMPT_HOOKS)


# -- 9. Unknown hooks ----------------------------------------------------------------


def test_unknown_hook_refused_with_a_clear_message() -> None:
    host = make_host()

    class Typo:
        @hookimpl
        def before_tool_cal(self, event: Any) -> None:
            pass

    with pytest.raises(UnknownHookError) as info:
        host.register(Typo(), "typo")

    message = str(info.value)
    assert "'typo'" in message
    assert "unknown hook 'before_tool_cal'" in message
    assert "did you mean 'before_tool_call'" in message
    assert "optional" in message
    assert host.plugins == []
    assert host.plan("before_tool_call") == ()


def test_unknown_hook_refused_through_api_on() -> None:
    host = make_host()
    with pytest.raises(UnknownHookError, match=r"'typo'.*unknown hook 'mesage_sending'"):
        host.register(on("mesage_sending", lambda: None), "typo")
    assert host.plugins == []


def test_unknown_hook_refusal_leaves_nothing_half_registered() -> None:
    host = make_host()
    ran: list[str] = []

    class Half:
        @hookimpl
        def before_tool_call(self, event: Any) -> None:
            ran.append("half")

        @hookimpl
        def no_such_hook(self, event: Any) -> None:
            pass

    with pytest.raises(UnknownHookError):
        host.register(Half(), "half")
    dispatch(host, "before_tool_call", TOOL_EVENT)
    assert ran == []


def test_unknown_hook_marked_optional_is_accepted() -> None:
    host = make_host()

    class Future:
        @hookimpl(optional=True)
        def hook_from_another_package(self, event: Any) -> None:
            pass

        @hookimpl
        def before_tool_call(self, event: Any) -> None:
            pass

    record = host.register(Future(), "future")
    host.register(on("another_optional_hook", lambda: None, optional=True), "api_future")

    assert record.hooks == ["before_tool_call"]
    assert [p.plugin_id for p in host.plugins] == ["future", "api_future"]


def test_dispatching_an_unknown_hook_is_refused() -> None:
    host = make_host()
    with pytest.raises(LookupError, match="did you mean 'before_tool_call'"):
        dispatch(host, "before_tool_cal", TOOL_EVENT)


# -- 10. block: false / cancel: false ------------------------------------------------


@pytest.mark.parametrize(
    ("hook", "no_decision", "event"),
    [
        ("before_tool_call", {"block": False, "block_reason": "nah"}, TOOL_EVENT),
        ("before_install", {"block": False, "block_reason": "nah"}, {"name": "pkg"}),
        ("message_sending", {"cancel": False, "cancel_reason": "nah"}, {"content": "hi"}),
        ("reply_payload_sending", {"cancel": False}, {"payload": {"text": "hi"}}),
    ],
)
def test_block_false_and_cancel_false_are_no_decision(
    hook: str, no_decision: dict[str, Any], event: dict[str, Any]
) -> None:
    host = make_host()
    ran: list[str] = []
    host.register(on(hook, lambda: no_decision, priority=1), "undecided")
    host.register(on(hook, _recorder(ran, "lower")), "lower")

    result = dispatch(host, hook, event)

    assert ran == ["lower"]
    assert statuses(result) == [("undecided", HandlerStatus.OK), ("lower", HandlerStatus.OK)]
    flag = "blocked" if "block" in no_decision else "cancelled"
    assert getattr(result.outcome, flag) is False
    reason = "block_reason" if flag == "blocked" else "cancel_reason"
    assert getattr(result.outcome, reason) is None


def test_block_false_and_cancel_false_are_no_decision_on_sync_hooks() -> None:
    host = make_host()
    host.register(on("before_message_write", lambda: {"block": False}, priority=1), "undecided")
    host.register(on("before_message_write", lambda: {"message": {"text": "b"}}), "lower")

    result = host.call_sync("before_message_write", {"message": {"text": "a"}})

    assert result.outcome.blocked is False
    assert result.outcome.message == {"text": "b"}


@pytest.mark.parametrize("flag", ["false", "no", 0, "true", 1, "maybe"])
@pytest.mark.parametrize(
    ("hook", "key", "event"),
    [
        ("before_tool_call", "block", TOOL_EVENT),
        ("before_install", "block", {"name": "pkg"}),
        ("message_sending", "cancel", {"content": "hi"}),
        ("reply_payload_sending", "cancel", {"payload": {"text": "hi"}}),
        ("inbound_claim", "handled", {"content": "hi"}),
    ],
)
def test_decision_flags_must_be_booleans(
    hook: str, key: str, event: dict[str, Any], flag: Any
) -> None:
    # In the seed's TypeScript "false" is truthy; here a non-boolean flag is neither a
    # decision nor "no decision" but a wrong shape, handled by the hook's failure policy.
    host = make_host()
    host.register(on(hook, lambda: {key: flag}), "odd")

    result = dispatch(host, hook, event)

    assert status_of(result, "odd") is HandlerStatus.ERROR
    fail_closed = host.declarations[hook].failure is FailurePolicy.FAIL_CLOSED
    if key == "handled":
        assert result.outcome.handled is False
    else:
        flag_field = "blocked" if key == "block" else "cancelled"
        assert getattr(result.outcome, flag_field) is fail_closed


def test_block_false_never_unblocks() -> None:
    host = make_host()
    host.register(on("before_tool_call", lambda: {"block": True}, priority=2), "blocker")
    host.register(on("before_tool_call", lambda: {"block": False}, priority=1), "unblocker")

    result = dispatch(host, "before_tool_call", TOOL_EVENT)

    assert result.outcome.blocked is True
    assert result.outcome.blocked_by == "blocker"
    assert status_of(result, "unblocker") is HandlerStatus.SKIPPED


# -- Deprecations (HOOKS.md §4) ------------------------------------------------------


def test_deprecated_hook_warns_once_per_plugin(agentplug_logs: pytest.LogCaptureFixture) -> None:
    host = make_host()
    with pytest.warns(DeprecationWarning) as caught:
        first = host.register(
            ApiPlugin(
                ("before_agent_start", lambda: None, {}),
                ("before_agent_start", lambda: None, {"priority": 3}),
            ),
            "legacy",
        )
        second = host.register(on("before_agent_start", lambda: None), "legacy2")

    assert len([w for w in caught if "legacy'" in str(w.message)]) == 1
    assert len([w for w in caught if "legacy2'" in str(w.message)]) == 1
    for record in (first, second):
        (message,) = record.warnings
        assert "before_agent_start" in message
        assert "before_model_resolve + before_prompt_build" in message


@pytest.mark.parametrize(
    ("hook", "replacement"),
    [
        ("subagent_spawning", "subagent_spawned"),
        ("deactivate", "gateway_stop"),
    ],
)
def test_deprecated_hook_names_its_replacement(hook: str, replacement: str) -> None:
    host = make_host()
    with pytest.warns(DeprecationWarning, match=replacement):
        record = host.register(on(hook, lambda: None), "legacy")
    assert any(replacement in w for w in record.warnings)


def test_deactivate_runs_with_gateway_stop() -> None:
    host = make_host()
    ran: list[str] = []

    class Old:
        @hookimpl
        def deactivate(self, event: Any) -> None:
            ran.append("deactivate")

    with pytest.warns(DeprecationWarning, match="gateway_stop"):
        host.register(Old(), "old")
    host.register(on("gateway_stop", _recorder(ran, "gateway_stop")), "new")

    result = dispatch(host, "gateway_stop", {"reason": "shutdown"})

    assert sorted(ran) == ["deactivate", "gateway_stop"]
    assert {(r.plugin_id, r.hook, r.status) for r in result.handlers} == {
        ("old", "deactivate", HandlerStatus.OK),
        ("new", "gateway_stop", HandlerStatus.OK),
    }


# -- Sync hooks ----------------------------------------------------------------------


def test_sync_hooks_ignore_async_handlers(agentplug_logs: pytest.LogCaptureFixture) -> None:
    host = make_host()
    called: list[str] = []

    class AsyncObj:
        @hookimpl(priority=5)
        async def tool_result_persist(self, event: Any) -> dict[str, Any]:
            called.append("obj")
            return {"message": {"text": "from async"}}

    async def api_async(event: Any) -> dict[str, Any]:
        called.append("api")
        return {"message": {"text": "from async api"}}

    obj_record = host.register(AsyncObj(), "async_obj")
    api_record = host.register(on("tool_result_persist", api_async, priority=4), "async_api")
    host.register(on("tool_result_persist", lambda event: {"message": {"text": "sync"}}), "sync")

    result = host.call_sync("tool_result_persist", {"message": {"text": "orig"}})

    assert called == []
    assert statuses(result) == [
        ("async_obj", HandlerStatus.SKIPPED),
        ("async_api", HandlerStatus.SKIPPED),
        ("sync", HandlerStatus.OK),
    ]
    assert result.outcome.message == {"text": "sync"}
    for record in (obj_record, api_record):
        assert any("synchronous" in w and "tool_result_persist" in w for w in record.warnings)
    assert any("async_obj" in r.getMessage() for r in agentplug_logs.records)


def test_sync_hook_handler_returning_a_coroutine_is_a_failed_handler() -> None:
    host = make_host()

    async def later() -> dict[str, Any]:
        return {"message": {"text": "never"}}

    host.register(on("before_message_write", lambda: later()), "sneaky")

    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # "coroutine was never awaited"
        result = host.call_sync("before_message_write", {"message": {"text": "orig"}})

    assert status_of(result, "sneaky") is HandlerStatus.ERROR
    assert result.outcome.message == {"text": "orig"}


def test_call_sync_refuses_hooks_that_are_not_sync() -> None:
    host = make_host()
    with pytest.raises(TypeError, match="not sync"):
        host.call_sync("before_tool_call", TOOL_EVENT)


# -- Registration errors -------------------------------------------------------------


def test_bad_handler_signature_rejected_naming_the_plugin() -> None:
    host = make_host()

    class Bad:
        @hookimpl
        def before_tool_call(self, tool, context) -> None:  # type: ignore[no-untyped-def]
            pass

    with pytest.raises(HookSignatureError) as info:
        host.register(Bad(), "badsig")

    message = str(info.value)
    assert info.value.plugin_id == "badsig"
    assert "'badsig'" in message
    assert "before_tool_call" in message
    assert "event" in message and "ctx" in message
    assert host.plugins == []


def test_bad_handler_signature_rejected_for_module_plugins() -> None:
    @hookimpl
    def message_sending(event, ctx, extra):  # type: ignore[no-untyped-def]
        return None

    host = make_host()
    with pytest.raises(HookSignatureError, match="'badmod'"):
        host.register(module_plugin("badmod", message_sending=message_sending), "badmod")
    assert host.plugins == []


def test_bad_handler_signature_rejected_through_api_on() -> None:
    host = make_host()

    def three(event: Any, ctx: Any, extra: Any) -> None:
        pass

    with pytest.raises(PluginLoadError, match="'badapi'"):
        host.register(on("message_sending", three), "badapi")


def test_duplicate_plugin_id_is_refused() -> None:
    host = make_host()
    host.register(on("before_tool_call", lambda: None), "same")
    with pytest.raises(PluginLoadError, match="'same'"):
        host.register(on("before_tool_call", lambda: None), "same")
