"""The summary rows of the capacity benchmarks (``run.py`` prints them with the others).

One row per headline figure, each with its target from issue 30 where it has one.
"""

from __future__ import annotations

from typing import Any

Row = tuple[str, str, str, str]


def _ok(results: dict[str, dict[str, Any]], name: str) -> dict[str, Any] | None:
    entry = results.get(name, {})
    result = entry.get("result")
    if entry.get("status") != "ok" or not isinstance(result, dict):
        return None
    return result


def _verdict(met: bool | None) -> str:
    return {True: "MET", False: "MISSED", None: "n/a"}[met]


def capacity_rows(results: dict[str, dict[str, Any]]) -> list[Row]:
    """Rows for ``bench_concurrency``, ``bench_session_memory``, ``bench_turn_api`` and
    ``bench_faults`` (those that ran)."""
    rows: list[Row] = []
    c = _ok(results, "bench_concurrency")
    if c is not None:
        for shape, by_n in c["cells"].items():
            n = max(by_n, key=int)
            cells = by_n[n]
            line = " / ".join(
                f"{v} {row['turns_per_s']:.0f}/s {row['cpu_ms_per_turn']:.2f} ms "
                f"p99+{row['added_p99_ms']:.0f}"
                for v, row in cells.items()
            )
            rows.append(("sessions", f"{shape} N={n}: turns/s, CPU/turn, added p99 ms", line, ""))
        for t in c["targets"]:
            sign = "<=" if t["at_most"] else ">="
            value = "-" if t["value"] is None else f"{t['value']:.3f}"
            rows.append(
                ("sessions", t["name"], value, f"{sign} {t['limit']:g} {_verdict(t['met'])}")
            )
    m = _ok(results, "bench_session_memory")
    if m is not None:
        mem, lite = m["stores"]["memory"], m["stores"]["sqlite"]
        rows.append(
            (
                "sessions",
                f"{m['sessions']} idle sessions x 20 messages: bytes/session w/o text, "
                "memory / sqlite",
                f"{mem['bytes_per_session_without_text']} / "
                f"{lite['bytes_per_session_without_text']} B",
                f"< {m['target_bytes']} {_verdict(m['meets_target'])}",
            )
        )
        rows.append(
            (
                "sessions",
                "reload a session p50 / p99, memory / sqlite",
                f"{mem['reload_p50_us']:.0f} / {mem['reload_p99_us']:.0f} us, "
                f"{lite['reload_p50_us']:.0f} / {lite['reload_p99_us']:.0f} us",
                "",
            )
        )
    a = _ok(results, "bench_turn_api")
    if a is not None:
        rows.append(
            (
                "turn api",
                f"{a['clients']} clients: CPU/turn API vs runner (turns/s, p99+ ms)",
                f"{a['api']['server_cpu_ms_per_turn']:.2f} vs {a['runner']['cpu_ms_per_turn']:.2f}"
                f" ms: {a['cpu_ratio']}x ({a['api']['turns_per_s']:.0f} vs "
                f"{a['runner']['turns_per_s']:.0f}/s, {a['api']['added_p99_ms']:.0f} vs "
                f"{a['runner']['added_p99_ms']:.0f})",
                f"<= {a['target_ratio']:g}x {_verdict(a['meets_target'])}",
            )
        )
    f = _ok(results, "bench_faults")
    if f is not None and f.get("status") == "ok":
        up = f["approval_ms"]["all_up"]
        rows.append(
            (
                "faults",
                f"approval decided -> woke, all up, p50 / p99 ({f['kills']} kills, 1 db restart)",
                f"{up['p50']} / {up['p99']} ms (n={up['n']})",
                f"p99 < {f['target_p99_ms']:.0f} {_verdict(f['meets_target'])}",
            )
        )
        rows.append(
            (
                "faults",
                "end checks: lost writes, double injections/ticks/decisions, skipped ticks",
                "all passed" if f["checks_passed"] else "; ".join(f["problems"])[:100],
                f"none {_verdict(f['checks_passed'])}",
            )
        )
    elif f is not None:
        rows.append(("faults", f"{f.get('status')}", str(f.get("reason")), ""))
    return rows
