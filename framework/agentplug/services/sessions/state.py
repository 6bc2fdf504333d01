"""The rules of session state: limits, store namespaces, errors and JSON helpers.

Everything the session services check before they store something: the size limits,
the store namespaces and key layout, the cleanup reasons, the errors, strict JSON
validation and the RFC 7396 merge patch.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any, Literal
from urllib.parse import quote, unquote

from agentplug.core.errors import AgentplugError
from agentplug.core.redaction import scrub, scrub_clipped
from agentplug.store.base import KEY_RULE, key_problem

__all__ = [
    "CLAIMS_NS",
    "CLEANUP_REASONS",
    "DELIVERED_KEY_RETENTION_MS",
    "DELIVERED_NS",
    "DESTRUCTIVE_REASONS",
    "EXT_NS",
    "INDEX_NS",
    "INJECTION_LEASE_MS",
    "MAX_EXTENSION_STATE_BYTES",
    "MAX_INJECTION_METADATA_BYTES",
    "MAX_INJECTION_TEXT_BYTES",
    "MAX_PENDING_PER_PLUGIN",
    "QUEUE_NS",
    "CleanupReason",
    "InjectionQueueFull",
    "SessionStateError",
    "UnknownExtensionError",
    "check_json",
    "check_name",
    "check_session_key",
    "ext_lock",
    "json_merge_patch",
    "json_size",
    "plain_json",
    "queue_lock",
    "split_store_key",
    "store_key",
]

CleanupReason = Literal["reset", "delete", "disable", "restart"]
CLEANUP_REASONS: frozenset[str] = frozenset({"reset", "delete", "disable", "restart"})
DESTRUCTIVE_REASONS = frozenset({"reset", "delete", "disable"})
"""The cleanup reasons that drop a session's state (``restart`` keeps it)."""

MAX_EXTENSION_STATE_BYTES = 16 * 1024
"""Largest serialised state of one extension in one session."""
MAX_INJECTION_TEXT_BYTES = 8 * 1024
"""Largest ``text`` of one next-turn injection (UTF-8)."""
MAX_INJECTION_METADATA_BYTES = 2 * 1024
"""Largest serialised ``metadata`` of one next-turn injection."""
MAX_PENDING_PER_PLUGIN = 32
"""Pending injections one plugin may have queued for one session."""
DELIVERED_KEY_RETENTION_MS = 24 * 60 * 60 * 1000
"""How long a delivered ``idempotency_key`` keeps collapsing later duplicates."""
INJECTION_LEASE_MS = 120_000
"""How long a turn holds the injections it claimed before acknowledging them.

Longer than the prompt hooks' default timeouts added up (``agent_turn_prepare``,
``before_model_resolve``, ``before_prompt_build``: 30 s each; ``before_agent_start``:
15 s), so a slow but live turn keeps its claim. A turn that crashed gives its entries
back this long after its claim. ``host.sessions.injection_lease_ms`` overrides it.
"""

EXT_NS = "session.ext"
"""Store namespace of extension state (key: session, plugin id, extension name)."""
QUEUE_NS = "session.injections"
"""Store namespace of the next-turn injection queues (one queue per session)."""
DELIVERED_NS = "session.injections.delivered"
"""Store namespace of delivered idempotency keys (session, plugin id, key)."""
INDEX_NS = "session.injections.sessions"
"""Store namespace of the sessions that ever had an injection queued."""
CLAIMS_NS = "session.injections.claims"
"""Store namespace of the claims turns hold on injections (session, owner)."""


def queue_lock(session_key: str) -> str:
    """The :meth:`StateStore.atomic` lock of one session's injection queue."""
    return f"session.injections:{session_key}"


def ext_lock(session_key: str) -> str:
    """The :meth:`StateStore.atomic` lock of one session's extension state."""
    return f"session.ext:{session_key}"


_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$")


class SessionStateError(AgentplugError, ValueError):
    """Invalid session state, patch or injection (not JSON, too large, bad argument)."""


class UnknownExtensionError(SessionStateError, LookupError):
    """A patch named an extension that the plugin never registered."""


class InjectionQueueFull(SessionStateError):
    """The plugin already has the maximum of pending injections for that session."""


def json_size(value: Any, what: str) -> int:
    """Bytes of ``value`` as compact JSON; :class:`SessionStateError` when not JSON-only."""
    check_json(value, what)
    return len(json.dumps(value, separators=(",", ":"), allow_nan=False).encode("utf-8"))


def check_json(value: Any, what: str, depth: int = 0) -> None:
    """Raise :class:`SessionStateError` (naming the path in ``what``) unless ``value`` is
    JSON-only: dicts with string keys, lists, tuples, strings, finite numbers, booleans,
    ``None``, at most 32 levels deep."""
    # Strict: only what JSON can express, so the state reads back exactly as written.
    if depth > 32:
        raise SessionStateError(f"{what} is nested too deeply (more than 32 levels)")
    if value is None or isinstance(value, bool | str):
        return
    if isinstance(value, int | float):
        if isinstance(value, float) and not math.isfinite(value):
            raise SessionStateError(f"{what} must be JSON-compatible: got a non-finite number")
        return
    if isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                raise SessionStateError(
                    f"{what} must be JSON-compatible: object keys must be strings, "
                    f"got {type(key).__name__}"
                )
            check_json(item, f"{what}.{key}", depth + 1)
        return
    if isinstance(value, list | tuple):
        for index, item in enumerate(value):
            check_json(item, f"{what}[{index}]", depth + 1)
        return
    raise SessionStateError(
        f"{what} must be JSON-compatible (dict, list, str, int, float, bool, None); "
        f"got {type(value).__name__}"
    )


def plain_json(value: Any) -> Any:
    """A plain JSON copy (frozen containers and tuples become dicts and lists)."""
    return json.loads(json.dumps(value, allow_nan=False))


def json_merge_patch(target: Any, patch: Any) -> Any:
    """Apply an RFC 7396 JSON merge patch: objects merge, ``None`` deletes a key."""
    if not isinstance(patch, Mapping):
        return plain_json(patch)
    result = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = json_merge_patch(result.get(key), value)
    return result


def store_key(*parts: str) -> str:
    """A store key made of ``parts`` (each percent-quoted, ``/``-separated, ``/``-ended)."""
    return "/".join(quote(part, safe="") for part in parts) + "/"


def split_store_key(key: str) -> list[str]:
    """The parts of a :func:`store_key`."""
    return [unquote(part) for part in key.rstrip("/").split("/")]


def check_name(value: Any, what: str) -> str:
    """``value`` when it is a valid extension name; else a :class:`SessionStateError`."""
    if not isinstance(value, str) or not _NAME.match(value):
        raise SessionStateError(
            f"{what} must be 1-64 characters of letters, digits, '_', '.', '-' "
            f"(not starting with '.' or '-'); got {value!r}"
        )
    return value


def check_session_key(session_key: Any) -> str:
    """``session_key`` when the store accepts it; else a :class:`SessionStateError`
    quoting (scrubbed, clipped) what was given."""
    problem = None
    if not isinstance(session_key, str) or not session_key or len(session_key) > 512:
        problem = "must be a non-empty string of at most 512 characters"
    elif key_problem(session_key) is not None:
        problem = f"{key_problem(session_key)} ({KEY_RULE})"
    if problem is not None:
        shown = repr(session_key)
        if len(shown) > 60:
            shown = f"{scrub_clipped(shown, 43)} ({len(shown)} characters)"
        shown = scrub(shown)
        raise SessionStateError(f"session_key {problem}; got {shown}")
    checked: str = session_key
    return checked
