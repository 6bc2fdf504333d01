"""AbortSignal / AbortController: the seed's abort primitives for asyncio code."""

from __future__ import annotations

import asyncio
import gc
import logging
import threading

import pytest
from agentplug.services.signals import AbortController, AbortError, AbortSignal, abortable_sleep


def test_a_new_signal_is_pending() -> None:
    controller = AbortController()
    assert controller.signal.aborted is False
    assert controller.signal.reason is None
    controller.signal.throw_if_aborted()  # no error


def test_abort_sets_aborted_and_keeps_the_first_reason() -> None:
    controller = AbortController()
    assert controller.abort("first") is True
    assert controller.abort("second") is False
    assert controller.signal.aborted is True
    assert controller.signal.reason == "first"


def test_abort_without_reason_uses_an_abort_error() -> None:
    controller = AbortController()
    controller.abort()
    assert isinstance(controller.signal.reason, AbortError)


def test_throw_if_aborted_raises_abort_error_with_the_reason() -> None:
    controller = AbortController()
    controller.abort("stop")
    with pytest.raises(AbortError) as info:
        controller.signal.throw_if_aborted()
    assert info.value.reason == "stop"


def test_throw_if_aborted_raises_an_exception_reason_itself() -> None:
    controller = AbortController()
    controller.abort(TimeoutError("too slow"))
    with pytest.raises(TimeoutError):
        controller.signal.throw_if_aborted()


def test_callbacks_run_once_on_abort() -> None:
    controller = AbortController()
    calls: list[object] = []
    controller.signal.add_callback(lambda s: calls.append(s.reason))
    controller.abort("x")
    controller.abort("y")
    assert calls == ["x"]


def test_a_callback_added_after_abort_runs_at_once() -> None:
    signal = AbortSignal.aborted_with("done")
    calls: list[object] = []
    signal.add_callback(lambda s: calls.append(s.reason))
    assert calls == ["done"]


def test_a_removed_callback_does_not_run() -> None:
    controller = AbortController()
    calls: list[object] = []
    remove = controller.signal.add_callback(lambda s: calls.append(1))
    remove()
    controller.abort()
    assert calls == []


def test_a_failing_callback_is_logged_and_the_others_still_run(
    caplog: pytest.LogCaptureFixture,
) -> None:
    controller = AbortController()
    calls: list[str] = []

    def broken(signal: AbortSignal) -> None:
        raise RuntimeError("secret detail")

    controller.signal.add_callback(broken)
    controller.signal.add_callback(lambda s: calls.append("ok"))
    with caplog.at_level(logging.WARNING, logger="agentplug.signals"):
        controller.abort()
    assert calls == ["ok"]
    assert "RuntimeError" in caplog.text
    assert "secret detail" not in caplog.text


def test_wait_returns_the_reason_when_aborted_later() -> None:
    async def main() -> object:
        controller = AbortController()
        asyncio.get_running_loop().call_later(0.01, controller.abort, "later")
        return await controller.signal.wait()

    assert asyncio.run(main()) == "later"


def test_wait_returns_at_once_when_already_aborted() -> None:
    async def main() -> object:
        return await AbortSignal.aborted_with("now").wait()

    assert asyncio.run(main()) == "now"


def test_abort_from_another_thread_wakes_the_waiter() -> None:
    async def main() -> object:
        controller = AbortController()
        threading.Timer(0.01, controller.abort, args=("from thread",)).start()
        return await asyncio.wait_for(controller.signal.wait(), timeout=10)

    assert asyncio.run(main()) == "from thread"


def test_any_aborts_with_the_first_source_reason() -> None:
    a, b = AbortController(), AbortController()
    combined = AbortSignal.any([a.signal, b.signal])
    assert combined.aborted is False
    b.abort("b went first")
    a.abort("a")
    assert combined.aborted is True
    assert combined.reason == "b went first"


def test_any_of_an_already_aborted_source_is_aborted() -> None:
    combined = AbortSignal.any([AbortController().signal, AbortSignal.aborted_with("early")])
    assert combined.aborted and combined.reason == "early"


def test_any_does_not_keep_dead_combined_signals_alive() -> None:
    source = AbortController()
    for _ in range(100):
        AbortSignal.any([source.signal])
    gc.collect()
    AbortSignal.any([source.signal])  # registering prunes dead links
    assert len(source.signal._callbacks) <= 2


def test_aborting_a_combined_signal_does_not_abort_its_sources() -> None:
    source = AbortController()
    combined = AbortSignal.any([source.signal])
    combined._abort("local")
    assert source.signal.aborted is False


def test_abortable_sleep_stops_early_on_abort() -> None:
    async def main() -> None:
        controller = AbortController()
        asyncio.get_running_loop().call_later(0.01, controller.abort, "wake up")
        with pytest.raises(AbortError):
            await asyncio.wait_for(abortable_sleep(3600, controller.signal), timeout=10)

    asyncio.run(main())


def test_abortable_sleep_returns_normally_without_abort() -> None:
    async def main() -> None:
        await abortable_sleep(0.001, AbortController().signal)

    asyncio.run(main())
