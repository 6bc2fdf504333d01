"""The capacity benchmarks keep working: ``bench/run.py --quick`` runs them (issue 30).

``make bench-quick`` (every benchmark at small N) takes longer than ``make test`` should
on a loaded machine, so this test runs the capacity benchmarks alone, in quick mode, as
``run.py`` runs them, and checks that each one ran and recorded its figures. The figures
themselves are never asserted: they are measurements.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.stress

ROOT = Path(__file__).resolve().parents[1]
CAPACITY = ("bench_concurrency", "bench_session_memory", "bench_turn_api", "bench_faults")


def test_the_capacity_benchmarks_run_quick_and_record_each_figure(tmp_path: Path) -> None:
    out = tmp_path / "results.json"
    done = subprocess.run(
        [sys.executable, "bench/run.py", "--quick", "--only", ",".join(CAPACITY), "--out", out],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    benchmarks = json.loads(out.read_text())["benchmarks"]
    assert sorted(benchmarks) == sorted(CAPACITY)
    failed = {n: e.get("error") for n, e in benchmarks.items() if e["status"] != "ok"}
    assert failed == {}
    cells = benchmarks["bench_concurrency"]["result"]["cells"]
    assert set(cells) == {"saturation", "users"}
    assert {"none", "plugins10"} <= set(cells["saturation"]["20"])
    assert all(row["turns"] > 0 for row in cells["saturation"]["20"].values())
    stores = benchmarks["bench_session_memory"]["result"]["stores"]
    assert stores["memory"]["bytes_per_session_without_text"] > 0
    assert benchmarks["bench_turn_api"]["result"]["api"]["failures"] == 0
    faults = benchmarks["bench_faults"]["result"]
    assert faults["status"] == "skipped" or faults["checks_passed"], faults.get("problems")
    for row in ("saturation N=20", "idle sessions", "CPU/turn API vs runner"):
        assert row in done.stdout
