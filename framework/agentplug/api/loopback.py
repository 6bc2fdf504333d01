"""Loopback rules shared by the server (bind address) and the app (``Host``, ``Origin``)."""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

__all__ = ["host_header_is_loopback", "is_loopback_name", "origin_is_loopback"]


def is_loopback_name(name: str) -> bool:
    """Whether ``name`` (no port, no brackets) is ``localhost`` or a loopback address."""
    name = name.strip().rstrip(".").lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def host_header_is_loopback(value: str | None) -> bool:
    """Whether an HTTP ``Host`` header names the loopback interface.

    Accepts ``localhost``, ``127.x.y.z`` and ``[::1]``, each with an optional port. Any
    other name is refused: a DNS name an attacker controls can be rebound to 127.0.0.1,
    but the browser still sends that name in ``Host`` (DNS-rebinding protection).
    """
    if not value:
        return False
    value = value.strip()
    if value.startswith("["):
        end = value.find("]")
        if end < 0:
            return False
        name, rest = value[1:end], value[end + 1 :]
        if rest and not (rest.startswith(":") and rest[1:].isdigit()):
            return False
        return ":" in name and is_loopback_name(name)
    name, _, port = value.partition(":")
    if port and not port.isdigit():
        return False
    return is_loopback_name(name)


def origin_is_loopback(value: str) -> bool:
    """Whether a browser ``Origin`` header is a page served from the loopback interface."""
    try:
        parts = urlsplit(value.strip())
    except ValueError:
        return False
    return parts.scheme in {"http", "https"} and is_loopback_name(parts.hostname or "")
