"""The state-store interface every backend implements, and its JSON encoding."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol, runtime_checkable

from agentplug.core.redaction import scrub_clipped

__all__ = [
    "KEY_RULE",
    "MAX_KEY_BYTES",
    "SCHEMA_VERSION",
    "Claimed",
    "StateStore",
    "StateStoreUnavailable",
    "StateUrlError",
    "StoreKeyError",
    "StoreLimitError",
    "TransferableStore",
    "check_key",
    "check_locks",
    "check_name",
    "dump_value",
    "key_problem",
]

SCHEMA_VERSION = 2
"""The layout version every durable backend migrates to (``agentplug state migrate``)."""


class StateStoreUnavailable(RuntimeError):
    """The state store could not be reached (within its retry budget).

    The message is one line naming the store (without credentials) and the cause.
    Callers that need a decision from the store fail closed on it: a tool call that
    needs an approval is blocked, never allowed.
    """


class StateUrlError(ValueError):
    """A state URL (``state.url``, ``$AGENTPLUG_STATE_URL``, ``--url``) that names no store
    agentplug can open: an unknown scheme, or PostgreSQL without the ``postgres`` extra.
    The message is one line naming the setting and the fix."""


MAX_KEY_BYTES = 1024
"""The longest namespace, key, queue, channel or owner name, in bytes of UTF-8.

