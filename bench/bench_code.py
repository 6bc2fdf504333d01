"""Cold vs warm latency of the ``code`` handler sandbox (Python and JavaScript).

Run as a script (``python bench/bench_code.py [n]``) or import ``run(n)``.

* cold: a new :class:`CodeSandbox` and its first run (spawns and hardens a worker);
* warm: later runs, each taking an already-hardened worker from the pool (the pool is
  refilled in the background; the benchmark waits for the refill between runs, so this
  measures the latency a request sees when the pool keeps up);
* burst: back-to-back runs without waiting, i.e. when requests outpace the refill.

Every run still gets a fresh process; nothing is shared between runs.
"""

from __future__ import annotations

import asyncio
import importlib.util
import statistics
import sys
import time

from agentplug.sandbox import CodeSandbox, Language

_CODE: dict[Language, str] = {
    "python": "return 'ok ' + params['x']",
    "javascript": "return 'ok ' + params.x;",
}


def _stats(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return {
        "median_ms": round(statistics.median(ordered), 2),
        "p95_ms": round(p95, 2),
        "min_ms": round(ordered[0], 2),
    }


async def _measure(language: Language, n: int) -> dict[str, dict[str, float]]:
    code = _CODE[language]
    cold: list[float] = []
    for _ in range(max(1, min(5, n // 6))):
        async with CodeSandbox(pool_size=1) as box:
            started = time.perf_counter()
            result = await box.run(code, {"x": "1"}, language=language, timeout_s=30)
            cold.append((time.perf_counter() - started) * 1000)
            assert result.ok, result.error
    warm: list[float] = []
    burst: list[float] = []
    async with CodeSandbox(pool_size=1) as box:
        await box.prewarm(language, wait=True)
        for _ in range(n):
            await box.prewarm(language, wait=True)
            started = time.perf_counter()
            result = await box.run(code, {"x": "1"}, language=language, timeout_s=30)
            warm.append((time.perf_counter() - started) * 1000)
            assert result.ok, result.error
        await box.prewarm(language, wait=True)
        for _ in range(max(3, n // 3)):
            started = time.perf_counter()
            result = await box.run(code, {"x": "1"}, language=language, timeout_s=30)
            burst.append((time.perf_counter() - started) * 1000)
            assert result.ok, result.error
    return {"cold": _stats(cold), "warm": _stats(warm), "burst": _stats(burst)}


def run(n: int = 30) -> dict[str, dict[str, dict[str, float]]]:
    """Measure cold/warm/burst latency per language; print a table; return the numbers."""
    languages: list[Language] = ["python"]
    if importlib.util.find_spec("py_mini_racer") is not None:
        languages.append("javascript")
    results: dict[str, dict[str, dict[str, float]]] = {
        lang: asyncio.run(_measure(lang, n)) for lang in languages
    }
    print(f"{'language':<11} {'mode':<6} {'median ms':>10} {'p95 ms':>10} {'min ms':>10}")
    for lang, modes in results.items():
        for mode, s in modes.items():
            print(
                f"{lang:<11} {mode:<6} {s['median_ms']:>10.2f} {s['p95_ms']:>10.2f} "
                f"{s['min_ms']:>10.2f}"
            )
    return results


if __name__ == "__main__":
    run(int(sys.argv[1]) if len(sys.argv) > 1 else 30)
