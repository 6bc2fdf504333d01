"""The gateway side of the session services (``gateway.sessions``).

:class:`SessionServices` keeps the extension declarations, stores and patches their
per-session state, queues and drains next-turn injections, and runs the cleanup
callbacks on reset, delete, disable and restart. Everything lives in the gateway's store.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Literal

from agentplug.core.registration import call_shape
from agentplug.services.sessions import injections as _injections
from agentplug.services.sessions.api import (
    ExtensionSpec,
    InjectionReceipt,
    SessionApi,
    SessionExtension,
)
from agentplug.services.sessions.injections import InjectionClaim
from agentplug.services.sessions.state import (
    CLAIMS_NS,
    CLEANUP_REASONS,
    DELIVERED_NS,
    DESTRUCTIVE_REASONS,
    EXT_NS,
    INDEX_NS,
    INJECTION_LEASE_MS,
    MAX_EXTENSION_STATE_BYTES,
    MAX_INJECTION_METADATA_BYTES,
    MAX_INJECTION_TEXT_BYTES,
    MAX_PENDING_PER_PLUGIN,
    QUEUE_NS,
    CleanupReason,
    InjectionQueueFull,
    SessionStateError,
    UnknownExtensionError,
    check_json,
    check_name,
    check_session_key,
    ext_lock,
    json_merge_patch,
    json_size,
    plain_json,
    queue_lock,
    split_store_key,
    store_key,
)
from agentplug.store import StateStore

if TYPE_CHECKING:
    from agentplug.core.host import HookHost, PluginRecord

__all__ = ["SessionServices"]

log = logging.getLogger("agentplug.sessions")


class SessionServices:
    """The session services of one gateway (``gateway.sessions``): extensions,
    next-turn injections and cleanup callbacks, kept in ``store``."""

    def __init__(self, host: HookHost, store: StateStore) -> None:
        self.host = host
        self.store: StateStore = store
        """Where session state lives (the gateway's store)."""
        self.clock: Callable[[], float] = time.time
        """Wall clock in seconds (tests replace it to expire injections)."""
        self._extensions: dict[tuple[str, str], ExtensionSpec] = {}
        self._cleanups: dict[str, list[Callable[..., Any]]] = {}
        self._apis: dict[str, SessionApi] = {}
        self._owners: dict[str, object] = {}
        self._lock = threading.RLock()
        self._gate_warned: set[str] = set()
        self.injection_lease_ms: int = INJECTION_LEASE_MS
        """Lease of a turn's claim on its injections (see :meth:`claim_injections`)."""

    def _now_ms(self) -> int:
        return int(self.clock() * 1000)

    def api_for(self, record: PluginRecord | str) -> SessionApi:
        """The ``api.session`` object of one plugin.

        A new registration of the same plugin id (a reload after ``unregister``) starts
        afresh: the previous registration's extension declarations and cleanup
        callbacks are forgotten (its stored state is kept).
        """
        if isinstance(record, str):
            plugin_id = record
        else:
            plugin_id = record.plugin_id
            # The record object itself (not its id(), which could be reused).
            if self._owners.get(plugin_id) is not record:
                if plugin_id in self._owners:
                    self._forget(plugin_id)
                self._owners[plugin_id] = record
        api = self._apis.get(plugin_id)
        if api is None:
            api = self._apis[plugin_id] = SessionApi(self, plugin_id)
        return api

    def _forget(self, plugin_id: str) -> None:
        with self._lock:
            for key in [k for k in self._extensions if k[0] == plugin_id]:
                del self._extensions[key]
            self._cleanups.pop(plugin_id, None)
            self._apis.pop(plugin_id, None)

    # -- extensions -------------------------------------------------------------------

    def register_extension(
        self,
        plugin_id: str,
        name: str,
        *,
        default: Any = None,
        description: str = "",
        cleanup: Callable[..., Any] | None = None,
    ) -> SessionExtension:
        """Declare an extension of ``plugin_id`` (see ``api.session.state``)."""
        where = f"plugin {plugin_id!r}: session extension {name!r}"
        check_name(name, f"{where}: name")
        size = json_size(default, f"{where}: default")
        if size > MAX_EXTENSION_STATE_BYTES:
            raise SessionStateError(
                f"{where}: default is {size} bytes; the limit is {MAX_EXTENSION_STATE_BYTES}"
            )
        if not isinstance(description, str):
            raise SessionStateError(f"{where}: description must be a string")
        if cleanup is not None and not callable(cleanup):
            raise SessionStateError(f"{where}: cleanup must be callable")
        with self._lock:
            if (plugin_id, name) in self._extensions:
                raise SessionStateError(f"{where} is already registered")
            spec = ExtensionSpec(plugin_id, name, plain_json(default), description, cleanup)
            self._extensions[(plugin_id, name)] = spec
        return SessionExtension(self, spec)

    def extensions(self, plugin_id: str | None = None) -> list[dict[str, Any]]:
        """Registered extensions: ``{plugin_id, name, description, default}``."""
        return [
            {
                "plugin_id": s.plugin_id,
                "name": s.name,
                "description": s.description,
                "default": plain_json(s.default),
            }
            for s in self._extensions.values()
            if plugin_id is None or s.plugin_id == plugin_id
        ]

    def _spec(self, plugin_id: str, name: str) -> ExtensionSpec:
        spec = self._extensions.get((plugin_id, name))
        if spec is None:
            known = sorted(n for p, n in self._extensions if p == plugin_id)
            raise UnknownExtensionError(
                f"plugin {plugin_id!r} registered no session extension {name!r} "
                f"(registered: {known or 'none'}); register it with "
                "api.session.state.register_session_extension(...)"
            )
        return spec

    def get_state(self, session_key: str, plugin_id: str, name: str) -> Any:
        """The state of one extension in one session (its default when never set)."""
        spec = self._spec(plugin_id, name)
        stored = self.store.get(EXT_NS, store_key(check_session_key(session_key), plugin_id, name))
        return plain_json(spec.default) if stored is None else stored

    def patch(self, session_key: str, plugin_id: str, name: str, patch: Mapping[str, Any]) -> Any:
        """Apply a JSON merge patch to one extension's state; return the new state.

        Raises :class:`UnknownExtensionError` for an unregistered extension and
        :class:`SessionStateError` for a patch (or result) that is not JSON-only or
        exceeds :data:`MAX_EXTENSION_STATE_BYTES`.
        """
        spec = self._spec(plugin_id, name)
        check_session_key(session_key)
        where = f"patch of {plugin_id!r}/{name!r}"
        if not isinstance(patch, Mapping):
            raise SessionStateError(
                f"{where}: a patch must be a JSON object, got {type(patch).__name__}"
            )
        check_json(patch, where)
        # One transaction: two processes patching the same state both land.
        with self.store.atomic(ext_lock(session_key)):
            key = store_key(session_key, plugin_id, name)
            current = self.store.get(EXT_NS, key)
            if current is None:
                current = plain_json(spec.default)
            state = json_merge_patch(current, patch)
            size = json_size(state, where)
            if size > MAX_EXTENSION_STATE_BYTES:
                raise SessionStateError(
                    f"{where}: the state would be {size} bytes; the limit is "
                    f"{MAX_EXTENSION_STATE_BYTES}"
                )
            self.store.put(EXT_NS, key, state)
        return state

    def session_row(self, session_key: str) -> dict[str, Any]:
        """``{"session_key", "plugin_extensions": {plugin_id: {name: state}}}``.

        Every registered extension appears (with its default when never patched).
        """
        check_session_key(session_key)
        stored = {
            tuple(split_store_key(k)[1:3]): v
            for k, v in self.store.items(EXT_NS, store_key(session_key))
        }
        projection: dict[str, dict[str, Any]] = {}
        for (plugin_id, name), spec in sorted(self._extensions.items()):
            value = stored.get((plugin_id, name))
            projection.setdefault(plugin_id, {})[name] = (
                plain_json(spec.default) if value is None else value
            )
        return {"session_key": session_key, "plugin_extensions": projection}

    # -- next-turn injections ---------------------------------------------------------

    def prompt_injection_allowed(self, plugin_id: str) -> bool:
        """``False`` when ``plugins.entries.<id>.hooks.allow_prompt_injection = false``."""
        return self.host.config.entry(plugin_id).hooks.allow_prompt_injection is not False

    def enqueue_injection(
        self,
        plugin_id: str,
        session_key: str,
        text: str,
        *,
        placement: Literal["prepend", "append"] = "prepend",
        ttl_ms: int | None = None,
        idempotency_key: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> InjectionReceipt:
        """Queue ``text`` for the next turn of ``session_key`` (see ``api.session``)."""
        where = f"plugin {plugin_id!r}: enqueue_next_turn_injection"
        check_session_key(session_key)
        if not isinstance(text, str) or not text.strip():
            raise SessionStateError(f"{where}: text must be a non-empty string")
        size = len(text.encode("utf-8"))
        if size > MAX_INJECTION_TEXT_BYTES:
            raise SessionStateError(
                f"{where}: text is {size} bytes; the limit is {MAX_INJECTION_TEXT_BYTES}"
            )
        if placement not in ("prepend", "append"):
            raise SessionStateError(f"{where}: placement must be 'prepend' or 'append'")
        if ttl_ms is not None and (
            isinstance(ttl_ms, bool) or not isinstance(ttl_ms, int) or ttl_ms <= 0
        ):
            raise SessionStateError(f"{where}: ttl_ms must be a positive integer")
        if idempotency_key is not None and (
            not isinstance(idempotency_key, str) or not 0 < len(idempotency_key) <= 200
        ):
            raise SessionStateError(f"{where}: idempotency_key must be 1-200 characters")
        if metadata is not None:
            if not isinstance(metadata, Mapping):
                raise SessionStateError(f"{where}: metadata must be a JSON object")
            msize = json_size(metadata, f"{where}: metadata")
            if msize > MAX_INJECTION_METADATA_BYTES:
                raise SessionStateError(
                    f"{where}: metadata is {msize} bytes; the limit is "
                    f"{MAX_INJECTION_METADATA_BYTES}"
                )
        if not self.prompt_injection_allowed(plugin_id):
            if plugin_id not in self._gate_warned:
                self._gate_warned.add(plugin_id)
                log.warning(
                    "plugin %s: next-turn injection not queued: disabled by "
                    "plugins.entries.%s.hooks.allow_prompt_injection = false",
                    plugin_id,
                    plugin_id,
                )
            return InjectionReceipt(accepted=False, reason="prompt_injection_disabled")
        now = self._now_ms()
        entry = {
            "id": uuid.uuid4().hex,
            "plugin_id": plugin_id,
            "text": text,
            "placement": placement,
            "idempotency_key": idempotency_key,
            "metadata": plain_json(dict(metadata)) if metadata is not None else None,
            "enqueued_at_ms": now,
            "expires_at_ms": now + ttl_ms if ttl_ms is not None else None,
        }
        outcome = _injections.enqueue(self, session_key, entry)
        if isinstance(outcome, str):
            return InjectionReceipt(accepted=True, id=outcome, duplicate=True)
        if isinstance(outcome, int):
            raise InjectionQueueFull(
                f"{where}: {outcome} injections are already pending for this "
                f"session (limit {MAX_PENDING_PER_PLUGIN}); the new one was rejected"
            )
        return InjectionReceipt(accepted=True, id=entry["id"])

    def pending_injections(self, session_key: str) -> list[dict[str, Any]]:
        """What the next claim would deliver.

        Expired and gated entries, later duplicates of an idempotency key and entries
        under a live claim of a turn (in any process) are left out.
        """
        check_session_key(session_key)
        return _injections.pending(self, session_key)

    def claim_injections(self, session_key: str, *, lease_ms: int | None = None) -> InjectionClaim:
        """Claim the deliverable injections of ``session_key`` for one turn.

        The entries stay in the store, leased to a new owner for ``lease_ms``
        (default :attr:`injection_lease_ms`): no other turn, in this process or
        another, gets them while the lease is live. Call :meth:`ack_injections` once
        the prompt that uses them is built; without it (the turn failed or the process
        crashed) they return to the queue when the lease runs out. Expired entries,
        entries of plugins whose prompt injection is disabled and entries whose
        idempotency key was already delivered are dropped here, in the same
        transaction.
        """
        check_session_key(session_key)
        lease = self.injection_lease_ms if lease_ms is None else lease_ms
        if isinstance(lease, bool) or not isinstance(lease, int) or lease <= 0:
            raise SessionStateError(
                f"claim_injections: lease_ms must be a positive integer, got {lease!r}"
            )
        return _injections.claim(self, session_key, lease)

    def ack_injections(self, claim: InjectionClaim) -> int:
        """Acknowledge a claim: its entries were put into a prompt.

        Removes them from the queue and marks their idempotency keys delivered (for
        :data:`DELIVERED_KEY_RETENTION_MS`) in one transaction; returns how many entries
        this claim still held (fewer when its lease ran out and another turn claimed
        them, or the session was reset meanwhile).
        """
        return _injections.ack(self, claim)

    def release_injections(self, claim: InjectionClaim, *, after_failure: bool = False) -> int:
        """Give a claim back unused (the turn failed before its prompt was built).

        The entries are claimable again at once, in their place; nothing is marked
        delivered. Returns how many entries the claim still held. ``after_failure``
        (called while the turn's own error propagates): a store error here is logged,
        not raised, so it never replaces that error (or a cancellation); the claim's
        lease gives the entries back when it runs out.
        """
        if not after_failure:
            return _injections.release(self, claim)
        try:
            return _injections.release(self, claim)
        except Exception as exc:
            log.warning(
                "session %s: could not give %d injection(s) back (%s: %s); they return "
                "when the claim's lease runs out",
                claim.session_key,
                len(claim.seqs),
                type(exc).__name__,
                exc,
            )
            return 0

    def drain_injections(self, session_key: str) -> list[dict[str, Any]]:
        """Claim and acknowledge at once: remove and return the deliverable injections.

        For callers that use the entries right away. A turn that builds a prompt from
        them should use :meth:`claim_injections` and :meth:`ack_injections` instead, so
        that a crash in between loses nothing.
        """
        claim = self.claim_injections(session_key)
        self.ack_injections(claim)
        return claim.entries

    # -- cleanup ----------------------------------------------------------------------

    def add_cleanup(self, plugin_id: str, callback: Callable[..., Any]) -> None:
        """Register a cleanup callback of ``plugin_id`` (see ``api.session.on_cleanup``)."""
        if not callable(callback):
            raise TypeError(f"plugin {plugin_id!r}: on_cleanup needs a callable")
        self._cleanups.setdefault(plugin_id, []).append(callback)

    def _plugins(self) -> list[str]:
        owners = {p for p, _ in self._extensions} | set(self._cleanups)
        return sorted(owners)

    def cleanup(self, session_key: str, reason: CleanupReason) -> None:
        """A session was reset, deleted or its runtime restarted.

        Calls every plugin's cleanup callbacks with ``(reason, session_key)``; on
        ``reset``/``delete`` then deletes every plugin's state and pending injections of
        that session (``restart`` keeps them).
        """
        check_session_key(session_key)
        if reason not in CLEANUP_REASONS or reason == "disable":
            raise ValueError(
                f"session cleanup reason must be 'reset', 'delete' or 'restart'; got "
                f"{reason!r} (use cleanup_plugin(plugin_id, 'disable') to disable a plugin)"
            )
        for plugin_id in self._plugins():
            self._call_cleanups(plugin_id, reason, session_key)
        if reason in DESTRUCTIVE_REASONS:
            with self.store.atomic(ext_lock(session_key), queue_lock(session_key)):
                self.store.delete_prefix(EXT_NS, store_key(session_key))
                self.store.clear_queue(QUEUE_NS, session_key)
                self.store.delete_prefix(CLAIMS_NS, store_key(session_key))
                self.store.delete_prefix(DELIVERED_NS, store_key(session_key))
                self.store.delete(INDEX_NS, store_key(session_key))

    def cleanup_plugin(self, plugin_id: str, reason: CleanupReason) -> None:
        """A plugin was disabled (or its runtime restarted), in every session.

        ``disable`` deletes the plugin's state and pending injections everywhere and
        forgets its extension declarations and callbacks (it registers them again when
        re-enabled); ``restart`` only calls the callbacks. ``reset``/``delete`` delete too.
        """
        if reason not in CLEANUP_REASONS:
            raise ValueError(f"cleanup reason must be one of {sorted(CLEANUP_REASONS)}")
        self._call_cleanups(plugin_id, reason, None)
        if reason not in DESTRUCTIVE_REASONS:
            return
        if reason == "disable":
            self._forget(plugin_id)
        store = self.store
        for key, _ in store.items(EXT_NS):
            if split_store_key(key)[1] == plugin_id:
                with store.atomic(ext_lock(split_store_key(key)[0])):
                    store.delete(EXT_NS, key)
        for key, _ in store.items(DELIVERED_NS):
            if split_store_key(key)[1] == plugin_id:
                store.delete(DELIVERED_NS, key)
        for index_key, _ in store.items(INDEX_NS):
            session_key = split_store_key(index_key)[0]
            with store.atomic(queue_lock(session_key)):
                # Claim, ack this plugin's entries, release the rest: the others keep
                # their place, and turns keep their live claims.
                owner = f"cleanup-{uuid.uuid4().hex}"
                claimed = store.claim(QUEUE_NS, session_key, owner=owner, lease_ms=60_000)
                doomed = [
                    seq
                    for seq, e in claimed
                    if not isinstance(e, dict) or e.get("plugin_id") == plugin_id
                ]
                store.ack(QUEUE_NS, session_key, doomed, owner=owner)
                kept = [seq for seq, _ in claimed if seq not in set(doomed)]
                store.release(QUEUE_NS, session_key, kept, owner=owner)
                if not store.peek(QUEUE_NS, session_key):
                    store.delete(INDEX_NS, index_key)

    def restart(self) -> None:
        """The runtime restarts: every plugin's callbacks get ``restart``; state is kept."""
        for plugin_id in self._plugins():
            self._call_cleanups(plugin_id, "restart", None)

    def _call_cleanups(self, plugin_id: str, reason: str, session_key: str | None) -> None:
        callbacks = list(self._cleanups.get(plugin_id, ()))
        callbacks += [
            s.cleanup for s in self._extensions.values() if s.plugin_id == plugin_id and s.cleanup
        ]
        for callback in callbacks:
            try:
                result = _call_flexible(callback, reason, session_key)
                if inspect.isawaitable(result):
                    self._settle(result, plugin_id)
            except Exception as exc:
                log.warning(
                    "plugin %s: session cleanup callback (%s) failed: %s",
                    plugin_id,
                    reason,
                    type(exc).__name__,
                )

    def _settle(self, awaitable: Any, plugin_id: str) -> None:
        async def run() -> None:
            try:
                await awaitable
            except Exception as exc:
                log.warning(
                    "plugin %s: async session cleanup callback failed: %s",
                    plugin_id,
                    type(exc).__name__,
                )

        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            asyncio.run(run())
            return
        task = loop.create_task(run())
        self.host.tracker.track(task, f"{plugin_id}:session_cleanup")


def _call_flexible(callback: Callable[..., Any], reason: str, session_key: str | None) -> Any:
    # A defaulted parameter keeps its default (``lambda reason, tag=tag: ...``), as for hooks.
    shape = call_shape(callback)
    if shape is not None and len(shape.required) == 1 and not shape.var_positional:
        return callback(reason)
    return callback(reason, session_key)
