"""Latency cost of the SSRF-guarded ``http`` action handler versus plain httpx.

Runs one local HTTP server on 127.0.0.1 and, in the same process and run, times ``n`` GETs
for each of:

* ``raw_shared``: one ``httpx.AsyncClient`` reused for every request (keep-alive);
* ``raw_fresh``: a new ``httpx.AsyncClient`` per request (a new connection each time; one SSL
  context is shared so the row does not time CA-bundle loading);
* ``handler``: ``run_http_handler`` on the same URL with the host allowlisted (templating,
  URL pre-check, resolve + classify + pinned connect, bounded streaming read; it opens a new
  guarded client, hence a new connection, per call).

The headline ratio compares ``handler`` with ``raw_fresh``, since both open a connection per
request. Usage: ``python bench/bench_http.py [n]``; importable as ``run(n) -> dict``.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
from agentplug.actions.http_handler import HttpHandlerDef, run_http_handler
from agentplug.security.ssrf import SSRFPolicy

_WARMUP = 20


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, so the shared-client row reuses its connection
    # Headers and body leave in two writes; with Nagle on, the second waits for the client's
    # delayed ACK (~40 ms) on a kept-alive connection and the benchmark would time that instead.
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: object) -> None:
        return

    def do_GET(self) -> None:
        payload = b'{"ok": true}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


async def _time(n: int, call: Callable[[], Awaitable[object]]) -> list[float]:
    """Milliseconds per call, after a warm-up that is not recorded."""
    for _ in range(_WARMUP):
        await call()
    samples: list[float] = []
    for _ in range(n):
        start = time.perf_counter()
        await call()
        samples.append((time.perf_counter() - start) * 1000.0)
    return samples


async def _measure(n: int, port: int) -> dict[str, list[float]]:
    url = f"http://127.0.0.1:{port}/weather?city=London"
    policy = SSRFPolicy(allow_hosts=[f"127.0.0.1:{port}"])
    defn = HttpHandlerDef(method="GET", url=f"http://127.0.0.1:{port}/weather?city={{{{city}}}}")

    # Building a client loads the CA bundle (~20 ms); the guarded client does not need one for
    # http://, so the per-request raw client reuses one SSL context to keep the rows comparable.
    ssl_context = httpx.create_ssl_context()

    async with httpx.AsyncClient(verify=ssl_context) as shared:

        async def raw_shared() -> None:
            (await shared.get(url)).raise_for_status()

        async def raw_fresh() -> None:
            async with httpx.AsyncClient(verify=ssl_context) as client:
                (await client.get(url)).raise_for_status()

        async def handler() -> None:
            out = await run_http_handler(defn, {"city": "London"}, {"city"}, policy=policy)
            if not out.ok:
                raise RuntimeError(f"benchmark request failed: {out.output}")

        return {
            "raw_shared": await _time(n, raw_shared),
            "raw_fresh": await _time(n, raw_fresh),
            "handler": await _time(n, handler),
        }


def run(n: int = 300) -> dict[str, float]:
    """Run the benchmark with ``n`` timed requests per variant; print a table, return numbers.

    Keys: ``n`` and, per variant (``raw_shared``, ``raw_fresh``, ``handler``),
    ``<variant>_mean_ms`` / ``<variant>_p50_ms``, plus ``ratio_mean`` and ``ratio_p50``
    (handler / raw_fresh) and ``ratio_vs_shared_p50`` (handler / raw_shared).
    """
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        samples = asyncio.run(_measure(n, server.server_address[1]))
    finally:
        server.shutdown()
        server.server_close()

    result: dict[str, float] = {"n": float(n)}
    for name, values in samples.items():
        result[f"{name}_mean_ms"] = statistics.fmean(values)
        result[f"{name}_p50_ms"] = statistics.median(values)
    result["ratio_mean"] = result["handler_mean_ms"] / result["raw_fresh_mean_ms"]
    result["ratio_p50"] = result["handler_p50_ms"] / result["raw_fresh_p50_ms"]
    result["ratio_vs_shared_p50"] = result["handler_p50_ms"] / result["raw_shared_p50_ms"]

    print(f"http handler benchmark: {n} GETs per variant against 127.0.0.1")
    print(f"{'variant':<34}{'mean ms':>10}{'p50 ms':>10}")
    labels = {
        "raw_shared": "raw httpx, shared client",
        "raw_fresh": "raw httpx, client per request",
        "handler": "run_http_handler (SSRF-guarded)",
    }
    for name, label in labels.items():
        print(f"{label:<34}{result[name + '_mean_ms']:>10.3f}{result[name + '_p50_ms']:>10.3f}")
    print(
        f"ratio handler / raw client-per-request: mean {result['ratio_mean']:.2f}x, "
        f"p50 {result['ratio_p50']:.2f}x (vs shared client p50 "
        f"{result['ratio_vs_shared_p50']:.2f}x)"
    )
    return result


if __name__ == "__main__":
    run(int(sys.argv[1]) if len(sys.argv) > 1 else 300)
