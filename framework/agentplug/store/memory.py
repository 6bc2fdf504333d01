"""An in-process store with the same semantics as the durable ones (tests, no state dir)."""

from __future__ import annotations

import copy
import json
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from agentplug.store.base import (
    Claimed,
    check_key,
    check_locks,
    check_name,
    dump_value,
)
from agentplug.store.records import join_records, split_records

__all__ = ["MemoryStore"]

# One queue entry: [seq, raw JSON, claim owner or None, lease end (epoch s) or 0.0].
_Entry = list[Any]


class MemoryStore:
    """In-process store for tests (same semantics, nothing persisted).

    One re-entrant lock serializes every call, so an :meth:`atomic` block holds it for
    its whole length; an exception inside the block restores what was there before.
    """

    def __init__(self) -> None:
        self._kv: dict[tuple[str, str], str] = {}
        self._queues: dict[tuple[str, str], list[_Entry]] = {}
        self._versions: dict[str, int] = {}
        self._seq = 0
        self._lock = threading.RLock()
        self._changed = threading.Condition(self._lock)
        self._depth = 0

    def get(self, namespace: str, key: str) -> Any | None:
        check_key(namespace, key)
        with self._lock:
            raw = self._kv.get((namespace, key))
        return None if raw is None else json.loads(raw)

    def put(self, namespace: str, key: str, value: Any) -> None:
        check_key(namespace, key)
        raw = dump_value(value)
        with self._lock:
            self._kv[(namespace, key)] = raw

    def put_if_absent(self, namespace: str, key: str, value: Any) -> bool:
        check_key(namespace, key)
        raw = dump_value(value)
        with self._lock:
            if (namespace, key) in self._kv:
                return False
            self._kv[(namespace, key)] = raw
            return True

    def delete(self, namespace: str, key: str) -> bool:
        check_key(namespace, key)
        with self._lock:
            return self._kv.pop((namespace, key), None) is not None

    def items(self, namespace: str, prefix: str = "") -> list[tuple[str, Any]]:
        check_key(namespace, prefix, field="prefix")
        with self._lock:
            rows = [
                (k, json.loads(v))
                for (ns, k), v in self._kv.items()
                if ns == namespace and k.startswith(prefix)
            ]
        return sorted(rows, key=lambda kv: kv[0])

    def delete_prefix(self, namespace: str, prefix: str) -> int:
        check_key(namespace, prefix, field="prefix")
        with self._lock:
            doomed = [k for k in self._kv if k[0] == namespace and k[1].startswith(prefix)]
            for k in doomed:
                del self._kv[k]
        return len(doomed)

    def append(self, namespace: str, queue: str, value: Any) -> int:
        check_key(namespace, queue, field="queue")
        raw = dump_value(value)
        with self._lock:
            self._seq += 1
            self._queues.setdefault((namespace, queue), []).append([self._seq, raw, None, 0.0])
            return self._seq

    def drain(self, namespace: str, queue: str) -> list[Any]:
        check_key(namespace, queue, field="queue")
        with self._lock:
            rows = self._queues.pop((namespace, queue), [])
        return [json.loads(row[1]) for row in rows]

    def peek(self, namespace: str, queue: str) -> list[Any]:
        check_key(namespace, queue, field="queue")
        with self._lock:
            rows = list(self._queues.get((namespace, queue), []))
        return [json.loads(row[1]) for row in rows]

    def clear_queue(self, namespace: str, queue: str) -> int:
        check_key(namespace, queue, field="queue")
        with self._lock:
            return len(self._queues.pop((namespace, queue), []))

    def claim(self, namespace: str, queue: str, *, owner: str, lease_ms: int) -> list[Claimed]:
        check_key(namespace, queue, field="queue")
        check_name("owner", owner)
        now = time.time()
        out: list[Claimed] = []
        with self._lock:
            for row in self._queues.get((namespace, queue), []):
                if row[2] is None or row[3] < now:
                    row[2], row[3] = owner, now + lease_ms / 1000
                    out.append((row[0], json.loads(row[1])))
        return out

    def ack(self, namespace: str, queue: str, seqs: Sequence[int], *, owner: str) -> int:
        check_key(namespace, queue, field="queue")
        check_name("owner", owner)
        wanted = set(seqs)
        with self._lock:
            rows = self._queues.get((namespace, queue), [])
            kept = [r for r in rows if not (r[0] in wanted and r[2] == owner)]
            removed = len(rows) - len(kept)
            if kept:
                self._queues[(namespace, queue)] = kept
            else:
                self._queues.pop((namespace, queue), None)
        return removed

    def release(self, namespace: str, queue: str, seqs: Sequence[int], *, owner: str) -> int:
        check_key(namespace, queue, field="queue")
        check_name("owner", owner)
        wanted = set(seqs)
        released = 0
        with self._lock:
            for row in self._queues.get((namespace, queue), []):
                if row[0] in wanted and row[2] == owner:
                    row[2], row[3] = None, 0.0
                    released += 1
        return released

    def notify(self, channel: str) -> int:
        check_name("channel", channel)
        with self._changed:
            version = self._versions.get(channel, 0) + 1
            self._versions[channel] = version
            self._changed.notify_all()
            return version

    def version(self, channel: str) -> int:
        check_name("channel", channel)
        with self._lock:
            return self._versions.get(channel, 0)

    def wait_change(self, channel: str, seen: int, timeout_s: float) -> int:
        check_name("channel", channel)
        deadline = time.monotonic() + max(0.0, timeout_s)
        with self._changed:
            while self._versions.get(channel, 0) == seen:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._changed.wait(left)
            return self._versions.get(channel, 0)

    @contextmanager
    def atomic(self, *locks: str) -> Iterator[None]:
        check_locks(locks)
        with self._lock:
            if self._depth:
                self._depth += 1
                try:
                    yield
                finally:
                    self._depth -= 1
                return
            saved = (dict(self._kv), copy.deepcopy(self._queues), dict(self._versions))
            self._depth = 1
            try:
                yield
            except BaseException:
                self._kv, self._queues, self._versions = saved
                raise
            finally:
                self._depth = 0

    def dump(self) -> Iterator[dict[str, Any]]:
        """Every key, queue entry (with its claim) and channel version, from one snapshot."""
        with self._lock:
            kv = sorted(self._kv.items())
            entries = sorted(
                (row[0], ns, queue, row[1], row[2], row[3])
                for (ns, queue), rows in self._queues.items()
                for row in rows
            )
            versions = sorted(self._versions.items())
        yield from join_records(((ns, key, raw) for (ns, key), raw in kv), entries, versions)

    def load(self, records: Iterable[Mapping[str, Any]], *, replace: bool = False) -> int:
        """Write exported records at once (see ``TransferableStore.load``)."""
        kv, queue, channels = split_records(records)
        with self._lock:
            if not replace and (self._kv or self._queues or self._versions):
                raise ValueError("the target store (memory:) is not empty")
            self._kv = {(ns, key): raw for ns, key, raw in kv}
            self._queues = {}
            for seq, ns, name, raw, owner, until in queue:
                self._queues.setdefault((ns, name), []).append([seq, raw, owner, until])
            self._versions = dict(channels)
            self._seq = max([self._seq, *(row[0] for row in queue)])
        return len(kv) + len(queue) + len(channels)

    def close(self) -> None:
        return None
