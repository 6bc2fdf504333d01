"""The database is restarted mid-run: operations resume, and nothing is lost.

A real writer process puts keys and appends queue entries on PostgreSQL without pause,
printing each write once the store confirmed it, while the test restarts the server
(``pg_ctl restart -m fast``: every connection is cut). Issue 15 item 6.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.stress

WRITER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from agentplug.store import StateStoreUnavailable, open_store_url

    url, stop = sys.argv[1], Path(sys.argv[2])
    store = open_store_url(url, retry_ms=60_000)
    i = 0
    while not stop.exists():
        i += 1
        try:
            store.put("w", f"k{i}", i)
            print(f"put {i}", flush=True)
        except StateStoreUnavailable as exc:
            print(f"unavailable put {i} {exc}", flush=True)
        try:
            store.append("w", "q", i)
            print(f"append {i}", flush=True)
        except StateStoreUnavailable as exc:
            print(f"unavailable append {i} {exc}", flush=True)
    store.close()
    print("done", flush=True)
    """
)


class _Lines:
    """The writer's stdout, read on a thread; wait until a condition on it holds."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.lines: list[str] = []
        self._changed = threading.Condition()
        self._thread = threading.Thread(target=self._read, args=(proc,), daemon=True)
        self._thread.start()

    def _read(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            with self._changed:
                self.lines.append(line.rstrip("\n"))
                self._changed.notify_all()

    def wait_for(self, count: int, kind: str = "append ") -> None:
        with self._changed:
            ok = self._changed.wait_for(
                lambda: sum(line.startswith(kind) for line in self.lines) >= count, timeout=120
            )
        assert ok, f"the writer confirmed fewer than {count} writes: {self.lines[-5:]}"

    def join(self) -> None:
        self._thread.join(timeout=60)


def _write_through_a_restart(
    postgres_server: Any, url: str, tmp_path: Path, writes: int
) -> tuple[subprocess.Popen[str], _Lines, Path]:
    """Run the writer, restart the server after ``writes`` confirmed appends, wait for
    ``writes`` more, then stop it; return the process, its output and its stderr log."""
    stop, log = tmp_path / "stop", tmp_path / "writer.log"
    with log.open("w") as stderr:
        proc = subprocess.Popen(
            [sys.executable, "-c", WRITER, url, str(stop)],
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
        )
    out = _Lines(proc)
    try:
        out.wait_for(writes)
        before = sum(line.startswith("append ") for line in out.lines)
        postgres_server.pg_ctl("restart", "-m", "fast")
        # The writer recovered: it confirms new writes after the restart.
        out.wait_for(before + writes)
    finally:
        stop.touch()
        proc.wait(timeout=120)
        out.join()
    return proc, out, log


def test_the_database_restarted_mid_run_resumes_and_loses_no_confirmed_write(
    postgres_server: Any, postgres_url: str, tmp_path: Path
) -> None:
    proc, out, log = _write_through_a_restart(postgres_server, postgres_url, tmp_path, 50)
    assert proc.returncode == 0, log.read_text()
    assert out.lines[-1] == "done"

    from agentplug.store import open_store_url

    store = open_store_url(postgres_url)
    try:
        kv = dict(store.items("w"))
        queued = store.peek("w", "q")
    finally:
        store.close()
    puts = [int(line.split()[1]) for line in out.lines if line.startswith("put ")]
    appends = [int(line.split()[1]) for line in out.lines if line.startswith("append ")]
    assert all(kv.get(f"k{i}") == i for i in puts)
    assert [v for v in queued if v in set(appends)] == appends  # all there, in order
    assert len(queued) == len(set(queued))  # nothing written twice
    # Within the retry budget a call fails only when its COMMIT was cut mid-flight and
    # repeating it could write twice (an append); a put is always retried.
    failed = [line for line in out.lines if line.startswith("unavailable")]
    assert all(line.startswith("unavailable append") for line in failed), failed
    assert all("commit outcome unknown" in line for line in failed), failed


def test_an_outage_a_gateway_lived_through_is_reported_by_state_check_elsewhere(
    postgres_server: Any, postgres_url: str, tmp_path: Path
) -> None:
    proc, _, log = _write_through_a_restart(postgres_server, postgres_url, tmp_path, 20)
    assert "reachable again after" in log.read_text()  # the gateway logged it
    check = subprocess.run(
        [sys.executable, "-m", "agentplug.cli", "state", "check", "--json", "--url", postgres_url],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert check.returncode == 0, check.stderr
    report = json.loads(check.stdout)
    assert report["failures"] == 0  # this process saw none ...
    [outage] = report["outages"]  # ... but the writer's outage is on record
    assert outage["node"].endswith(f"-{proc.pid}")
    assert outage["failures"] >= 1 and outage["recovered_ms"] >= outage["started_ms"]
