"""One contract for every state-store backend: memory, SQLite and PostgreSQL.

Each rule of :class:`agentplug.store.StateStore` is one test, run on every backend (the
``store`` fixture of tests/store/conftest.py). The multi-process rules run on the durable
backends (``shared_url``: a SQLite file, a PostgreSQL database) with real child processes
opening the same store by URL.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from agentplug.store import StateStore, StateStoreUnavailable, StoreKeyError, open_store_url
from agentplug.store.base import MAX_KEY_BYTES, SCHEMA_VERSION

from tests.conftest import write_v1_sqlite_file


def run_children(code: str, url: str, count: int, *args: str) -> list[str]:
    """Run ``count`` copies of ``code`` at once (argv: url, index, *args); their stdouts."""
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", textwrap.dedent(code), url, str(i), *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(count)
    ]
    outs = []
    for proc in procs:
        out, err = proc.communicate(timeout=180)
        assert proc.returncode == 0, err
        outs.append(out)
    return outs


# -- key/value ------------------------------------------------------------------------


def test_get_of_a_missing_key_is_none(store: StateStore) -> None:
    assert store.get("ns", "missing") is None


def test_put_then_get_returns_the_value_and_put_overwrites(store: StateStore) -> None:
    store.put("ns", "k", {"a": [1, 2.5, "x", None, True]})
    assert store.get("ns", "k") == {"a": [1, 2.5, "x", None, True]}
    store.put("ns", "k", "second")
    assert store.get("ns", "k") == "second"


def test_namespaces_do_not_share_keys(store: StateStore) -> None:
    store.put("one", "k", 1)
    store.put("two", "k", 2)
    assert (store.get("one", "k"), store.get("two", "k")) == (1, 2)


def test_delete_reports_whether_the_key_existed(store: StateStore) -> None:
    store.put("ns", "k", 1)
    assert store.delete("ns", "k") is True
    assert store.delete("ns", "k") is False
    assert store.get("ns", "k") is None


def test_items_lists_the_prefix_sorted_bytewise(store: StateStore) -> None:
    for key in ["b", "a2", "a1", "B", "a_x", "ab", "c"]:
        store.put("ns", key, key)
    store.put("other", "a0", 0)
    assert [k for k, _ in store.items("ns")] == ["B", "a1", "a2", "a_x", "ab", "b", "c"]
    assert store.items("ns", "a") == [("a1", "a1"), ("a2", "a2"), ("a_x", "a_x"), ("ab", "ab")]


def test_items_prefix_is_literal_not_a_pattern(store: StateStore) -> None:
    store.put("ns", "a_b", 1)
    store.put("ns", "axb", 2)
    store.put("ns", "a%", 3)
    assert store.items("ns", "a_") == [("a_b", 1)]
    assert store.items("ns", "a%") == [("a%", 3)]


def test_delete_prefix_removes_only_that_prefix_and_counts(store: StateStore) -> None:
    for key in ["s1:a", "s1:b", "s2:a"]:
        store.put("ns", key, 1)
    assert store.delete_prefix("ns", "s1:") == 2
    assert [k for k, _ in store.items("ns")] == ["s2:a"]


def test_put_if_absent_stores_only_the_first_value(store: StateStore) -> None:
    assert store.put_if_absent("ns", "k", "first") is True
    assert store.put_if_absent("ns", "k", "second") is False
    assert store.get("ns", "k") == "first"


def test_values_that_are_not_json_are_refused_with_type_error(store: StateStore) -> None:
    with pytest.raises(TypeError, match="JSON"):
        store.put("ns", "k", object())
    with pytest.raises(TypeError, match="JSON"):
        store.append("ns", "q", float("nan"))
    with pytest.raises(TypeError, match="JSON"):
        store.put_if_absent("ns", "k", {1, 2})
    assert store.get("ns", "k") is None and store.peek("ns", "q") == []


# -- queues ---------------------------------------------------------------------------


def test_append_returns_increasing_sequence_numbers(store: StateStore) -> None:
    seqs = [store.append("ns", "q", i) for i in range(5)]
    assert seqs == sorted(seqs) and len(set(seqs)) == 5


def test_peek_shows_the_queue_in_order_without_removing(store: StateStore) -> None:
    for i in range(3):
        store.append("ns", "q", {"n": i})
    assert store.peek("ns", "q") == [{"n": 0}, {"n": 1}, {"n": 2}]
    assert store.peek("ns", "q") == [{"n": 0}, {"n": 1}, {"n": 2}]


def test_drain_returns_everything_in_order_and_empties_the_queue(store: StateStore) -> None:
    for i in range(3):
        store.append("ns", "q", i)
    store.append("ns", "other", "x")
    assert store.drain("ns", "q") == [0, 1, 2]
    assert store.drain("ns", "q") == []
    assert store.peek("ns", "other") == ["x"]


def test_clear_queue_counts_what_it_removed(store: StateStore) -> None:
    store.append("ns", "q", 1)
    store.append("ns", "q", 2)
    assert store.clear_queue("ns", "q") == 2
    assert store.peek("ns", "q") == []


# -- atomic ---------------------------------------------------------------------------


def test_atomic_block_commits_every_write_together(store: StateStore) -> None:
    with store.atomic("lock"):
        store.put("ns", "a", 1)
        store.append("ns", "q", "x")
        assert store.get("ns", "a") == 1
    assert store.get("ns", "a") == 1 and store.peek("ns", "q") == ["x"]


def test_atomic_block_rolls_back_on_exception(store: StateStore) -> None:
    store.put("ns", "a", "before")
    with pytest.raises(KeyError), store.atomic("lock"):
        store.put("ns", "a", "after")
        store.append("ns", "q", "x")
        store.put_if_absent("ns", "b", 1)
        raise KeyError("boom")
    assert store.get("ns", "a") == "before"
    assert store.peek("ns", "q") == [] and store.get("ns", "b") is None


def test_nested_atomic_joins_the_outer_transaction(store: StateStore) -> None:
    with pytest.raises(RuntimeError), store.atomic("outer"):
        with store.atomic("inner"):
            store.put("ns", "inner", 1)
        assert store.get("ns", "inner") == 1
        raise RuntimeError("outer fails")
    assert store.get("ns", "inner") is None


def test_atomic_lock_serializes_read_modify_write_across_threads(store: StateStore) -> None:
    store.put("ns", "counter", 0)

    def bump() -> None:
        for _ in range(25):
            with store.atomic("counter"):
                value = store.get("ns", "counter")
                time.sleep(0.001)
                assert isinstance(value, int)
                store.put("ns", "counter", value + 1)

    threads = [threading.Thread(target=bump) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert store.get("ns", "counter") == 50


def test_atomic_lock_serializes_read_modify_write_across_processes(shared_url: str) -> None:
    open_store_url(shared_url).put("ns", "counter", 0)
    code = """
    import sys, time
    from agentplug.store import open_store_url
    s = open_store_url(sys.argv[1])
    for _ in range(20):
        with s.atomic("counter"):
            v = s.get("ns", "counter")
            time.sleep(0.002)
            s.put("ns", "counter", v + 1)
    s.close()
    """
    run_children(code, shared_url, 3)
    assert open_store_url(shared_url).get("ns", "counter") == 60


# -- claim / ack ----------------------------------------------------------------------


def test_claim_leases_entries_in_order_and_keeps_them_queued(store: StateStore) -> None:
    seqs = [store.append("ns", "q", v) for v in ["a", "b"]]
    assert store.claim("ns", "q", owner="A", lease_ms=60_000) == list(
        zip(seqs, ["a", "b"], strict=True)
    )
    assert store.peek("ns", "q") == ["a", "b"]


def test_claimed_entries_are_not_claimed_again_under_lease(store: StateStore) -> None:
    store.append("ns", "q", "a")
    store.claim("ns", "q", owner="A", lease_ms=60_000)
    assert store.claim("ns", "q", owner="B", lease_ms=60_000) == []
    new = store.append("ns", "q", "b")
    assert store.claim("ns", "q", owner="B", lease_ms=60_000) == [(new, "b")]


def test_entries_become_claimable_again_when_the_lease_expires(store: StateStore) -> None:
    seq = store.append("ns", "q", "a")
    store.claim("ns", "q", owner="A", lease_ms=50)
    time.sleep(0.3)
    assert store.claim("ns", "q", owner="B", lease_ms=60_000) == [(seq, "a")]


def test_ack_removes_only_what_the_owner_holds(store: StateStore) -> None:
    seq = store.append("ns", "q", "a")
    store.claim("ns", "q", owner="A", lease_ms=60_000)
    assert store.ack("ns", "q", [seq], owner="B") == 0
    assert store.ack("ns", "q", [seq], owner="A") == 1
    assert store.peek("ns", "q") == []
    assert store.ack("ns", "q", [], owner="A") == 0


def test_ack_by_a_stale_owner_after_reclaim_is_ignored(store: StateStore) -> None:
    seq = store.append("ns", "q", "a")
    store.claim("ns", "q", owner="A", lease_ms=50)
    time.sleep(0.3)
    store.claim("ns", "q", owner="B", lease_ms=60_000)
    assert store.ack("ns", "q", [seq], owner="A") == 0
    assert store.peek("ns", "q") == ["a"]
    assert store.ack("ns", "q", [seq], owner="B") == 1


def test_release_gives_entries_back_claimable_at_once(store: StateStore) -> None:
    release = getattr(store, "release", None)
    if release is None:
        pytest.skip(f"{type(store).__name__} has no release() on this branch")
    seq = store.append("ns", "q", "a")
    store.claim("ns", "q", owner="A", lease_ms=60_000)
    assert release("ns", "q", [seq], owner="B") == 0
    assert release("ns", "q", [seq], owner="A") == 1
    assert store.claim("ns", "q", owner="B", lease_ms=60_000) == [(seq, "a")]


def test_put_if_absent_race_across_threads_has_one_winner(store: StateStore) -> None:
    wins: list[bool] = []
    barrier = threading.Barrier(8)

    def race(i: int) -> None:
        barrier.wait()
        wins.append(store.put_if_absent("ns", "once", i))

    threads = [threading.Thread(target=race, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert wins.count(True) == 1


# -- change channels ------------------------------------------------------------------


def test_version_counts_notifications_from_zero(store: StateStore) -> None:
    assert store.version("ch") == 0
    assert store.notify("ch") == 1
    assert store.notify("ch") == 2
    assert store.version("ch") == 2 and store.version("other") == 0


def test_wait_change_returns_seen_on_timeout(store: StateStore) -> None:
    store.notify("ch")
    assert store.wait_change("ch", 1, 0.05) == 1


def test_wait_change_returns_at_once_when_already_changed(store: StateStore) -> None:
    store.notify("ch")
    assert store.wait_change("ch", 0, 30) == 1


def test_wait_change_wakes_on_a_notify_from_another_thread(store: StateStore) -> None:
    seen = store.version("ch")
    timer = threading.Timer(0.2, store.notify, args=("ch",))
    timer.start()
    assert store.wait_change("ch", seen, 30) == seen + 1
    timer.join()


def test_notify_inside_a_rolled_back_block_is_not_recorded(store: StateStore) -> None:
    with pytest.raises(ValueError), store.atomic():
        store.notify("ch")
        raise ValueError
    assert store.version("ch") == 0


def test_wait_change_wakes_on_a_notify_from_another_process(shared_url: str) -> None:
    store = open_store_url(shared_url)
    code = """
    import sys, time
    from agentplug.store import open_store_url
    s = open_store_url(sys.argv[1])
    time.sleep(0.5)
    s.notify("ch")
    s.close()
    """
    proc = subprocess.Popen([sys.executable, "-c", textwrap.dedent(code), shared_url])
    try:
        assert store.wait_change("ch", 0, 60) == 1
    finally:
        proc.wait(timeout=60)
        store.close()


# -- several processes on one store -----------------------------------------------------


def test_processes_racing_put_if_absent_have_exactly_one_winner(shared_url: str) -> None:
    code = """
    import sys
    from agentplug.store import open_store_url
    s = open_store_url(sys.argv[1])
    wins = [k for k in range(50) if s.put_if_absent("ns", f"k{k}", sys.argv[2])]
    print(wins)
    s.close()
    """
    outs = run_children(code, shared_url, 4)
    won = [k for out in outs for k in json.loads(out)]
    assert sorted(won) == list(range(50))


def test_processes_claiming_one_queue_get_every_entry_exactly_once(shared_url: str) -> None:
    code = """
    import json, sys
    from agentplug.store import open_store_url
    s = open_store_url(sys.argv[1])
    owner = "p" + sys.argv[2]
    put, got = [], []
    def take():
        batch = s.claim("ns", "q", owner=owner, lease_ms=600_000)
        seqs = [seq for seq, _ in batch]
        assert s.ack("ns", "q", seqs, owner=owner) == len(seqs)
        got.extend(seqs)
    for i in range(50):
        put.append(s.append("ns", "q", [owner, i]))
        if i % 3 == 0:
            take()
    take()
    print(json.dumps({"put": put, "got": got}))
    s.close()
    """
    outs = [json.loads(out) for out in run_children(code, shared_url, 4)]
    store = open_store_url(shared_url)
    rest = [seq for seq, _ in store.claim("ns", "q", owner="last", lease_ms=600_000)]
    got = [seq for out in outs for seq in out["got"]] + rest
    put = [seq for out in outs for seq in out["put"]]
    assert len(put) == 200
    assert sorted(got) == sorted(put)
    store.close()


def test_processes_appending_and_draining_lose_nothing_and_deliver_once(shared_url: str) -> None:
    code = """
    import json, sys
    from agentplug.store import open_store_url
    s = open_store_url(sys.argv[1])
    me = int(sys.argv[2])
    got = []
    for i in range(60):
        s.append("ns", "q", [me, i])
        if i % 5 == 0:
            got.extend(s.drain("ns", "q"))
    print(json.dumps(got))
    s.close()
    """
    outs = run_children(code, shared_url, 4)
    got = [tuple(v) for out in outs for v in json.loads(out)]
    got += [tuple(v) for v in open_store_url(shared_url).drain("ns", "q")]
    assert sorted(got) == sorted((p, i) for p in range(4) for i in range(60))


# -- schema ---------------------------------------------------------------------------


def test_a_new_durable_store_is_at_the_current_schema_version(shared_url: str) -> None:
    store = open_store_url(shared_url)
    assert store.schema_version() == SCHEMA_VERSION  # type: ignore[attr-defined]
    assert store.migrated_from == 0  # type: ignore[attr-defined]
    store.close()


def test_processes_migrating_at_once_all_succeed(shared_url: str) -> None:
    code = """
    import sys
    from agentplug.store import open_store_url
    s = open_store_url(sys.argv[1])
    print(s.schema_version())
    s.close()
    """
    outs = run_children(code, shared_url, 4)
    assert [int(o) for o in outs] == [SCHEMA_VERSION] * 4


def test_an_old_sqlite_v1_file_is_migrated_keeping_its_rows(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite3"
    write_v1_sqlite_file(path)
    store = open_store_url(f"sqlite:///{path}")
    assert store.migrated_from == 1  # type: ignore[attr-defined]
    assert store.schema_version() == SCHEMA_VERSION  # type: ignore[attr-defined]
    assert store.get("ns", "k") == "v"
    [(seq, value)] = store.claim("ns", "q", owner="A", lease_ms=60_000)
    assert value == 1 and store.ack("ns", "q", [seq], owner="A") == 1
    store.close()


def test_an_old_postgres_v1_schema_is_migrated_keeping_its_rows(postgres_url: str) -> None:
    url = postgres_url
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "CREATE TABLE agentplug_kv (namespace text NOT NULL, key text NOT NULL,"
            " value text NOT NULL, updated double precision NOT NULL,"
            " PRIMARY KEY (namespace, key))"
        )
        conn.execute(
            "CREATE TABLE agentplug_queue (seq bigint GENERATED BY DEFAULT AS IDENTITY"
            " PRIMARY KEY, namespace text NOT NULL, queue text NOT NULL, value text NOT NULL,"
            " created double precision NOT NULL)"
        )
        conn.execute("INSERT INTO agentplug_kv VALUES ('ns', 'k', '\"v\"', 0)")
        conn.execute(
            "INSERT INTO agentplug_queue(namespace, queue, value, created) VALUES ('ns','q','1',0)"
        )
    store = open_store_url(url)
    assert store.migrated_from == 1  # type: ignore[attr-defined]
    assert store.schema_version() == SCHEMA_VERSION  # type: ignore[attr-defined]
    assert store.get("ns", "k") == "v"
    [(seq, value)] = store.claim("ns", "q", owner="A", lease_ms=60_000)
    assert value == 1 and store.ack("ns", "q", [seq], owner="A") == 1
    store.close()


# -- the key rule: one limit, one NUL rule, one error ----------------------------------

# 3 000 characters PostgreSQL cannot compress into one index row (its limit is ~2.7 KB).
_INCOMPRESSIBLE = "".join(hashlib.sha256(str(i).encode()).hexdigest() for i in range(50))[:3000]


def _refused(store: StateStore, call: Any) -> StoreKeyError:
    """Run ``call(store)``; it must raise :class:`StoreKeyError`, and not as an outage."""
    with pytest.raises(StoreKeyError) as caught:
        call(store)
    assert not isinstance(caught.value, StateStoreUnavailable)
    assert getattr(store, "failures", 0) == 0  # PostgreSQL: never counted, never retried
    return caught.value


@pytest.mark.parametrize(
    "call",
    [
        lambda s: s.put("ns", "a\x00b", 1),
        lambda s: s.get("ns", "a\x00b"),
        lambda s: s.put_if_absent("ns", "a\x00b", 1),
        lambda s: s.delete("ns", "a\x00b"),
        lambda s: s.put("n\x00s", "k", 1),
        lambda s: s.items("ns", "a\x00"),
        lambda s: s.append("ns", "q\x00", 1),
        lambda s: s.claim("ns", "q", owner="o\x00", lease_ms=1000),
        lambda s: s.notify("ch\x00"),
    ],
    ids=[
        "put",
        "get",
        "put_if_absent",
        "delete",
        "namespace",
        "prefix",
        "queue",
        "owner",
        "channel",
    ],
)
def test_a_name_with_a_nul_character_is_refused_with_store_key_error(
    store: StateStore, call: Any
) -> None:
    error = _refused(store, call)
    assert "NUL" in str(error)
    store.put("ns", "k", "still usable")
    assert store.items("ns") == [("k", "still usable")]


def test_a_key_of_the_maximum_size_is_stored_in_a_namespace_of_the_maximum_size(
    store: StateStore,
) -> None:
    namespace, key = "n" * MAX_KEY_BYTES, "é" * (MAX_KEY_BYTES // 2)  # 2 bytes each
    store.put(namespace, key, 1)
    assert store.get(namespace, key) == 1
    assert store.items(namespace) == [(key, 1)]
    assert store.append(namespace, key, "v") > 0 and store.peek(namespace, key) == ["v"]
    assert store.notify(key) == 1


@pytest.mark.parametrize(
    "call",
    [
        lambda s: s.put("ns", "é" * (MAX_KEY_BYTES // 2) + "x", 1),
        lambda s: s.put("n" * (MAX_KEY_BYTES + 1), "k", 1),
        lambda s: s.put("ns", _INCOMPRESSIBLE, 1),  # over PostgreSQL's index-row limit
        lambda s: s.put_if_absent("ns", _INCOMPRESSIBLE, 1),
        lambda s: s.get("ns", _INCOMPRESSIBLE),
        lambda s: s.append("ns", _INCOMPRESSIBLE, 1),
        lambda s: s.notify(_INCOMPRESSIBLE),
    ],
    ids=["put", "namespace", "pg-index-limit", "put_if_absent", "get", "queue", "channel"],
)
def test_a_name_over_the_maximum_size_is_refused_with_store_key_error(
    store: StateStore, call: Any
) -> None:
    error = _refused(store, call)
    assert f"at most {MAX_KEY_BYTES} bytes" in str(error)
    assert store.items("ns") == [] and store.peek("ns", _INCOMPRESSIBLE[:100]) == []
    if hasattr(store, "health"):
        assert store.health()["outages"] == []


def test_a_name_that_is_not_valid_unicode_is_refused_with_store_key_error(
    store: StateStore,
) -> None:
    _refused(store, lambda s: s.put("ns", "bad\udc80", 1))


def test_a_refused_key_is_named_in_one_line_with_its_namespace_and_the_rule(
    store: StateStore,
) -> None:
    message = str(_refused(store, lambda s: s.put("session.ext", "x\x00\n" + "y" * 3000, 1)))
    assert "\n" not in message and len(message) < 400
    assert "namespace 'session.ext'" in message and "key 'x\\x00\\nyyy" in message
    assert f"at most {MAX_KEY_BYTES} bytes of UTF-8 without NUL" in message
