"""The state-store interface every backend implements, and its JSON encoding."""

from __future__ import annotations

import json
from typing import Any, Protocol, runtime_checkable

__all__ = ["StateStore"]


@runtime_checkable
class StateStore(Protocol):
    """Namespaced JSON key/value store with atomic batches and append-only queues."""

    def get(self, namespace: str, key: str) -> Any | None:
        """The value at ``key`` or ``None``."""
        ...

    def put(self, namespace: str, key: str, value: Any) -> None:
        """Store ``value`` (JSON-compatible) at ``key``."""
        ...

    def delete(self, namespace: str, key: str) -> bool:
        """Remove ``key``; ``True`` when it existed."""
        ...

    def items(self, namespace: str, prefix: str = "") -> list[tuple[str, Any]]:
        """``(key, value)`` pairs whose key starts with ``prefix``, sorted by key."""
        ...

    def delete_prefix(self, namespace: str, prefix: str) -> int:
        """Remove every key starting with ``prefix``; return how many."""
        ...

    def append(self, namespace: str, queue: str, value: Any) -> int:
        """Append ``value`` to ``queue``; return its sequence number."""
        ...

    def drain(self, namespace: str, queue: str) -> list[Any]:
        """Remove and return every value of ``queue`` in append order (atomically)."""
        ...

    def peek(self, namespace: str, queue: str) -> list[Any]:
        """Every value of ``queue`` in order, without removing it."""
        ...

    def clear_queue(self, namespace: str, queue: str) -> int:
        """Remove every value of ``queue``; return how many."""
        ...

    def close(self) -> None:
        """Release resources."""
        ...


def _dump(value: Any) -> str:
    try:
        return json.dumps(value, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"state values must be JSON-compatible: {exc}") from None
