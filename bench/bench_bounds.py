"""Memory peak of a turn that receives a 50 MB model response (``agent.limits``).

A local OpenAI-compatible server (in this process) answers a turn's model call with a
50 MB body. Each measurement runs in a fresh subprocess: it imports agentplug, runs one
small warm-up turn against the same server, reads its peak RSS (``ru_maxrss``: the
process baseline), runs the 50 MB turn and reads the peak again. Cases:

- ``refused (no length)``: default limits (16 MiB); the body has no content-length, so
  the provider reads up to the limit and then fails the call;
- ``refused (sized)``: the same with a content-length: refused before reading;
- ``accepted``: ``model_response_bytes`` raised to 64 MiB, so the 50 MB is read, parsed
  and the reply cut at ``reply_chars``;
- ``raw httpx`` (the baseline of the same run): what reading the body whole with
  ``httpx`` and ``response.json()`` costs, as the provider did before the limit.

Target (issue 25): the growth over the baseline stays under 3x the configured response
limit. Usage: ``python bench/bench_bounds.py [--quick]``; importable as ``run(quick)``.

Linux carries a process's peak RSS across ``exec`` (and a ``vfork``ed child starts from
its parent's peak), so a child spawned by this process, which holds the 50 MB body,
would report this process's peak. Each measurement therefore goes through a launcher
(``--launch URL LIMIT``), a fresh small interpreter that ``fork``s and ``exec``s the
measuring child (``--child URL LIMIT``): the child's peak starts at the launcher's
current RSS, far below the child's own baseline.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MIB = 1024 * 1024
BODY_CHARS = 50_000_000
TARGET_FACTOR = 3.0
DEFAULT_LIMIT = 16 * MIB
RAISED_LIMIT = 64 * MIB


def _completion(content: str) -> bytes:
    body = {"id": "b", "choices": [{"message": {"role": "assistant", "content": content}}]}
    return json.dumps(body).encode()


class _Server:
    """Answers ``warm`` with a short reply and anything else with the 50 MB body; the
    path ``/unsized/...`` leaves out the content-length."""

    def __init__(self) -> None:
        big = _completion("x" * BODY_CHARS)
        small = _completion("warm")

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("content-length") or 0))
                messages = (json.loads(raw or b"{}") or {}).get("messages") or [{}]
                warm = messages[-1].get("content") == "warm"
                data = small if warm else big
                self.send_response(200)
                self.send_header("content-type", "application/json")
                if warm or not self.path.startswith("/unsized/"):
                    self.send_header("content-length", str(len(data)))
                self.end_headers()
                try:
                    for start in range(0, len(data), MIB):
                        self.wfile.write(data[start : start + MIB])
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up at its limit

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def url(self, prefix: str) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}/{prefix}/v1"

    def __enter__(self) -> _Server:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def child(base_url: str, limit: int) -> dict[str, Any]:
    """One measurement in this process (``limit`` 0: the raw httpx baseline)."""
    import asyncio
    import resource

    import httpx
    from agentplug import PluginHost
    from agentplug.agent import AgentRunner

    def peak_kib() -> int:
        return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)  # KiB on Linux

    def turn(prompt: str) -> Any:
        config = {
            "model": "openai/m",
            "tools": {"actions": False},
            "limits": {"model_response_bytes": limit or DEFAULT_LIMIT},
            "providers": {"openai": {"base_url": base_url, "timeout_s": 120}},
        }
        return asyncio.run(
            AgentRunner(PluginHost(), config=config).run_turn(prompt, session_key=prompt)
        )

    warm = turn("warm")
    assert warm.reply == "warm", warm.error
    baseline = peak_kib()
    if limit:
        result = turn("big")
        outcome = {"status": result.status, "reply_chars": len(result.reply or "")}
        outcome["error"] = (result.error or "")[:120]
    else:
        data = httpx.post(f"{base_url}/chat/completions", json={}, timeout=120).json()
        outcome = {"status": "read", "reply_chars": len(data["choices"][0]["message"]["content"])}
    peak = peak_kib()
    return {"baseline_mib": baseline / 1024, "peak_mib": peak / 1024, **outcome}


CASES = (
    ("refused (no length)", "unsized", DEFAULT_LIMIT),
    ("refused (sized)", "sized", DEFAULT_LIMIT),
    ("accepted", "sized", RAISED_LIMIT),
    ("raw httpx", "sized", 0),
)


def _measure_once(url: str, limit: int) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, __file__, "--launch", url, str(limit)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"measurement subprocess failed: {proc.stderr.strip()[-500:]}")
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def run(quick: bool = False) -> dict[str, Any]:
    """Measure every case (the median growth of 1 run under ``quick``, else of 3)."""
    repeats = 1 if quick else 3
    rows: dict[str, Any] = {}
    with _Server() as server:
        for name, prefix, limit in CASES:
            samples = [_measure_once(server.url(prefix), limit) for _ in range(repeats)]
            samples.sort(key=lambda s: s["peak_mib"] - s["baseline_mib"])
            row = samples[len(samples) // 2]
            growth = row["peak_mib"] - row["baseline_mib"]
            row["growth_mib"] = round(growth, 1)
            row["limit_mib"] = limit / MIB if limit else None
            if limit:
                row["growth_vs_limit"] = round(growth / (limit / MIB), 2)
                row["meets_target"] = growth < TARGET_FACTOR * limit / MIB
            rows[name] = row
    raw = rows["raw httpx"]["growth_mib"]
    for row in rows.values():
        row["growth_vs_raw_httpx"] = round(row["growth_mib"] / raw, 2) if raw else None
    return {
        "body_bytes": len(_completion("x" * BODY_CHARS)),
        "target_factor": TARGET_FACTOR,
        "repeats": repeats,
        "cases": rows,
        "meets_target": all(r.get("meets_target", True) for r in rows.values()),
    }


def format_table(result: dict[str, Any]) -> str:
    """One line per case: baseline, peak, growth, growth per limit, verdict."""
    lines = [
        f"turn receiving a {result['body_bytes'] / 1e6:.0f} MB model response, peak RSS "
        f"(MiB; target: growth < {result['target_factor']:g}x the response limit):"
    ]
    for name, row in result["cases"].items():
        target = ""
        if "meets_target" in row:
            verdict = "MET" if row["meets_target"] else "MISSED"
            target = f"  limit {row['limit_mib']:g} MiB: {row['growth_vs_limit']:.2f}x {verdict}"
        lines.append(
            f"  {name:<20} baseline {row['baseline_mib']:7.1f}  peak {row['peak_mib']:7.1f}  "
            f"growth {row['growth_mib']:7.1f} ({row['growth_vs_raw_httpx']:.2f}x raw httpx)"
            f"  [{row['status']}]{target}"
        )
    return "\n".join(lines)


def launch(argv: list[str]) -> int:
    """Run this script with ``argv`` in a forked-then-exec'd process; its exit code."""
    pid = os.fork()
    if pid == 0:
        os.execv(sys.executable, [sys.executable, __file__, *argv])
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--launch":
        sys.exit(launch(["--child", *sys.argv[2:]]))
    elif len(sys.argv) == 4 and sys.argv[1] == "--child":
        print(json.dumps(child(sys.argv[2], int(sys.argv[3]))))
    else:
        outcome = run(quick="--quick" in sys.argv)
        print(format_table(outcome))
        print(json.dumps(outcome))