Well below PostgreSQL's btree limit (about 2.7 KB for a whole index row), so a namespace
and a key of this size together still fit one index row on every backend."""


class StoreLimitError(ValueError):
    """The database refused a call past one of its own limits (a value too large for
    it): the same call fails every time, so it is never retried nor an outage."""


class StoreKeyError(ValueError):
    """A name given to the store breaks the key rule: it is not a string, holds a NUL
    character, is not valid Unicode, or is over :data:`MAX_KEY_BYTES` bytes of UTF-8.

    Raised before the store is touched, the same on every backend: never retried, never
    an outage. The message is one line naming the namespace, the name and the rule.
    """


KEY_RULE = f"names are at most {MAX_KEY_BYTES} bytes of UTF-8 without NUL characters"
"""The key rule in words (for error messages of the layers that check keys early)."""
_SHOWN_CHARS = 40


def key_problem(name: object, *, sized: bool = True) -> str | None:
    """What breaks the key rule in ``name`` (``None``: nothing). ``sized=False`` skips the
    length limit (lock names, which PostgreSQL hashes)."""
    if not isinstance(name, str):
        return f"is a {type(name).__name__}, not a string"
    if "\x00" in name:
        return "contains a NUL character"
    if (sized and len(name) > MAX_KEY_BYTES // 4) or not name.isascii():
        try:
            size = len(name.encode("utf-8"))
        except UnicodeEncodeError:
            return "is not valid Unicode (it holds a lone surrogate)"
        if sized and size > MAX_KEY_BYTES:
            return f"is {size} bytes"
    return None


def _shown(name: object) -> str:
    if isinstance(name, str):
        return repr(scrub_clipped(name, _SHOWN_CHARS + 3))
    return repr(name)


def check_name(field: str, name: object, *, sized: bool = True) -> None:
    """Raise :class:`StoreKeyError` unless ``name`` (a ``field``: ``channel``, ``owner``,
    ``lock``) follows the key rule."""
    problem = key_problem(name, sized=sized)
    if problem is not None:
        raise StoreKeyError(f"state store refused {field} {_shown(name)}: it {problem}; {KEY_RULE}")


def check_key(namespace: object, key: object, *, field: str = "key") -> None:
    """Raise :class:`StoreKeyError` unless ``namespace`` and ``key`` (or a ``queue`` name,
    or a ``prefix``) follow the key rule."""
    for what, name in (("namespace", namespace), (field, key)):
        problem = key_problem(name)
        if problem is not None:
            raise StoreKeyError(
                f"state store refused namespace {_shown(namespace)} {field} {_shown(key)}:"
                f" the {what} {problem}; {KEY_RULE}"
            )


def check_locks(locks: Iterable[object]) -> None:
    """Raise :class:`StoreKeyError` for a lock name of :meth:`StateStore.atomic` that is
    not a string without NUL (lock names have no length limit: PostgreSQL hashes them)."""
    for name in locks:
        check_name("lock", name, sized=False)


Claimed = tuple[int, Any]
"""One claimed queue entry: ``(seq, value)``; ``seq`` is what :meth:`StateStore.ack` takes."""


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

    def put_if_absent(self, namespace: str, key: str, value: Any) -> bool:
        """Store ``value`` unless ``key`` exists; ``True`` when this call stored it.

        One atomic step on every backend: of several processes racing on one key,
        exactly one gets ``True``.
        """
        ...

    def atomic(self, *locks: str) -> AbstractContextManager[None]:
        """One transaction around every call made on this store inside the block.

        Reads inside see one consistent state, and writes commit together or not at all
        (an exception rolls them back). ``locks`` name what the block reads and then
        writes (``"session.injections:<key>"``): two blocks holding the same lock never
        interleave, across threads and processes. SQLite takes its one write lock
        whatever the names; PostgreSQL takes a transaction-scoped advisory lock per
        name. Blocks nest: an inner ``atomic`` joins the outer transaction.
        """
        ...

    def claim(self, namespace: str, queue: str, *, owner: str, lease_ms: int) -> list[Claimed]:
        """Lease every unclaimed entry of ``queue`` (or whose lease ran out) to ``owner``.

        Returns ``(seq, value)`` pairs in append order. The entries stay in the queue
        (``peek`` still shows them) until :meth:`ack` removes them; if the owner never
        acknowledges (it crashed), they become claimable again ``lease_ms`` later. So
        delivery is at least once, and a crash between claim and use loses nothing.
        """
        ...

    def ack(self, namespace: str, queue: str, seqs: Sequence[int], *, owner: str) -> int:
        """Remove the entries ``owner`` still holds under lease; return how many.

        An entry whose lease expired and that another owner claimed since is left alone.
        """
        ...

    def release(self, namespace: str, queue: str, seqs: Sequence[int], *, owner: str) -> int:
        """Give back entries ``owner`` holds, unacknowledged; return how many.

        They keep their place in the queue and are claimable again at once (as if the
        lease had run out). Entries another owner holds are left alone.
        """
        ...

    def notify(self, channel: str) -> int:
        """Record a change on ``channel`` and wake its waiters; return the new version."""
        ...

    def version(self, channel: str) -> int:
        """How many times ``channel`` was notified (0 when never)."""
        ...

    def wait_change(self, channel: str, seen: int, timeout_s: float) -> int:
        """Block until ``channel``'s version differs from ``seen`` or ``timeout_s`` passes.

        Returns the version then current (``seen`` on a timeout). Waiters in other
        processes wake too (PostgreSQL ``LISTEN/NOTIFY``; polling elsewhere).
        """
        ...

    def close(self) -> None:
        """Release resources."""
        ...


@runtime_checkable
class TransferableStore(Protocol):
    """A store ``agentplug state export|import`` can copy (every built-in backend).

    Records are plain dicts, one of three kinds (the models of
    :mod:`agentplug.store.records`)::

        {"kind": "kv", "namespace": ..., "key": ..., "value": ...}
        {"kind": "queue", "namespace": ..., "queue": ..., "seq": 7, "value": ...,
         "claim_owner": "gw-1" or None, "claimed_until": 1700000000.5}
        {"kind": "channel", "channel": ..., "version": 3}
    """

    def dump(self) -> Iterator[dict[str, Any]]:
        """Every record, from one consistent snapshot: keys sorted by namespace then key,
        queue entries in sequence order with their claim, then channel versions."""
        ...

    def load(self, records: Iterable[Mapping[str, Any]], *, replace: bool = False) -> int:
        """Write ``records`` in one transaction, keeping queue sequence numbers and claims;
        return how many. Raises :class:`ValueError` when the store is not empty, unless
        ``replace`` (everything in it is removed first), and
        :class:`agentplug.store.records.BadRecords` (a ``ValueError``) naming every bad
        record before anything is written."""
        ...


def dump_value(value: Any) -> str:
    """``value`` as compact JSON text; :class:`TypeError` when it is not JSON-compatible
    (a set, an object, NaN or infinity)."""
    try:
        return json.dumps(value, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"state values must be JSON-compatible: {exc}") from None
