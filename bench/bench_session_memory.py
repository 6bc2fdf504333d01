"""What an idle session costs a gateway: 10 000 sessions with 20-message transcripts.

For each store (``memory`` and ``sqlite``, a file in a temp dir), in a fresh process: a
gateway running the turn of :mod:`workload` (model calls without the 50 ms wait) gets
10 000 sessions (``--quick``: 200). Each session is seeded with the 16 messages of four
earlier turns (its own text) and then runs one real turn through
``gateway.runner.handle_inbound``, so it has a 20-message transcript and has been through
everything a turn leaves behind. Then it is idle. Measured:

* bytes per session: what the process holds once every session is idle, over what it held
  before the first one (``tracemalloc``: every Python allocation, garbage collected
  first), divided by the sessions, minus the transcript text itself (the characters of
  the messages' ``content``); and the growth of the resident set per session (``VmRSS``,
  which also sees SQLite's page cache and allocator slack);
* reload: ``gateway.runner.transcripts.load`` of 1 000 random idle sessions (what a
  turn does first), p50 and p99.

Target (issue 30): under 64 KiB per session in memory, the text not counted.

Usage: ``python bench/bench_session_memory.py [--quick] [--sessions N]``; importable as
``run(quick=False)``.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import random
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import workload  # noqa: E402

TARGET_BYTES = 64 * 1024
SEEDED_TURNS = 4
RELOADS = 1000
STORES = ("memory", "sqlite")


def _seed(session: str) -> list[dict[str, Any]]:
    """The 16 messages of four earlier turns of ``session`` (as the runner writes them)."""
    messages: list[dict[str, Any]] = []
    for k in range(SEEDED_TURNS):
        call = {"id": f"c{k}", "type": "function", "function": {"name": "noop", "arguments": "{}"}}
        messages += [
            {"role": "user", "content": f"{session}: question {k} about the weather"},
            {"role": "assistant", "content": "", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"c{k}", "name": "noop", "content": "ok"},
            {"role": "assistant", "content": f"answer {k} for {session}: it is sunny"},
        ]
    return messages


def _text_chars(messages: list[dict[str, Any]]) -> int:
    return sum(len(str(m.get("content") or "")) for m in messages)


async def _measure(store_kind: str, sessions: int) -> dict[str, Any]:
    from agentplug.agent.transcript import SessionRecord
    from agentplug.store import open_store_url

    workload.MODEL_S = 0.0
    with tempfile.TemporaryDirectory(prefix="agentplug-sessions-") as folder:
        url = "memory:" if store_kind == "memory" else f"sqlite:///{folder}/state.sqlite3"
        store = open_store_url(url)
        gateway = workload.build_gateway(0, store=store)
        await gateway.start()
        runner = gateway.runner
        turn = workload.agentplug_turn(gateway)
        for i in range(20):  # warm-up: plans, caches, the store's statements
            await turn(f"warm-{i}")
        keys = [f"agent:main:web:user-{i:05d}" for i in range(sessions)]
        gc.collect()
        tracemalloc.start(1)
        traced0 = tracemalloc.get_traced_memory()[0]
        rss0 = workload.rss_mib()
        started = time.perf_counter()
        text = 0
        for key in keys:
            runner.transcripts.save(SessionRecord(key, messages=_seed(key)))
            await turn(key)
        build_s = time.perf_counter() - started
        gc.collect()
        traced = tracemalloc.get_traced_memory()[0] - traced0
        tracemalloc.stop()
        rss = (workload.rss_mib() - rss0) * 1024 * 1024
        lengths = []
        for key in random.Random(30).sample(keys, min(RELOADS, sessions)):
            clock = time.perf_counter()
            record = runner.transcripts.load(key)
            lengths.append(time.perf_counter() - clock)
            assert record is not None and len(record.messages) == 20, key
            text += _text_chars(record.messages)
        # The text of the sampled sessions stands for all of them (they are alike).
        text_per_session = text / min(RELOADS, sessions)
        await gateway.stop()
        store.close()
    per_session = traced / sessions
    return {
        "store": store_kind,
        "sessions": sessions,
        "messages_per_session": 20,
        "build_s": round(build_s, 2),
        "traced_bytes_per_session": round(per_session),
        "text_bytes_per_session": round(text_per_session),
        "bytes_per_session_without_text": round(per_session - text_per_session),
        "rss_bytes_per_session": round(rss / sessions),
        "reload_p50_us": round(workload.percentile(lengths, 50) * 1e6, 1),
        "reload_p99_us": round(workload.percentile(lengths, 99) * 1e6, 1),
        "load": workload.load_average(),
    }


def run(quick: bool = False, sessions: int | None = None) -> dict[str, Any]:
    """Both stores, each in a fresh process."""
    count = sessions or (200 if quick else 10_000)
    results: dict[str, Any] = {}
    for store_kind in STORES:
        proc = subprocess.run(
            [sys.executable, str(Path(__file__).resolve()), "--child", store_kind, str(count)],
            capture_output=True,
            text=True,
            timeout=1800,
        )
        if proc.returncode != 0:
            raise RuntimeError(f"{store_kind} failed: {proc.stderr.strip()[-800:]}")
        results[store_kind] = json.loads(proc.stdout.strip().splitlines()[-1])
    memory = results["memory"]["bytes_per_session_without_text"]
    return {
        "sessions": count,
        "stores": results,
        "target_bytes": TARGET_BYTES,
        "meets_target": memory < TARGET_BYTES,
    }


def format_table(result: dict[str, Any]) -> str:
    """One row per store."""
    head = (
        f"{'store':<8} {'bytes/session':>13} {'text':>6} {'w/o text':>9} {'RSS/session':>11} "
        f"{'reload p50 us':>13} {'p99 us':>8}"
    )
    lines = [
        f"idle sessions: {result['sessions']} sessions x 20 messages, each through one turn",
        head,
        "-" * len(head),
    ]
    for name, r in result["stores"].items():
        lines.append(
            f"{name:<8} {r['traced_bytes_per_session']:>13} {r['text_bytes_per_session']:>6} "
            f"{r['bytes_per_session_without_text']:>9} {r['rss_bytes_per_session']:>11} "
            f"{r['reload_p50_us']:>13.1f} {r['reload_p99_us']:>8.1f}"
        )
    verdict = "MET" if result["meets_target"] else "MISSED"
    lines.append(f"target: under {result['target_bytes']} bytes per session in memory {verdict}")
    return "\n".join(lines)


def _main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        print(json.dumps(asyncio.run(_measure(sys.argv[2], int(sys.argv[3])))))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--sessions", type=int)
    args = parser.parse_args()
    result = run(args.quick, args.sessions)
    print(format_table(result))
    print(json.dumps(result))


if __name__ == "__main__":
    _main()
