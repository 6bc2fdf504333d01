"""Three gateways on one PostgreSQL under faults (issue 30 item 4).

Starts a throwaway PostgreSQL server (:mod:`pg_server`, PostgreSQL's default durability)
and runs :func:`fault_cluster.run_faults` on it: three gateway processes with turns,
approvals asked on one gateway and answered on another, injections, key writes and a
cron job, one of them SIGKILLed and restarted every 30 s, the database restarted once;
5 minutes (``--quick``: 20 s, a kill every 7 s). Reports the approvals' decision-to-wake
time p50 / p99 while everything was up (target: p99 under 100 ms) and during faults, and
the end checks (no confirmed write lost, no injection delivered twice, no cron tick run
twice or skipped, no approval decided twice). Skipped with the reason when there is no
PostgreSQL server binary or no psycopg.

Usage: ``python bench/bench_faults.py [--quick] [--seconds S]``; importable as
``run(quick=False)``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import pg_server  # noqa: E402
from fault_cluster import FaultSettings, run_faults  # noqa: E402

TARGET_P99_MS = 100.0
QUICK = FaultSettings(duration_s=20.0, kill_every_s=7.0, db_restart_at_s=10.0)


def run(quick: bool = False, settings: FaultSettings | None = None) -> dict[str, Any]:
    """One fault run on a server of its own; the report, the targets and the checks."""
    s = settings or (QUICK if quick else FaultSettings())
    reason = pg_server.unavailable()
    if reason is not None:
        return {"status": "skipped", "reason": reason}
    with pg_server.TempPostgres(max_connections=200) as pg:
        url = pg.create_database("faults")
        with tempfile.TemporaryDirectory(prefix="agentplug-faults-") as work:
            report = run_faults(
                url,
                pg.restart,
                Path(work),
                s,
                progress=lambda line: print(f"  faults: {line}", file=sys.stderr),
            )
        report["server"] = pg.server_info()
    p99 = report["approval_ms"]["all_up"]["p99"]
    report.update(
        status="ok",
        target_p99_ms=TARGET_P99_MS,
        meets_target=p99 == p99 and p99 < TARGET_P99_MS,  # ``nan`` (no sample) misses
        checks_passed=not report["problems"],
    )
    return report


def format_table(result: dict[str, Any]) -> str:
    """The counts, the approval latencies and the checks."""
    if result.get("status") != "ok":
        return f"faults: {result.get('status')} ({result.get('reason')})"
    s, c = result["settings"], result["counts"]
    up, hit = result["approval_ms"]["all_up"], result["approval_ms"]["during_faults"]
    verdict = "MET" if result["meets_target"] else "MISSED"
    lines = [
        f"three gateways on one PostgreSQL, {s['duration_s']:.0f} s: "
        f"{result['kills']} SIGKILLs (ready again in {result['restart_s']} s), "
        "1 database restart",
        f"  turns replied {c['turns_replied']} (failed {c['turns_failed']}), writes "
        f"{c['writes_confirmed']}, injections {c['injections_enqueued']} enqueued / "
        f"{c['injections_delivered']} delivered / {c['injections_left_at_end']} left, "
        f"cron ticks {c['cron_ticks_started']} of {c['cron_ticks']}, approvals "
        f"{c['approvals_decided']} decided / {c['approvals_woke']} woke",
        f"  approval decided -> asker woke, all up:        p50 {up['p50']} ms, p99 "
        f"{up['p99']} ms (n={up['n']})  target p99 < {result['target_p99_ms']:.0f} ms {verdict}",
        f"  approval decided -> asker woke, during faults: p50 {hit['p50']} ms, p99 "
        f"{hit['p99']} ms (n={hit['n']})",
        "  end checks: "
        + ("all passed" if result["checks_passed"] else "; ".join(result["problems"])),
    ]
    return "\n".join(lines)


def _main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--seconds", type=float, help="run length (kills every 30 s)")
    args = parser.parse_args()
    settings = None
    if args.seconds:
        settings = FaultSettings(duration_s=args.seconds, db_restart_at_s=args.seconds * 0.45)
    result = run(args.quick, settings)
    print(format_table(result))
    print(json.dumps(result, default=str))


if __name__ == "__main__":
    _main()
