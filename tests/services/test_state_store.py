"""The state store: durable across reopen, concurrent processes lose nothing, crash-safe."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from agentplug.store import MemoryStore, SQLiteStore, StateStore, open_store


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StateStore]:
    s: StateStore = MemoryStore() if request.param == "memory" else SQLiteStore(tmp_path / "s.db")
    yield s
    s.close()


def child(code: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


# -- one contract, both implementations ---------------------------------------------------


def test_both_stores_have_the_same_key_value_semantics(store: StateStore) -> None:
    assert store.get("ns", "missing") is None
    store.put("ns", "a/1", {"x": [1, 2]})
    store.put("ns", "a/2", "two")
    store.put("ns", "b/1", 3)
    store.put("other", "a/1", "isolated")
    store.put("ns", "a/2", "second")  # overwrite
    assert store.get("ns", "a/1") == {"x": [1, 2]}
    assert store.items("ns", "a/") == [("a/1", {"x": [1, 2]}), ("a/2", "second")]
    assert [k for k, _ in store.items("ns")] == ["a/1", "a/2", "b/1"]
    assert store.delete("ns", "b/1") and not store.delete("ns", "b/1")
    assert store.delete_prefix("ns", "a/") == 2
    assert store.items("ns") == []
    assert store.get("other", "a/1") == "isolated"


def test_both_stores_have_the_same_queue_semantics(store: StateStore) -> None:
    seqs = [store.append("ns", "q", {"n": i}) for i in range(3)]
    assert seqs == sorted(seqs) and len(set(seqs)) == 3
    store.append("ns", "other", "x")
    assert store.peek("ns", "q") == [{"n": 0}, {"n": 1}, {"n": 2}]
    assert store.drain("ns", "q") == [{"n": 0}, {"n": 1}, {"n": 2}]
    assert store.drain("ns", "q") == []
    assert store.clear_queue("ns", "other") == 1
    assert store.peek("ns", "other") == []


def test_both_stores_refuse_values_that_are_not_json(store: StateStore) -> None:
    with pytest.raises(TypeError, match="JSON-compatible"):
        store.put("ns", "k", {1, 2})
    with pytest.raises(TypeError):
        store.append("ns", "q", float("nan"))
    assert store.get("ns", "k") is None and store.peek("ns", "q") == []


def test_stored_values_are_copies_not_shared_objects(store: StateStore) -> None:
    value = {"list": [1]}
    store.put("ns", "k", value)
    value["list"].append(2)
    got = store.get("ns", "k")
    assert got == {"list": [1]}
    got["list"].append(3)
    assert store.get("ns", "k") == {"list": [1]}


def test_threads_appending_and_putting_concurrently_lose_nothing(store: StateStore) -> None:
    def work(tag: int) -> None:
        for i in range(100):
            store.put("ns", f"{tag}-{i}", i)
            store.append("ns", "q", [tag, i])

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(store.items("ns")) == 400
    drained = store.drain("ns", "q")
    assert sorted(map(tuple, drained)) == [(t, i) for t in range(4) for i in range(100)]


# -- SQLite durability --------------------------------------------------------------------


def test_sqlite_state_survives_reopening(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite3"
    first = SQLiteStore(path)
    first.put("approvals.grants", "g1", {"plugin_id": "p"})
    first.append("session.injections", "s1", "hello")
    first.append("session.injections", "s1", "world")
    first.close()
    second = open_store(tmp_path)
    assert isinstance(second, SQLiteStore)
    assert second.get("approvals.grants", "g1") == {"plugin_id": "p"}
    assert second.drain("session.injections", "s1") == ["hello", "world"]
    second.close()
    third = SQLiteStore(path)
    assert third.peek("session.injections", "s1") == []  # the drain was durable too
    third.close()


WRITER = """
import sys
from agentplug.store import SQLiteStore
path, tag, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
s = SQLiteStore(path)
for i in range(n):
    s.put("ns", f"{tag}-{i}", {"tag": tag, "i": i})
    s.append("ns", "q", [tag, i])
