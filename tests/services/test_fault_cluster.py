"""Three gateways on one PostgreSQL under faults keep every promise (issue 30 item 4).

The run of ``bench/bench_faults.py`` in a short setting, on the test suite's server: three
real gateway processes (turns, approvals asked on one and answered on another, next-turn
injections, key writes, a cron job), one SIGKILLed and restarted every 12 s, the database
restarted once (``pg_ctl restart -m fast``). One run for the module; each test asserts one
of the end checks of ``bench/fault_cluster.py`` (what each process logged as confirmed,
against the store once they all stopped). Latencies are reported by the benchmark, never
asserted here.
"""

from __future__ import annotations

import importlib
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

pytestmark = pytest.mark.stress

BENCH = Path(__file__).resolve().parents[2] / "bench"


def _fault_cluster() -> ModuleType:
    """``bench/fault_cluster.py`` (the benchmarks are scripts, not a package)."""
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))
    return importlib.import_module("fault_cluster")


@pytest.fixture(scope="module")
def report(postgres_server: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    import psycopg

    name = f"t_{uuid.uuid4().hex[:16]}"
    with psycopg.connect(postgres_server.url(), autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    fault_cluster = _fault_cluster()
    settings = fault_cluster.FaultSettings(
        duration_s=40.0, kill_every_s=12.0, db_restart_at_s=18.0, sessions=2
    )
    try:
        yield fault_cluster.run_faults(
            postgres_server.url(name),
            lambda: postgres_server.pg_ctl("restart", "-m", "fast"),
            tmp_path_factory.mktemp("faults"),
            settings,
        )
    finally:
        with psycopg.connect(postgres_server.url(), autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def test_the_run_killed_gateways_restarted_the_database_and_did_work_throughout(
    report: Any,
) -> None:
    counts = report["counts"]
    assert report["kills"] >= 3
    assert [f["what"] for f in report["faults"]].count("database restart") == 1
    assert counts["turns_replied"] > 0 and counts["writes_confirmed"] > 0
    assert counts["injections_delivered"] > 0 and counts["approvals_decided"] > 0
    assert report["checks"]["bad_exits"] == []


def test_no_confirmed_write_is_lost(report: Any) -> None:
    checks = report["checks"]
    assert checks["writes_lost"] == []
    assert checks["turns_lost"] == []
    assert checks["injections_lost"] == []
    assert checks["decisions_lost"] == []


def test_a_restarted_gateway_goes_on_where_its_lanes_stored_conversations_end(
    report: Any,
) -> None:
    lanes = 3 * 2
    assert report["counts"]["conversations"] > lanes  # lanes moved on to new conversations
    assert report["checks"]["turns_twice"] == []


def test_no_injection_is_delivered_twice(report: Any) -> None:
    assert report["checks"]["injections_twice"] == []


def test_no_cron_tick_runs_twice_or_is_skipped_when_the_lease_moves(report: Any) -> None:
    assert report["checks"]["ticks_twice"] == []
    assert report["checks"]["ticks_skipped"] == []
    assert report["counts"]["cron_ticks_started"] == report["counts"]["cron_ticks"]


def test_no_approval_is_decided_twice_and_every_asker_wakes_with_the_decision(
    report: Any,
) -> None:
    assert report["checks"]["approvals_twice"] == []
    assert report["checks"]["woke_against_decision"] == []
