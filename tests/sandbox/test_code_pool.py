"""The warm pool of the code sandbox: configurable size, parallel refill, shared by a host.

A burst of code actions must not run at cold-start speed: the host's ``code`` actions share
one long-lived sandbox whose pool size is ``actions.code.poolSize``, and the pool refills
several workers at a time. Latency targets are measured in ``bench/bench_code.py``; these
tests check the mechanics (sizes, how many workers start at once, every run isolated).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from agentplug import ConfigError, PluginHost
from agentplug.actions.model import HandlerOptions, Message
from agentplug.sandbox import CodeSandbox

ACTION = {
    "id": "echo-code",
    "name": "ECHO_CODE",
    "description": "Echo a parameter from sandboxed Python",
    "parameters": [{"name": "x", "description": "any text", "required": True}],
    "handler": {"type": "code", "language": "python", "code": "return 'ok ' + params['x']"},
    "enabled": True,
    "createdAt": "2026-01-01T00:00:00Z",
    "updatedAt": "2026-01-01T00:00:00Z",
}


def test_pool_fills_to_its_configured_size() -> None:
    async def main() -> int:
        async with CodeSandbox(pool_size=3) as box:
            await box.prewarm("python", wait=True)
            return box.ready("python")

    assert asyncio.run(main()) == 3


def test_pool_refills_several_workers_at_once() -> None:
    async def main() -> tuple[int, int]:
        async with CodeSandbox(pool_size=4, parallel=4) as box:
            await box.prewarm("python", wait=True)
            return box.peak_parallel_starts, box.ready("python")

    peak, ready = asyncio.run(main())
    assert ready == 4
    assert peak >= 2


def test_pool_with_parallel_one_refills_one_at_a_time() -> None:
    async def main() -> int:
        async with CodeSandbox(pool_size=3, parallel=1) as box:
            await box.prewarm("python", wait=True)
            return box.peak_parallel_starts

    assert asyncio.run(main()) == 1


def test_parallel_refill_defaults_to_the_pool_size_up_to_four() -> None:
    assert CodeSandbox(pool_size=1).parallel == 1
    assert CodeSandbox(pool_size=3).parallel == 3
    assert CodeSandbox(pool_size=20).parallel == 4


def test_parallel_below_one_is_rejected() -> None:
    with pytest.raises(ValueError, match="parallel"):
        CodeSandbox(pool_size=2, parallel=0)


def test_a_burst_larger_than_the_pool_still_runs_every_run_in_its_own_worker() -> None:
    code = "return params['x']"

    async def main() -> list[Any]:
        async with CodeSandbox(pool_size=2, parallel=2) as box:
            await box.prewarm("python", wait=True)
            return list(await asyncio.gather(*(box.run(code, {"x": str(i)}) for i in range(6))))

    results = asyncio.run(main())
    assert [r.output for r in results] == [str(i) for i in range(6)]
    assert all(r.ok for r in results)


def _host(**code: Any) -> PluginHost:
    return PluginHost({"customActions": [ACTION], "actions": {"code": code}})


def test_host_code_actions_share_one_sandbox_with_the_configured_pool() -> None:
    host = _host(poolSize=3, parallel=2)

    async def main() -> tuple[Any, list[Any]]:
        assert await host.gateway.actions.load() == []
        action = host.gateway.actions.registry.get("ECHO_CODE")
        results = await asyncio.gather(
            *(
                action.handler(
                    host.gateway.actions,
                    Message(text="x"),
                    None,
                    HandlerOptions(parameters={"x": str(i)}),
                )
                for i in range(5)
            )
        )
        return host.gateway.actions.custom_services.sandbox, list(results)

    sandbox, results = asyncio.run(main())
    try:
        assert (sandbox.pool_size, sandbox.parallel) == (3, 2)
        assert [r.text for r in results] == [f"ok {i}" for i in range(5)]
    finally:
        host.gateway.actions.custom_services.close()


def test_code_pool_size_defaults_to_two() -> None:
    host = _host()
    asyncio.run(host.gateway.actions.load())
    try:
        assert host.gateway.actions.custom_services.sandbox.pool_size == 2
    finally:
        host.gateway.actions.custom_services.close()


@pytest.mark.parametrize(
    ("settings", "key"),
    [
        ({"poolSize": -1}, "actions.code.poolSize"),
        ({"poolSize": "many"}, "actions.code.poolSize"),
        ({"parallel": 0}, "actions.code.parallel"),
        ({"poolsize": 3}, "actions.code.poolsize"),
    ],
)
def test_bad_code_pool_settings_are_refused_naming_the_key(settings: Any, key: str) -> None:
    host = _host(**settings)

    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        asyncio.run(host.gateway.actions.load())
