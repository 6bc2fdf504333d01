"""An in-process store with the same semantics as the durable ones (tests, no state dir)."""

from __future__ import annotations

import json
import threading
from typing import Any

from agentplug.store.base import _dump

__all__ = ["MemoryStore"]


class MemoryStore:
    """In-process store for tests (same semantics, nothing persisted)."""

    def __init__(self) -> None:
        self._kv: dict[tuple[str, str], str] = {}
        self._queues: dict[tuple[str, str], list[tuple[int, str]]] = {}
        self._seq = 0
        self._lock = threading.Lock()

    def get(self, namespace: str, key: str) -> Any | None:
        with self._lock:
            raw = self._kv.get((namespace, key))
        return None if raw is None else json.loads(raw)

    def put(self, namespace: str, key: str, value: Any) -> None:
        raw = _dump(value)
        with self._lock:
            self._kv[(namespace, key)] = raw

    def delete(self, namespace: str, key: str) -> bool:
        with self._lock:
            return self._kv.pop((namespace, key), None) is not None

    def items(self, namespace: str, prefix: str = "") -> list[tuple[str, Any]]:
        with self._lock:
            rows = [
                (k, json.loads(v))
                for (ns, k), v in self._kv.items()
                if ns == namespace and k.startswith(prefix)
            ]
        return sorted(rows, key=lambda kv: kv[0])

    def delete_prefix(self, namespace: str, prefix: str) -> int:
        with self._lock:
            doomed = [k for k in self._kv if k[0] == namespace and k[1].startswith(prefix)]
            for k in doomed:
                del self._kv[k]
        return len(doomed)

    def append(self, namespace: str, queue: str, value: Any) -> int:
        raw = _dump(value)
        with self._lock:
            self._seq += 1
            self._queues.setdefault((namespace, queue), []).append((self._seq, raw))
            return self._seq

    def drain(self, namespace: str, queue: str) -> list[Any]:
        with self._lock:
            rows = self._queues.pop((namespace, queue), [])
        return [json.loads(raw) for _, raw in rows]

    def peek(self, namespace: str, queue: str) -> list[Any]:
        with self._lock:
            rows = list(self._queues.get((namespace, queue), []))
        return [json.loads(raw) for _, raw in rows]

    def clear_queue(self, namespace: str, queue: str) -> int:
        with self._lock:
            return len(self._queues.pop((namespace, queue), []))

    def close(self) -> None:
        return None
