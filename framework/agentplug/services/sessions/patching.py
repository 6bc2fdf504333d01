"""The host's patch operation over one plugin's session extensions, and the session list.

:func:`patch_plugin_extensions` is the equivalent of the seed's ``sessions.pluginPatch``:
a JSON merge patch (RFC 7396) over ``plugin_extensions[plugin_id]`` of one session row,
``{"<extension>": <merge patch of its state>}``; ``null`` for an extension puts it back
to its default. Every extension named must be registered by ``plugin_id`` (the owning
plugin); the whole patch is checked before anything is written, so a refused patch
changes nothing. :func:`session_keys` lists the sessions that hold extension state or
pending injections (what ``GET /api/sessions`` shows).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from agentplug.services.sessions.state import (
    EXT_NS,
    INDEX_NS,
    MAX_EXTENSION_STATE_BYTES,
    SessionStateError,
    UnknownExtensionError,
    check_json,
    check_session_key,
    ext_lock,
    json_merge_patch,
    json_size,
    plain_json,
    split_store_key,
    store_key,
)

if TYPE_CHECKING:
    from agentplug.services.sessions.services import SessionServices

__all__ = [
    "ExtensionOwnerError",
    "ExtensionStateTooLarge",
    "patch_plugin_extensions",
    "session_keys",
]


class ExtensionOwnerError(SessionStateError, PermissionError):
    """A patch named an extension that another plugin owns."""


class ExtensionStateTooLarge(SessionStateError):
    """A patch would make an extension's state larger than the limit."""


def session_keys(services: SessionServices) -> list[str]:
    """Sessions with stored extension state or pending injections, sorted."""
    keys = {split_store_key(key)[0] for key, _ in services.store.items(EXT_NS)}
    keys |= {split_store_key(key)[0] for key, _ in services.store.items(INDEX_NS)}
    return sorted(keys)


def patch_plugin_extensions(
    services: SessionServices, session_key: str, plugin_id: str, patch: Mapping[str, Any]
) -> dict[str, Any]:
    """Apply ``patch`` to ``plugin_id``'s extensions in ``session_key``; return the new
    ``{extension: state}`` of that plugin (every registered extension, defaults included).

    Raises :class:`UnknownExtensionError` for a name nobody registered,
    :class:`ExtensionOwnerError` for a name another plugin owns,
    :class:`ExtensionStateTooLarge` past :data:`MAX_EXTENSION_STATE_BYTES` and
    :class:`SessionStateError` for a patch that is not a JSON object.
    """
    check_session_key(session_key)
    where = f"patch of plugin {plugin_id!r} in session {session_key!r}"
    if not isinstance(patch, Mapping):
        raise SessionStateError(f"{where}: must be a JSON object of extension names")
    check_json(patch, where)
    owned = {spec["name"] for spec in services.extensions(plugin_id)}
    for name in patch:
        if name in owned:
            continue
        owners = sorted(s["plugin_id"] for s in services.extensions() if s["name"] == name)
        if owners:
            raise ExtensionOwnerError(
                f"{where}: extension {name!r} belongs to plugin {owners[0]!r}, not "
                f"{plugin_id!r}; patch it under /plugins/{owners[0]}"
            )
        raise UnknownExtensionError(
            f"{where}: plugin {plugin_id!r} registered no session extension {name!r} "
            f"(registered: {sorted(owned) or 'none'})"
        )
    with services.store.atomic(ext_lock(session_key)):
        current = {name: services.get_state(session_key, plugin_id, name) for name in owned}
        writes: dict[str, Any] = {}
        for name, change in patch.items():
            state = (
                services._spec(plugin_id, name).default
                if change is None
                else json_merge_patch(current[name], change)
            )
            size = json_size(state, f"{where}: {name}")
            if size > MAX_EXTENSION_STATE_BYTES:
                raise ExtensionStateTooLarge(
                    f"{where}: extension {name!r} would be {size} bytes; the limit is "
                    f"{MAX_EXTENSION_STATE_BYTES}"
                )
            writes[name] = None if change is None else state
        for name, state in writes.items():
            key = store_key(session_key, plugin_id, name)
            if state is None:
                services.store.delete(EXT_NS, key)
                current[name] = plain_json(services._spec(plugin_id, name).default)
            else:
                services.store.put(EXT_NS, key, state)
                current[name] = state
    return {name: current[name] for name in sorted(current)}
