"""``bench/run.py --only`` replaces only the benchmarks it ran in the results file."""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path
from types import ModuleType

BENCH = Path(__file__).resolve().parents[1] / "bench"


def _run_module() -> ModuleType:
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))
    return importlib.import_module("run")


def _earlier(path: Path, *, quick: bool) -> None:
    path.write_text(
        json.dumps(
            {
                "started_utc": "2026-01-02T03:04:05+00:00",
                "quick": quick,
                "benchmarks": {"bench_faults": {"status": "ok", "result": {"p99": 14.5}}},
            }
        )
    )


def test_an_only_run_keeps_the_other_entries_stamped_with_when_they_were_measured(
    tmp_path: Path,
) -> None:
    out = tmp_path / "results.json"
    _earlier(out, quick=False)
    kept = _run_module().kept_entries(out, False)
    assert kept == {
        "bench_faults": {
            "measured_utc": "2026-01-02T03:04:05+00:00",
            "status": "ok",
            "result": {"p99": 14.5},
        }
    }


def test_an_only_run_never_mixes_quick_figures_into_a_full_results_file(tmp_path: Path) -> None:
    out = tmp_path / "results.json"
    _earlier(out, quick=True)
    assert _run_module().kept_entries(out, False) == {}


def test_an_only_run_without_an_earlier_file_keeps_nothing(tmp_path: Path) -> None:
    assert _run_module().kept_entries(tmp_path / "absent.json", False) == {}
