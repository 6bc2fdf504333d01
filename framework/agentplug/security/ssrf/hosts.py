"""URL host parsing for the SSRF guard: every spelling a resolver accepts, read as what it denotes.

Holds the :data:`IPAddress` alias, :func:`parse_host_address` (bracketed IPv6 with zone ids,
numeric IPv4 spellings such as ``2130706433``, ``0x7f.1``, ``0177.0.0.1``, ``127.1``), host
canonicalisation and the parsing of ``allowHosts`` entries.
"""

from __future__ import annotations

import ipaddress
import re

__all__ = [
    "HOST_NAME_RE",
    "POLICY_KEY_CIDRS",
    "POLICY_KEY_HOSTS",
    "IPAddress",
    "canonical_host",
    "parse_host_address",
    "split_allow_entry",
    "strip_host",
]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
"""Either kind of IP address, as produced by :func:`parse_host_address`."""


POLICY_KEY_HOSTS = "allowHosts"
"""The policy key listing allowed hosts (named in error messages and hints)."""
POLICY_KEY_CIDRS = "allowCidrs"
"""The policy key listing allowed networks."""


# Host names are reduced to this alphabet before any lookup: percent-escapes, backslashes,
# spaces or '@' in a host are parser-confusion tricks, never legitimate DNS names.
HOST_NAME_RE = re.compile(r"^[a-z0-9_-]+(\.[a-z0-9_-]+)*$")
_ZONE_RE = re.compile(r"^[A-Za-z0-9_.-]+$")


def strip_host(host: str) -> str:
    """Lower-case, drop IPv6 brackets and trailing dots (``localhost.`` is ``localhost``)."""
    value = host.strip().lower()
    if value.startswith("[") and value.endswith("]"):
        value = value[1:-1]
    if ":" not in value:
        value = value.rstrip(".")
    return value


def _parse_ipv4_number(part: str) -> int | None:
    """Parse one dotted component the way ``inet_aton`` does: hex ``0x``, octal ``0``, decimal."""
    if part[:2] in ("0x", "0X"):
        digits = part[2:]
        if digits == "":
            return 0  # inet_aton and the WHATWG URL parser both read a bare "0x" as zero
        return int(digits, 16) if all(c in "0123456789abcdefABCDEF" for c in digits) else None
    if len(part) > 1 and part[0] == "0":
        return int(part, 8) if all(c in "01234567" for c in part) else None
    return int(part) if part.isascii() and part.isdigit() else None


def _parse_ipv4_loose(host: str) -> ipaddress.IPv4Address | None:
    """Read every numeric IPv4 spelling a resolver would accept (1 to 4 parts, any base).

    ``127.1`` -> 127.0.0.1, ``2130706433`` -> 127.0.0.1, ``0x7f.1`` -> 127.0.0.1: the last
    part fills all remaining bytes, exactly as ``inet_aton`` (and thus ``getaddrinfo``) does.
    """
    parts = host.split(".")
    if not 1 <= len(parts) <= 4 or any(p == "" for p in parts):
        return None
    numbers: list[int] = []
    for part in parts:
        number = _parse_ipv4_number(part)
        if number is None:
            return None
        numbers.append(number)
    *head, last = numbers
    if any(n > 0xFF for n in head) or last >= 1 << (8 * (4 - len(head))):
        return None
    value = last
    for index, number in enumerate(head):
        value |= number << (8 * (3 - index))
    return ipaddress.IPv4Address(value)


def _split_zone(host: str) -> tuple[str, str | None]:
    """Separate an IPv6 zone id (``fe80::1%eth0``, or ``%25eth0`` as it appears in URLs)."""
    for marker in ("%25", "%"):
        if marker in host:
            address, zone = host.split(marker, 1)
            return address, zone
    return host, None


def parse_host_address(host: str) -> IPAddress | None:
    """Return the IP address a URL host denotes, or ``None`` when it is a name.

    Accepts bracketed IPv6 with zone ids and every numeric IPv4 spelling that ``getaddrinfo``
    would accept, so the guard sees the same address a connect would reach.
    """
    value = strip_host(host)
    if ":" in value:
        address, zone = _split_zone(value)
        if zone is not None and not _ZONE_RE.match(zone):
            return None
        try:
            return ipaddress.IPv6Address(address)
        except ValueError:
            return None
    return _parse_ipv4_loose(value)


def canonical_host(host: str) -> str:
    """Compare hosts by what they denote: numeric spellings collapse to the plain address."""
    address = parse_host_address(host)
    return str(address) if address is not None else strip_host(host)


def split_allow_entry(entry: str) -> tuple[str, int | None]:
    """Split an ``allowHosts`` entry into ``(canonical host, port or None)``."""
    text = entry.strip()
    host, port_text = text, ""
    if text.startswith("["):
        closing = text.find("]")
        if closing == -1:
            raise ValueError(f"{POLICY_KEY_HOSTS} entry {entry!r} opens '[' without ']'")
        host, rest = text[: closing + 1], text[closing + 1 :]
        if rest and not rest.startswith(":"):
            raise ValueError(f"{POLICY_KEY_HOSTS} entry {entry!r}: expected ':port' after ']'")
        port_text = rest[1:]
    elif text.count(":") == 1:
        host, port_text = text.split(":")
    if not host:
        raise ValueError(f"{POLICY_KEY_HOSTS} entry {entry!r} has no host")
    port: int | None = None
    if port_text:
        if not port_text.isdigit() or not 0 < int(port_text) < 65536:
            raise ValueError(
                f"{POLICY_KEY_HOSTS} entry {entry!r}: port must be 1-65535 "
                "(use 'host' or 'host:port', IPv6 as '[::1]:8080')"
            )
        port = int(port_text)
    return canonical_host(host), port
