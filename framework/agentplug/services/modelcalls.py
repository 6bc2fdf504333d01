"""Model-call telemetry helpers: the bounded, keyed hash of a provider request id.

``model_call_started`` / ``model_call_ended`` never carry raw provider request ids
(HOOKS.md "Conversation observation"). A host that wants to correlate a call with the
provider's logs passes ``upstream_request_id_hash(request_id)`` instead: an HMAC-SHA256
of the id, truncated to a fixed length. The key is random per process unless the host
gives its own (``key=``, e.g. from its secret store, to correlate across processes).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

from agentplug_hookspecs.agent import MAX_REQUEST_ID_HASH_CHARS

__all__ = ["MAX_REQUEST_ID_HASH_CHARS", "REQUEST_ID_HASH_CHARS", "upstream_request_id_hash"]

REQUEST_ID_HASH_CHARS = 32
"""Length (hex digits, 128 bits) of the hashes this module produces."""
_MAX_INPUT_BYTES = 4096
_PROCESS_KEY = secrets.token_bytes(32)


def upstream_request_id_hash(request_id: str, *, key: bytes | None = None) -> str:
    """A bounded keyed hash of ``request_id`` for ``model_call_*`` events.

    The same id and key give the same hash; without the key the id cannot be
    recovered or confirmed by guessing. Ids longer than 4 KiB are hashed on their first
    4 KiB (a provider id is far shorter).
    """
    data = str(request_id).encode("utf-8")[:_MAX_INPUT_BYTES]
    digest = hmac.new(key if key is not None else _PROCESS_KEY, data, hashlib.sha256)
    return digest.hexdigest()[:REQUEST_ID_HASH_CHARS]
