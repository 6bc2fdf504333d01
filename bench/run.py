"""Run every agentplug benchmark, print one table, write ``bench/results.json``.

``python bench/run.py`` (or ``make bench``) runs the dispatch, dict-input, start-up and
discovery benchmarks and, when present, ``bench/bench_http.py``, ``bench/bench_code.py``,
``bench/bench_services.py``, ``bench/bench_agent.py`` (the turn runner's overhead per
turn), ``bench/bench_store.py`` (SQLite and PostgreSQL state stores side by side, 1 and
8 writer processes), ``bench/bench_bounds.py`` (the memory peak of a turn receiving a
50 MB model response) and the capacity benchmarks (``bench_concurrency.py``: 1 to 1 000
concurrent sessions; ``bench_session_memory.py``: idle sessions; ``bench_turn_api.py``: the
control API's turn endpoint under 200 clients; ``bench_faults.py``: three gateways on one
PostgreSQL under faults); each imported guarded: a missing or failing optional benchmark
is recorded, not fatal. ``--quick`` is a short smoke run (small N, fewer repeats; numbers
are noisier); ``--only a,b`` runs those benchmarks alone and replaces only their entries in
the results file (each entry says when it was measured, ``measured_utc``). Exit status is
0 when the benchmarks ran, whether or not a target was met (the table and the JSON say
which); it is 1 only when one of the four core benchmarks itself crashed.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import inspect
import io
import json
import os
import platform
import sys
import time
import traceback
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from capacity_rows import capacity_rows  # noqa: E402

CORE = ("bench_dispatch", "bench_input", "bench_startup", "bench_discovery")
OPTIONAL = (
    "bench_http",
    "bench_code",
    "bench_services",
    "bench_agent",
    "bench_store",
    "bench_bounds",
    "bench_concurrency",
    "bench_session_memory",
    "bench_turn_api",
    "bench_faults",
)
CAPACITY = ("bench_concurrency", "bench_session_memory", "bench_turn_api", "bench_faults")
"""The capacity benchmarks (issue 30): each a table of its own and rows in the summary."""
QUICK_N = 40  # request count for an optional ``run(n=...)`` benchmark under --quick


def _call_run(module: Any, quick: bool) -> Any:
    """Call ``module.run`` with ``quick`` if it takes it, a small ``n`` if that is what it has."""
    run: Callable[..., Any] = module.run
    try:
        params = inspect.signature(run).parameters
    except (TypeError, ValueError):
        params = {}  # type: ignore[assignment]
    if "quick" in params:
        return run(quick=quick)
    if quick and "n" in params:
        return run(n=QUICK_N)
    return run()


def _run_one(name: str, quick: bool, *, optional: bool) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "status": "ok",
        "measured_utc": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    start = time.perf_counter()
    try:
        module = importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if optional and exc.name == name:
            return {"status": "absent"}
        entry.update(status="error", error=f"import failed: {exc!r}")
        return entry
    except Exception as exc:
        entry.update(status="error", error=f"import failed: {exc!r}")
        return entry
    if not callable(getattr(module, "run", None)):
        return {"status": "error", "error": f"{name}.py has no run()"}
    captured = io.StringIO()
    try:
        # Optional benchmarks print their own tables; keep them, after ours is assembled.
        with contextlib.redirect_stdout(captured):
            entry["result"] = _call_run(module, quick)
    except Exception as exc:
        entry.update(status="error", error=repr(exc), traceback=traceback.format_exc())
    entry["seconds"] = round(time.perf_counter() - start, 3)
    entry["output"] = captured.getvalue()
    formatter = getattr(module, "format_table", None)
    if entry["status"] == "ok" and callable(formatter):
        try:
            entry["table"] = formatter(entry["result"])
        except Exception as exc:
            entry["table"] = f"(format_table failed: {exc!r})"
    return entry


def _summary_rows(results: dict[str, dict[str, Any]]) -> list[tuple[str, str, str, str]]:
    """(benchmark, metric, value, target) rows for the headline table."""
    rows: list[tuple[str, str, str, str]] = []
    d = results.get("bench_dispatch", {})
    if d.get("status") == "ok":
        r = d["result"]
        for hook, key in (
            ("before_tool_call", "sequential"),
            ("message_sending", "message_sending"),
            ("message_received", "observe_noop"),
        ):
            for count, row in r[key].items():
                rows.append(
                    (
                        "dispatch",
                        f"{hook} x{count}: sync vs pluggy / async vs pluggy / async vs "
                        "pluggy+await",
                        f"{row['sync_vs_pluggy']:.2f}x / {row['async_vs_pluggy']:.2f}x / "
                        f"{row['async_vs_pluggy_await']:.2f}x",
                        "",
                    )
                )
            for t in r["targets"][hook]:
                rows.append(
                    (
                        "dispatch",
                        f"{hook} x{t['handlers']}: {t['ratio']}",
                        f"{t['value']:.2f}x",
                        f"<= {t['max']:.1f}x {'MET' if t['met'] else 'MISSED'}",
                    )
                )
        o = r["observe"]
        rows.append(
            (
                "dispatch",
                "after_tool_call 100 x sleep(10ms): agentplug vs gather",
                f"{o['agentplug_ms']:.2f} vs {o['gather_ms']:.2f} ms",
                f"< {o['target_ms']:.0f} ms {'MET' if o['meets_target'] else 'MISSED'}",
            )
        )
    i = results.get("bench_input", {})
    if i.get("status") == "ok":
        r = i["result"]
        for count, row in r["rows"].items():
            target = ""
            if count == "1":
                t = r["target"]
                target = f"<= {t['max_at_1']:.1f}x {'MET' if t['met'] else 'MISSED'}"
            rows.append(
                (
                    "input",
                    f"before_tool_call x{count}: dict input vs pre-built models",
                    f"{row['dict_us']:.2f} vs {row['model_us']:.2f} us: "
                    f"{row['dict_vs_model']:.2f}x",
                    target,
                )
            )
    s = results.get("bench_startup", {})
    if s.get("status") == "ok":
        r = s["result"]
        ms, ratio, t = r["wall_ms"], r["ratio_vs_pydantic"], r["targets"]
        for name, label, key in (
            ("agentplug", "import agentplug", "import"),
            ("agentplug_help", "agentplug --help", "help"),
        ):
            rows.append(
                (
                    "startup",
                    f"{label} vs import pydantic",
                    f"{ms[name]:.0f} vs {ms['pydantic']:.0f} ms: {ratio[name]:.2f}x",
                    f"<= {t[key + '_max']:.0f}x {'MET' if t[key + '_met'] else 'MISSED'}",
                )
            )
        mods = r["modules"]
        rows.append(
            (
                "startup",
                "modules loaded: agentplug / pluggy / pydantic",
                f"{mods['agentplug']} / {mods['pluggy']} / {mods['pydantic']}",
                "",
            )
        )
        heavy = r["heavy_modules_loaded_by_import_agentplug"]
        rows.append(
            (
                "startup",
                "heavy modules loaded by import agentplug",
                str(len(heavy)),
                f"0 {'MET' if not heavy else 'MISSED'}",
            )
        )
    b = results.get("bench_code", {})
    if b.get("status") == "ok" and isinstance(b.get("result"), dict):
        burst = b["result"].get("action_burst")
        if isinstance(burst, dict):
            t = burst["target"]
            rows.append(
                (
                    "code",
                    "20 concurrent Python code actions, after the first: p50 / p99",
                    f"{burst['p50_ms']:.2f} / {burst['p99_ms']:.2f} ms",
                    f"<= {t['p50_max_ms']:.0f} / {t['p99_max_ms']:.0f} ms "
                    f"{'MET' if t['met'] else 'MISSED'}",
                )
            )
    c = results.get("bench_discovery", {})
    if c.get("status") == "ok":
        r = c["result"]
        rows.append(
            (
                "discovery",
                f"fresh scan vs warm cache ({r['distributions']} dists)",
                f"{r['fresh_ms']:.2f} vs {r['warm_ms']:.3f} ms: {r['speedup']:.1f}x",
                f">= {r['target_speedup']:.0f}x {'MET' if r['meets_target'] else 'MISSED'}",
            )
        )
        rows.append(
            ("discovery", "cached result == fresh result", str(r["cache_equals_fresh"]), "True")
        )
    h = results.get("bench_http", {})
    if h.get("status") == "ok" and isinstance(h.get("result"), dict):
        r = h["result"]
        if "ratio_p50" in r:
            rows.append(
                (
                    "http",
                    "run_http_handler vs raw httpx (client per request), p50",
                    f"{r.get('handler_p50_ms', 0.0):.2f} vs {r.get('raw_fresh_p50_ms', 0.0):.2f}"
                    f" ms: {r['ratio_p50']:.2f}x",
                    "",
                )
            )
    a = results.get("bench_agent", {})
    if a.get("status") == "ok" and isinstance(a.get("result"), dict):
        r = a["result"]
        rows.append(
            (
                "agent",
                "turn with 10 plugins vs no plugins (scripted model, no-op tool)",
                f"{r['plugins_ms']:.3f} vs {r['bare_ms']:.3f} ms: +{r['added_ms']:.3f} ms "
                f"({r['ratio']:.2f}x)",
                f"<= {r['target_added_ms']:.1f} ms added "
                f"{'MET' if r['meets_target'] else 'MISSED'}",
            )
        )
        sub = r.get("subagent")
        if isinstance(sub, dict):
            rows.append(
                (
                    "agent",
                    "sub-agent turn vs the plain turn (no plugins / 10 plugins)",
                    f"{sub['subagent_bare_ms']:.3f} vs {sub['plain_bare_ms']:.3f} ms "
                    f"({sub['ratio_bare']:.2f}x) / {sub['subagent_plugins_ms']:.3f} vs "
                    f"{sub['plain_plugins_ms']:.3f} ms ({sub['ratio_plugins']:.2f}x)",
                    "",
                )
            )
        if "streamed_ms" in r:
            rows.append(
                (
                    "agent",
                    "streamed turn / 4 parallel tool calls vs the plain turn (10 plugins)",
                    f"{r['streamed_ms']:.3f} / {r['parallel4_ms']:.3f} vs "
                    f"{r['plugins_ms']:.3f} ms: {r['streamed_ratio']:.2f}x / "
                    f"{r['parallel4_ratio']:.2f}x",
                    "",
                )
            )
    rows += _store_rows(results.get("bench_store", {}))
    rows += _bounds_rows(results.get("bench_bounds", {}))
    rows += capacity_rows(results)
    for name, entry in results.items():
        if entry.get("status") == "error":
            error = str(entry.get("error", "?"))
            rows.append((name.removeprefix("bench_"), "ERROR", error[:100], ""))
        elif entry.get("status") == "absent":
            rows.append((name.removeprefix("bench_"), "not present", "-", ""))
        elif name not in (
            *CORE,
            "bench_http",
            "bench_code",
            "bench_agent",
            "bench_store",
            "bench_bounds",
            *CAPACITY,
        ):
            rows.append((name.removeprefix("bench_"), "ran", f"{entry['seconds']:.1f} s", ""))
    return rows


def _store_rows(entry: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    """SQLite vs PostgreSQL at the most writers: throughput and p99 per operation (no target)."""
    r = entry.get("result")
    if entry.get("status") != "ok" or not isinstance(r, dict):
        return []
    rows: list[tuple[str, str, str, str]] = []
    writers = str(max(r["writers"]))
    backends = {name: r[name] for name in ("sqlite", "postgres")}
    for name, backend in backends.items():
        if backend.get("status") != "ok":
            rows.append(
                ("store", f"{name} {backend.get('status')}", str(backend.get("reason")), "")
            )
    for op in r["operations"]:
        cells = []
        for backend in backends.values():
            if backend.get("status") == "ok":
                s = backend["results"][op][writers]
                cells.append(f"{s['ops_per_s']:.0f} ({s['p99_ms']:.1f})")
            else:
                cells.append("-")
        rows.append(
            (
                "store",
                f"{op} x{writers} writers: sqlite vs postgres, ops/s (p99 ms)",
                " vs ".join(cells),
                "",
            )
        )
    return rows


def _bounds_rows(entry: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    """Peak RSS growth of a turn receiving 50 MB, per case, against the response limit."""
    r = entry.get("result")
    if entry.get("status") != "ok" or not isinstance(r, dict):
        return []
    rows: list[tuple[str, str, str, str]] = []
    for name, case in r["cases"].items():
        target = ""
        if "meets_target" in case:
            target = (
                f"< {r['target_factor']:g}x {case['limit_mib']:g} MiB "
                f"{'MET' if case['meets_target'] else 'MISSED'}"
            )
        rows.append(
            (
                "bounds",
                f"50 MB response, {name}: peak RSS growth over baseline",
                f"+{case['growth_mib']:.1f} MiB over {case['baseline_mib']:.1f} "
                f"({case['growth_vs_raw_httpx']:.2f}x raw httpx)",
                target,
            )
        )
    return rows


def _load() -> list[float]:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return []


def _table(rows: list[tuple[str, str, str, str]]) -> str:
    header = ("bench", "metric", "value", "target")
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(4)]
    line = "  ".join("-" * w for w in widths)
    out = ["  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)), line]
    out += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    return "\n".join(out)


def kept_entries(path: Path, quick: bool) -> dict[str, Any]:
    """The entries of an earlier results file of the same kind (quick or not), each
    stamped with when it was measured; nothing when there is none to keep."""
    try:
        earlier = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(earlier, dict) or earlier.get("quick") != quick:
        return {}
    kept: dict[str, Any] = {}
    for name, entry in (earlier.get("benchmarks") or {}).items():
        if isinstance(entry, dict):
            kept[name] = {"measured_utc": earlier.get("started_utc")} | entry
    return kept


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="short smoke run (noisier)")
    parser.add_argument("--out", type=Path, default=HERE / "results.json", help="JSON output path")
    parser.add_argument(
        "--only",
        help="comma-separated benchmarks to run (e.g. bench_concurrency,bench_faults)",
    )
    args = parser.parse_args(argv)
    chosen = CORE + OPTIONAL
    if args.only:
        wanted = [n if n.startswith("bench_") else f"bench_{n}" for n in args.only.split(",")]
        unknown = [n for n in wanted if n not in chosen]
        if unknown:
            parser.error(f"--only: no benchmark {', '.join(unknown)}; known: {', '.join(chosen)}")
        chosen = tuple(n for n in chosen if n in wanted)

    started = datetime.now(UTC)
    results: dict[str, dict[str, Any]] = {}
    for name in chosen:
        print(f"running {name}{' (quick)' if args.quick else ''} ...", file=sys.stderr)
        results[name] = _run_one(name, args.quick, optional=name in OPTIONAL)

    for name, entry in results.items():
        if entry.get("table"):
            print(entry["table"], end="\n\n")
        elif entry.get("output"):
            print(f"[{name}]\n{entry['output'].rstrip()}", end="\n\n")
        if entry.get("status") == "error" and entry.get("traceback"):
            print(f"[{name}] failed:\n{entry['traceback']}", file=sys.stderr)
    print(_table(_summary_rows(results)))

    benchmarks = {
        name: {k: v for k, v in entry.items() if k not in ("table",)}
        for name, entry in results.items()
    }
    if args.only:
        benchmarks = kept_entries(args.out, args.quick) | benchmarks
    payload = {
        "started_utc": started.isoformat(timespec="seconds"),
        "quick": args.quick,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "load_average": _load(),
        "benchmarks": benchmarks,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(payload, indent=2, default=str) + "\n", encoding="utf-8")
    print(f"\nwrote {args.out}")
    return 1 if any(results.get(n, {}).get("status") == "error" for n in CORE) else 0


if __name__ == "__main__":
    sys.exit(main())