s.close()
print("done", flush=True)
"""


def test_two_processes_putting_and_appending_concurrently_lose_nothing(tmp_path: Path) -> None:
    path = str(tmp_path / "shared.sqlite3")
    SQLiteStore(path).close()  # create the schema once
    n = 150
    procs = [child(WRITER, path, tag, str(n)) for tag in ("a", "b")]
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        assert out.strip() == "done"
    s = SQLiteStore(path)
    assert len(s.items("ns")) == 2 * n
    assert s.get("ns", "b-149") == {"tag": "b", "i": 149}
    queue = s.drain("ns", "q")
    assert sorted(map(tuple, queue)) == sorted((t, i) for t in ("a", "b") for i in range(n))
    # each process's appends stay in its own order
    for tag in ("a", "b"):
        assert [i for t, i in queue if t == tag] == list(range(n))
    s.close()


PRODUCER = """
import sys
from agentplug.store import SQLiteStore
s = SQLiteStore(sys.argv[1])
for i in range(int(sys.argv[2])):
    s.append("ns", "work", i)
s.put("ns", "producer_done", True)
s.close()
"""

CONSUMER = """
import json, sys
from agentplug.store import SQLiteStore
s = SQLiteStore(sys.argv[1])
while True:
    done = s.get("ns", "producer_done")
    items = s.drain("ns", "work")
    for item in items:
        print(json.dumps(item), flush=True)
    if done and not items:
        break
s.close()
"""


def test_concurrent_drains_deliver_every_item_exactly_once(tmp_path: Path) -> None:
    path = str(tmp_path / "queue.sqlite3")
    SQLiteStore(path).close()
    n = 300
    consumers = [child(CONSUMER, path) for _ in range(2)]
    producer = child(PRODUCER, path, str(n))
    _, err = producer.communicate(timeout=120)
    assert producer.returncode == 0, err
    seen: list[int] = []
    for c in consumers:
        out, err = c.communicate(timeout=120)
        assert c.returncode == 0, err
        seen += [json.loads(line) for line in out.splitlines()]
    assert sorted(seen) == list(range(n))  # nothing lost, nothing delivered twice


CRASHER = """
import sys
from agentplug.store import SQLiteStore
s = SQLiteStore(sys.argv[1])
i = 0
while True:
    s.put("crash", f"k{i}", {"i": i, "pad": "x" * 200})
    s.append("crash", "q", i)
    print(i, flush=True)  # both writes of step i are committed
    i += 1
"""


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
def test_a_crash_between_two_writes_keeps_every_committed_write(tmp_path: Path) -> None:
    path = tmp_path / "crash.sqlite3"
    SQLiteStore(path).close()
    proc = child(CRASHER, str(path))
    assert proc.stdout is not None
    committed: list[int] = []
    for line in proc.stdout:
        committed.append(int(line))
        if len(committed) >= 300:
            break
    os.kill(proc.pid, signal.SIGKILL)  # mid-loop: possibly between the put and the append
    rest, _ = proc.communicate(timeout=60)
    committed += [int(x) for x in rest.split()]
    assert proc.returncode == -signal.SIGKILL

    with sqlite3.connect(path) as raw:
        assert raw.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    s = SQLiteStore(path)
    keys = dict(s.items("crash"))
    queue = s.peek("crash", "q")
    for i in committed:  # every confirmed write is there
        assert keys[f"k{i}"] == {"i": i, "pad": "x" * 200}
    # The child may commit steps after the last line the parent read (lines still in a
    # pipe buffer when it was killed), so no exact count: what is there is whole and in
    # order, steps 0..n-1 complete, at most step n half done (its put without its append).
    n = len(queue)
    assert queue == list(range(n))
    assert sorted(keys) == sorted(f"k{i}" for i in range(len(keys)))
    assert len(keys) in (n, n + 1)
    assert all(keys[f"k{i}"] == {"i": i, "pad": "x" * 200} for i in range(len(keys)))
    s.put("crash", "after", "still writable")
    assert s.get("crash", "after") == "still writable"
    s.close()


def test_a_released_claim_is_claimable_again_at_once_in_its_place(store: StateStore) -> None:
    for i in range(3):
        store.append("ns", "q", i)
    claimed = store.claim("ns", "q", owner="a", lease_ms=60_000)
    assert store.claim("ns", "q", owner="b", lease_ms=60_000) == []
    assert store.release("ns", "q", [claimed[0][0], claimed[2][0]], owner="b") == 0
    assert store.release("ns", "q", [claimed[0][0], claimed[2][0]], owner="a") == 2
    assert [v for _, v in store.claim("ns", "q", owner="b", lease_ms=60_000)] == [0, 2]
    assert store.peek("ns", "q") == [0, 1, 2]
