"""Session services behind the hooks: extensions, next-turn injections, cleanup.

``api.session`` (what a plugin's ``register(api)`` sees) has three parts:

- ``api.session.state.register_session_extension(name, default=..., description=...)``
  declares small JSON-compatible per-session state owned by the plugin. The host
  changes it with :meth:`SessionServices.patch` (a JSON merge patch, RFC 7396), or
  several of one plugin's extensions at once with :func:`patch_plugin_extensions` (the
  control API's ``PATCH /api/sessions/{key}/plugins/{plugin_id}``), and projects it in
  :meth:`SessionServices.session_row` as ``plugin_extensions``.
- ``api.session.workflow.enqueue_next_turn_injection(session_key, text, ...)`` queues
  context for the next model turn. The turn runner claims the queue once, before the
  prompt hooks (:meth:`SessionServices.claim_injections`, under a lease of
  :data:`INJECTION_LEASE_MS`), and acknowledges the claim once the prompt is built
  (:meth:`SessionServices.ack_injections`): each entry reaches at least one prompt, even
  across a crash, expired entries are dropped, and a plugin's duplicates (same
  ``idempotency_key``) collapse to the first, also after it was delivered and across
  processes sharing one store (see :mod:`agentplug.services.sessions.injections`).
- ``api.session.on_cleanup(callback)`` receives ``reset``, ``delete``, ``disable`` or
  ``restart``. On reset/delete/disable the host deletes the plugin's session state and
  pending injections; on restart it keeps them. :func:`reset_session` resets one
  session for any entrance (``before_reset``, the cleanup, the transcript forgotten).

Everything lives in the gateway's store: with the SQLite store it survives restarts.

Decisions: a full per-plugin queue (:data:`MAX_PENDING_PER_PLUGIN` pending entries in
one session) *rejects* the new entry with :class:`InjectionQueueFull` instead of
dropping the oldest one, because a dropped entry would be a silent delivery failure of
something the plugin was told was queued. A plugin whose prompt injection is disabled
(``plugins.entries.<id>.hooks.allow_prompt_injection = false``) gets a receipt with
``accepted=False``; its entries already queued (by an earlier run) are dropped at drain.
"""

from __future__ import annotations

from agentplug.services.sessions.api import InjectionReceipt, SessionApi, SessionExtension
from agentplug.services.sessions.injections import InjectionClaim
from agentplug.services.sessions.patching import (
    ExtensionOwnerError,
    ExtensionStateTooLarge,
    patch_plugin_extensions,
    session_keys,
)
from agentplug.services.sessions.reset import ResetReport, reset_session
from agentplug.services.sessions.services import SessionServices
from agentplug.services.sessions.state import (
    CLEANUP_REASONS,
    DELIVERED_KEY_RETENTION_MS,
    INJECTION_LEASE_MS,
    MAX_EXTENSION_STATE_BYTES,
    MAX_INJECTION_METADATA_BYTES,
    MAX_INJECTION_TEXT_BYTES,
    MAX_PENDING_PER_PLUGIN,
    CleanupReason,
    InjectionQueueFull,
    SessionStateError,
    UnknownExtensionError,
    json_merge_patch,
)

__all__ = [
    "CLEANUP_REASONS",
    "DELIVERED_KEY_RETENTION_MS",
    "INJECTION_LEASE_MS",
    "MAX_EXTENSION_STATE_BYTES",
    "MAX_INJECTION_METADATA_BYTES",
    "MAX_INJECTION_TEXT_BYTES",
    "MAX_PENDING_PER_PLUGIN",
    "CleanupReason",
    "ExtensionOwnerError",
    "ExtensionStateTooLarge",
    "InjectionClaim",
    "InjectionQueueFull",
    "InjectionReceipt",
    "ResetReport",
    "SessionApi",
    "SessionExtension",
    "SessionServices",
    "SessionStateError",
    "UnknownExtensionError",
    "json_merge_patch",
    "patch_plugin_extensions",
    "reset_session",
    "session_keys",
]
