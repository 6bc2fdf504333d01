"""SSRF guard for outbound HTTP requests made on behalf of agent actions.

Custom ``http`` actions (and the ``fetch`` exposed to sandboxed code) let configuration and
model output choose a URL. Without a guard such a URL can reach the host's loopback services,
the private network or a cloud metadata endpoint. This module blocks those targets:

* The URL host is classified before anything is sent: numeric spellings that a resolver would
  accept (``2130706433``, ``0x7f.1``, ``0177.0.0.1``, ``127.1``) are read as the addresses they
  denote, names such as ``localhost`` or ``metadata.google.internal`` are blocked by name.
* DNS is resolved once per TCP connection, *every* answer is checked, and the socket connects
  to one of exactly those checked addresses (DNS pinning). A second lookup between check and
  connect, which is what DNS rebinding exploits, never happens. TLS SNI and the ``Host`` header
  still carry the URL's hostname because the pinning lives in the httpcore network backend,
  below the layer that builds requests and TLS sessions.
* Redirects are reported, never followed; environment proxies are ignored; the response body is
  streamed and cut at a byte limit; the whole exchange is bounded in time.

An operator allowlist (``allowHosts`` / ``allowCidrs`` in :class:`SSRFPolicy`) admits specific
internal targets, for example the host's own API port.
"""

from __future__ import annotations

import asyncio
import ipaddress
import re
import socket
import zlib
from collections.abc import (
    AsyncIterable,
    AsyncIterator,
    Awaitable,
    Callable,
    Iterable,
    Iterator,
    Mapping,
)
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit

import httpcore
import httpx
from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic.alias_generators import to_camel

__all__ = [
    "Connector",
    "FetchError",
    "FetchResult",
    "IPAddress",
    "Resolver",
    "SSRFBlocked",
    "SSRFPolicy",
    "blocked_name_category",
    "classify_address",
    "default_connector",
    "default_resolver",
    "guarded_fetch",
    "make_guarded_client",
    "parse_host_address",
    "resolve_checked",
]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
"""Either kind of IP address, as produced by :func:`parse_host_address`."""

Resolver = Callable[[str, int], Awaitable[list[str]]]
"""Async name resolver: ``(hostname, port) -> [ip, ...]``. Injectable so tests can simulate DNS."""

Connector = Callable[[str, int, str, float | None], Awaitable[httpcore.AsyncNetworkStream]]
"""Final TCP connector: ``(checked_ip, port, original_hostname, timeout) -> stream``.

It only ever receives an address that passed the policy check. Tests inject one that records
the pinned address and connects to a local server instead of the outside world.
"""

_POLICY_KEY_HOSTS = "allowHosts"
_POLICY_KEY_CIDRS = "allowCidrs"


# --------------------------------------------------------------------------------------------
# Policy, results and errors
# --------------------------------------------------------------------------------------------


class SSRFPolicy(BaseModel):
    """Operator settings for outbound requests (config keys are camelCase, fields snake_case).

    ``allow_hosts`` entries are ``host`` (any port) or ``host:port`` (IPv6 as ``[addr]:port``).
    A request whose URL host (and port, when given) matches an entry skips the address
    classification; the connection is still pinned to the resolved address. ``allow_cidrs``
    admits every resolved address inside one of the listed networks.
    """

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, frozen=True, extra="forbid"
    )

    allow_hosts: list[str] = Field(default_factory=list)
    allow_cidrs: list[str] = Field(default_factory=list)
    timeout_seconds: float = Field(default=10.0, gt=0)
    connect_timeout_seconds: float = Field(default=10.0, gt=0)
    max_response_bytes: int = Field(default=1024 * 1024, gt=0)

    @field_validator("allow_hosts")
    @classmethod
    def _check_allow_hosts(cls, value: list[str]) -> list[str]:
        for entry in value:
            _split_allow_entry(entry)  # raises ValueError naming the bad entry
        return value

    @field_validator("allow_cidrs")
    @classmethod
    def _check_allow_cidrs(cls, value: list[str]) -> list[str]:
        for entry in value:
            try:
                ipaddress.ip_network(entry, strict=False)
            except ValueError as exc:
                raise ValueError(
                    f"{_POLICY_KEY_CIDRS} entry {entry!r} is not a network such as "
                    f"'10.1.2.0/24' or 'fd00:1::/64': {exc}"
                ) from exc
        return value

    def admits_host(self, host: str, port: int) -> bool:
        """Whether ``host:port`` (URL host, any spelling) is admitted by ``allow_hosts``."""
        canonical = _canonical_host(host)
        for entry in self.allow_hosts:
            entry_host, entry_port = _split_allow_entry(entry)
            if entry_host == canonical and (entry_port is None or entry_port == port):
                return True
        return False

    def admits_address(self, address: IPAddress) -> bool:
        """Whether ``address`` lies in one of the ``allow_cidrs`` networks."""
        for entry in self.allow_cidrs:
            network = ipaddress.ip_network(entry, strict=False)
            if address.version == network.version and address in network:
                return True
        return False


class SSRFBlocked(Exception):
    """A request was refused because its target is internal, or its URL is unsafe to send.

    Attributes name the URL host, the offending address (``None`` for name or URL problems)
    and the class of target (``"loopback"``, ``"rfc1918"``, ``"metadata"`` ...).
    """

    def __init__(
        self,
        host: str,
        address: str | None,
        category: str,
        *,
        port: int | None = None,
        hint: str | None = None,
    ) -> None:
        self.host = host
        self.address = address
        self.category = category
        self.port = port
        if hint is None:
            entry = f"[{host}]" if ":" in host else host
            entry = f"{entry}:{port}" if port is not None else f"{entry}[:port]"
            hint = f"If this internal target is intended, add {entry!r} to the SSRF policy's "
            if address is not None:
                prefix = 128 if ":" in address else 32
                hint += f"{_POLICY_KEY_HOSTS} (or '{address}/{prefix}' to {_POLICY_KEY_CIDRS})."
            else:
                hint += f"{_POLICY_KEY_HOSTS}."
        where = f"address {address}" if address is not None else "the host name"
        super().__init__(
            f"SSRF protection blocked the request to host {host!r}: {where} is {category}. {hint}"
        )


class FetchError(Exception):
    """The request could not be completed (invalid URL, DNS failure, refused, timed out ...)."""


class FetchResult(BaseModel):
    """Outcome of :func:`guarded_fetch`.

    ``body`` is the (possibly truncated) response text; ``redirect_location`` is set when the
    server answered with a redirect, which is reported and never followed.
    """

    model_config = ConfigDict(frozen=True)

    url: str
    status: int
    headers: dict[str, str]
    body: str
    truncated: bool
    redirect_location: str | None = None

    @property
    def is_redirect(self) -> bool:
        """True when the server asked for a redirect (which was not followed)."""
        return self.redirect_location is not None


# --------------------------------------------------------------------------------------------
# Host parsing
# --------------------------------------------------------------------------------------------

# Host names are reduced to this alphabet before any lookup: percent-escapes, backslashes,
# spaces or '@' in a host are parser-confusion tricks, never legitimate DNS names.
_NAME_RE = re.compile(r"^[a-z0-9_-]+(\.[a-z0-9_-]+)*$")
_ZONE_RE = re.compile(r"^[A-Za-z0-9_.-]+$")


def _strip_host(host: str) -> str:
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
    value = _strip_host(host)
    if ":" in value:
        address, zone = _split_zone(value)
        if zone is not None and not _ZONE_RE.match(zone):
            return None
        try:
            return ipaddress.IPv6Address(address)
        except ValueError:
            return None
    return _parse_ipv4_loose(value)


def _canonical_host(host: str) -> str:
    """Compare hosts by what they denote: numeric spellings collapse to the plain address."""
    address = parse_host_address(host)
    return str(address) if address is not None else _strip_host(host)


def _split_allow_entry(entry: str) -> tuple[str, int | None]:
    """Split an ``allowHosts`` entry into ``(canonical host, port or None)``."""
    text = entry.strip()
    host, port_text = text, ""
    if text.startswith("["):
        closing = text.find("]")
        if closing == -1:
            raise ValueError(f"{_POLICY_KEY_HOSTS} entry {entry!r} opens '[' without ']'")
        host, rest = text[: closing + 1], text[closing + 1 :]
        if rest and not rest.startswith(":"):
            raise ValueError(f"{_POLICY_KEY_HOSTS} entry {entry!r}: expected ':port' after ']'")
        port_text = rest[1:]
    elif text.count(":") == 1:
        host, port_text = text.split(":")
    if not host:
        raise ValueError(f"{_POLICY_KEY_HOSTS} entry {entry!r} has no host")
    port: int | None = None
    if port_text:
        if not port_text.isdigit() or not 0 < int(port_text) < 65536:
            raise ValueError(
                f"{_POLICY_KEY_HOSTS} entry {entry!r}: port must be 1-65535 "
                "(use 'host' or 'host:port', IPv6 as '[::1]:8080')"
            )
        port = int(port_text)
    return _canonical_host(host), port


# --------------------------------------------------------------------------------------------
# Address classification
# --------------------------------------------------------------------------------------------

_METADATA_NAMES = frozenset(
    {
        "metadata.google.internal",  # GCP
        "metadata.goog",  # GCP
        "metadata",  # GCP short name, resolvable inside GCE
        "instance-data",  # AWS EC2 (legacy DNS name)
        "instance-data.ec2.internal",
        "metadata.azure.com",
        "metadata.packet.net",  # Equinix Metal
        "metadata.platformequinix.com",
        "metadata.tencentyun.com",  # Tencent Cloud
    }
)
_LOOPBACK_NAMES = frozenset(
    {"localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback", "loopback"}
)

_METADATA_ADDRESSES = frozenset(
    ipaddress.ip_address(a)
    for a in (
        "169.254.169.254",  # AWS, GCP, Azure, OpenStack, Oracle, DigitalOcean ...
        "169.254.170.2",  # AWS ECS task metadata / credentials
        "169.254.169.253",  # AWS VPC DNS
        "169.254.169.123",  # AWS time sync
        "100.100.100.200",  # Alibaba Cloud
        "168.63.129.16",  # Azure WireServer: a *public* address, so only this check catches it
        "192.0.0.192",  # Oracle Cloud (classic)
        "fd00:ec2::254",  # AWS IMDS over IPv6
        "fd00:ec2::253",  # AWS VPC DNS over IPv6
        "fd00:ec2::23",  # AWS ECS/EKS pod identity agent
        "fd00:ec2::123",  # AWS time sync over IPv6
    )
)


def _net(cidr: str) -> ipaddress.IPv4Network | ipaddress.IPv6Network:
    return ipaddress.ip_network(cidr)


# Checked explicitly instead of trusting is_private/is_global alone: their tables differ
# between Python patch releases, and a message must name the precise class.
_V4_CLASSES: tuple[tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, str], ...] = (
    (_net("127.0.0.0/8"), "loopback"),
    (_net("0.0.0.0/8"), "unspecified / 'this network' (0.0.0.0/8 reaches the local host)"),
    (_net("10.0.0.0/8"), "rfc1918 private"),
    (_net("172.16.0.0/12"), "rfc1918 private"),
    (_net("192.168.0.0/16"), "rfc1918 private"),
    (_net("100.64.0.0/10"), "cgnat shared address space"),
    (_net("169.254.0.0/16"), "link-local"),
    (_net("192.0.0.0/24"), "reserved (IETF protocol assignments)"),
    (_net("192.0.2.0/24"), "reserved (documentation)"),
    (_net("198.51.100.0/24"), "reserved (documentation)"),
    (_net("203.0.113.0/24"), "reserved (documentation)"),
    (_net("198.18.0.0/15"), "reserved (benchmarking)"),
    (_net("192.88.99.0/24"), "reserved (6to4 relay anycast)"),
    (_net("224.0.0.0/4"), "multicast"),
    (_net("255.255.255.255/32"), "broadcast"),
    (_net("240.0.0.0/4"), "reserved (240.0.0.0/4)"),
)
_V6_CLASSES: tuple[tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, str], ...] = (
    (_net("::1/128"), "loopback"),
    (_net("::/128"), "unspecified"),
    (_net("fe80::/10"), "link-local"),
    (_net("fec0::/10"), "site-local (deprecated)"),
    (_net("fc00::/7"), "unique-local"),
    (_net("ff00::/8"), "multicast"),
    (_net("100::/64"), "reserved (discard-only)"),
    (_net("2001:db8::/32"), "reserved (documentation)"),
    (_net("3fff::/20"), "reserved (documentation)"),
    (_net("2001:2::/48"), "reserved (benchmarking)"),
    (_net("2001:10::/28"), "reserved (ORCHID)"),
    (_net("2001:20::/28"), "reserved (ORCHIDv2)"),
    (_net("5f00::/16"), "reserved (SRv6 SIDs)"),
)
_GLOBAL_UNICAST_V6 = ipaddress.IPv6Network("2000::/3")
_NAT64_WKP = ipaddress.IPv6Network("64:ff9b::/96")
_NAT64_LOCAL = ipaddress.IPv6Network("64:ff9b:1::/48")
_IPV4_COMPATIBLE = ipaddress.IPv6Network("::/96")


def _embedded_ipv4(address: ipaddress.IPv6Address) -> list[tuple[str, ipaddress.IPv4Address]]:
    """IPv4 addresses carried inside an IPv6 address, labelled with the embedding kind."""
    low32 = ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    found: list[tuple[str, ipaddress.IPv4Address]] = []
    if address.ipv4_mapped is not None:
        found.append(("ipv4-mapped ipv6", address.ipv4_mapped))
    elif address in _IPV4_COMPATIBLE:
        found.append(("ipv4-compatible ipv6", low32))
    elif address in _NAT64_WKP:
        found.append(("nat64 ipv6", low32))
    elif address in _NAT64_LOCAL:
        found.append(("local-use nat64 ipv6", low32))
    elif address.sixtofour is not None:
        found.append(("6to4 ipv6", address.sixtofour))
    elif address.teredo is not None:
        server, client = address.teredo
        found.append(("teredo ipv6 (client)", client))
        found.append(("teredo ipv6 (server)", server))
    return found


def classify_address(address: IPAddress) -> str | None:
    """Return why ``address`` must not be contacted (e.g. ``"loopback"``), or ``None`` if public.

    IPv4 carried inside IPv6 (mapped, compatible, NAT64, 6to4, Teredo) is extracted and
    classified too, reported as e.g. ``"ipv4-mapped ipv6 -> loopback"``.
    """
    if isinstance(address, ipaddress.IPv6Address) and address.scope_id is not None:
        # A zone id only picks the interface; the class is the address's own.
        address = ipaddress.IPv6Address(address.compressed.split("%")[0])
    if address in _METADATA_ADDRESSES:
        return "metadata (cloud instance metadata endpoint)"
    if isinstance(address, ipaddress.IPv6Address):
        # ::1 and :: sit inside ::/96 but are IPv6's own loopback/unspecified addresses.
        if address not in (ipaddress.IPv6Address("::1"), ipaddress.IPv6Address("::")):
            for kind, inner in _embedded_ipv4(address):
                inner_class = classify_address(inner)
                if inner_class is not None:
                    return f"{kind} -> {inner_class}"
            # Local-use NAT64 translates into the operator's own network and the deprecated
            # compatible form has no legitimate public use: neither is a public target.
            if address in _NAT64_LOCAL:
                return "reserved (local-use nat64 prefix 64:ff9b:1::/48)"
            if address in _IPV4_COMPATIBLE:
                return "reserved (deprecated ipv4-compatible ipv6 ::/96)"
            if address.ipv4_mapped is not None or address in _NAT64_WKP:
                # These reach exactly the embedded IPv4, which was found public above.
                return None
        classes = _V6_CLASSES
    else:
        classes = _V4_CLASSES
    for network, name in classes:
        if address.version == network.version and address in network:
            return name
    if isinstance(address, ipaddress.IPv6Address) and address not in _GLOBAL_UNICAST_V6:
        return "reserved (outside 2000::/3 global unicast)"
    if not address.is_global:
        # Safety net for ranges the explicit tables above do not name (IANA special-purpose).
        return "reserved (not globally routable)"
    return None


def blocked_name_category(host: str) -> str | None:
    """Return why the host *name* itself is refused (loopback / metadata names), else ``None``."""
    name = _strip_host(host)
    if name in _LOOPBACK_NAMES or name.endswith(".localhost"):
        return "loopback (localhost name)"
    if name in _METADATA_NAMES:
        return "metadata (cloud instance metadata host name)"
    return None


# --------------------------------------------------------------------------------------------
# Resolution, checking and pinned connection
# --------------------------------------------------------------------------------------------


async def default_resolver(host: str, port: int) -> list[str]:
    """Resolve ``host`` with the event loop's ``getaddrinfo`` (TCP answers only)."""
    infos = await asyncio.get_running_loop().getaddrinfo(
        host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP
    )
    return [str(info[4][0]) for info in infos]


async def default_connector(
    ip: str, port: int, hostname: str, timeout: float | None
) -> httpcore.AsyncNetworkStream:
    """Open a TCP connection to the already-checked ``ip`` (``hostname`` is informational).

    The address is an IP literal, so the backend performs no DNS lookup of its own.
    """
    del hostname  # SNI and Host come from the URL at the httpcore/httpx layers above
    return await httpcore.AnyIOBackend().connect_tcp(ip, port, timeout=timeout)


async def resolve_checked(
    host: str, port: int, *, policy: SSRFPolicy, resolver: Resolver | None = None
) -> list[str]:
    """Resolve ``host`` once and return its addresses, all of which passed the policy.

    Raises :class:`SSRFBlocked` when the name itself is refused or when ANY answer is a blocked
    address (a name with one private answer must not be usable to reach it), and
    :class:`FetchError` when the name does not resolve.
    """
    shown = _strip_host(host)
    allowlisted = policy.admits_host(host, port)
    literal = parse_host_address(host)
    if literal is None and not allowlisted:
        if not _NAME_RE.match(shown):
            raise SSRFBlocked(
                shown,
                None,
                "malformed (only letters, digits, '-', '_' and '.' are allowed in host names)",
                hint="Write the host plainly, without percent-escapes, spaces or '@'.",
            )
        name_category = blocked_name_category(shown)
        if name_category is not None:
            raise SSRFBlocked(shown, None, name_category, port=port)
    if literal is not None:
        answers = [str(literal)]
    else:
        try:
            answers = await (resolver or default_resolver)(shown, port)
        except (OSError, UnicodeError) as exc:
            raise FetchError(f"could not resolve host {shown!r}: {exc}") from exc
    if not answers:
        raise FetchError(f"host {shown!r} resolved to no addresses")
    checked: list[str] = []
    for answer in answers:
        address = parse_host_address(answer)
        if address is None:
            raise FetchError(f"resolver returned {answer!r} for host {shown!r}: not an IP address")
        if isinstance(address, ipaddress.IPv6Address) and address.scope_id is not None:
            address = ipaddress.IPv6Address(str(address).split("%")[0])
        category = classify_address(address)
        if category is not None and not allowlisted and not policy.admits_address(address):
            raise SSRFBlocked(shown, str(address), category, port=port)
        if str(address) not in checked:
            checked.append(str(address))
    return checked


class _PinnedBackend(httpcore.AsyncNetworkBackend):
    """httpcore backend that resolves, checks and connects to the checked address only.

    httpcore calls ``connect_tcp`` with the URL's host; TLS (``start_tls``) later receives the
    same URL host as ``server_hostname`` and the Host header is built by httpx from the URL,
    so pinning here changes only which IP the socket reaches.
    """

    def __init__(self, policy: SSRFPolicy, resolver: Resolver | None, connector: Connector):
        self._policy = policy
        self._resolver = resolver
        self._connector = connector
        self._sleeper = httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        try:
            addresses = await resolve_checked(
                host, port, policy=self._policy, resolver=self._resolver
            )
        except FetchError as exc:
            raise httpcore.ConnectError(str(exc)) from exc
        failures: list[str] = []
        for ip in addresses:
            try:
                return await self._connector(ip, port, host, timeout)
            except (httpcore.ConnectError, httpcore.ConnectTimeout, OSError) as exc:
                failures.append(f"{ip}: {exc or type(exc).__name__}")
        raise httpcore.ConnectError(
            f"could not connect to {host}:{port} at its checked addresses ({'; '.join(failures)})"
        )

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        # The guarded pool is never configured with a socket path; refuse rather than trust.
        raise SSRFBlocked(f"unix:{path}", None, "a unix socket", hint="Use an http(s) URL.")

    async def sleep(self, seconds: float) -> None:
        await self._sleeper.sleep(seconds)


# httpcore exception -> httpx exception, most specific first, so callers see httpx's hierarchy.
_EXCEPTION_MAP: tuple[tuple[type[Exception], type[httpx.TransportError]], ...] = (
    (httpcore.ConnectTimeout, httpx.ConnectTimeout),
    (httpcore.ReadTimeout, httpx.ReadTimeout),
    (httpcore.WriteTimeout, httpx.WriteTimeout),
    (httpcore.PoolTimeout, httpx.PoolTimeout),
    (httpcore.TimeoutException, httpx.TimeoutException),
    (httpcore.ConnectError, httpx.ConnectError),
    (httpcore.ReadError, httpx.ReadError),
    (httpcore.WriteError, httpx.WriteError),
    (httpcore.NetworkError, httpx.NetworkError),
    (httpcore.ProxyError, httpx.ProxyError),
    (httpcore.UnsupportedProtocol, httpx.UnsupportedProtocol),
    (httpcore.RemoteProtocolError, httpx.RemoteProtocolError),
    (httpcore.LocalProtocolError, httpx.LocalProtocolError),
    (httpcore.ProtocolError, httpx.ProtocolError),
)


@contextmanager
def _mapped_errors(request: httpx.Request) -> Iterator[None]:
    try:
        yield
    except Exception as exc:
        for source, target in _EXCEPTION_MAP:
            if isinstance(exc, source):
                raise target(str(exc), request=request) from exc
        raise  # SSRFBlocked and anything unexpected pass through unchanged


class _ResponseStream(httpx.AsyncByteStream):
    def __init__(self, stream: AsyncIterable[bytes], request: httpx.Request) -> None:
        self._stream = stream
        self._request = request

    async def __aiter__(self) -> AsyncIterator[bytes]:
        with _mapped_errors(self._request):
            async for part in self._stream:
                yield part

    async def aclose(self) -> None:
        close = getattr(self._stream, "aclose", None)
        if close is not None:
            await close()


class _PinnedTransport(httpx.AsyncBaseTransport):
    """httpx transport over an httpcore pool that uses :class:`_PinnedBackend`, no proxies."""

    def __init__(self, backend: _PinnedBackend) -> None:
        self._pool = httpcore.AsyncConnectionPool(
            network_backend=backend, http1=True, http2=False, retries=0
        )

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if not isinstance(request.stream, httpx.AsyncByteStream):
            raise TypeError("the guarded client only sends async request bodies")
        core_request = httpcore.Request(
            method=request.method,
            url=httpcore.URL(
                scheme=request.url.raw_scheme,
                host=request.url.raw_host,
                port=request.url.port,
                target=request.url.raw_path,
            ),
            headers=request.headers.raw,
            content=request.stream,
            extensions=request.extensions,
        )
        with _mapped_errors(request):
            response = await self._pool.handle_async_request(core_request)
        if not isinstance(response.stream, AsyncIterable):
            raise TypeError("httpcore returned a synchronous body from an async pool")
        return httpx.Response(
            status_code=response.status,
            headers=response.headers,
            stream=_ResponseStream(response.stream, request),
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        await self._pool.aclose()


def make_guarded_client(
    policy: SSRFPolicy, *, resolver: Resolver | None = None, connector: Connector | None = None
) -> httpx.AsyncClient:
    """An ``httpx.AsyncClient`` whose every connection is resolved, checked and pinned.

    Environment proxies are ignored (``trust_env=False``: a proxy would resolve the name itself
    and defeat pinning) and redirects are not followed.
    """
    backend = _PinnedBackend(policy, resolver, connector or default_connector)
    timeout = httpx.Timeout(policy.timeout_seconds, connect=policy.connect_timeout_seconds)
    return httpx.AsyncClient(
        transport=_PinnedTransport(backend),
        trust_env=False,
        follow_redirects=False,
        timeout=timeout,
    )


# --------------------------------------------------------------------------------------------
# One-shot fetch
# --------------------------------------------------------------------------------------------


def _denoted_address(url: str) -> tuple[str, IPAddress, str] | None:
    """Host, address and block class of a URL's numeric host, when it denotes a blocked one."""
    try:
        host = urlsplit(url).hostname
    except ValueError:
        return None
    literal = parse_host_address(host) if host else None
    if host is None or literal is None:
        return None
    category = classify_address(literal)
    return (host, literal, category) if category is not None else None


def _precheck_url(url: str, policy: SSRFPolicy) -> httpx.URL:
    """Refuse unusable URLs early with a clear message; the pinned connect re-checks anyway."""
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL as exc:
        # httpx refuses some spellings a resolver would accept (``0177.0.0.1``). Say what the
        # host denotes when it is internal, so the operator sees why, not just "invalid".
        denoted = _denoted_address(url)
        if denoted is not None:
            bad_host, bad_address, bad_class = denoted
            raise SSRFBlocked(bad_host, str(bad_address), bad_class) from exc
        raise FetchError(f"invalid URL {url!r}: {exc}") from exc
    if parsed.scheme not in ("http", "https"):
        raise SSRFBlocked(
            parsed.host or url,
            None,
            f"reached through unsupported scheme {parsed.scheme!r}",
            hint="Only http:// and https:// URLs are allowed.",
        )
    if not parsed.host:
        raise FetchError(f"invalid URL {url!r}: it has no host")
    if parsed.userinfo:
        # Credentials in the authority are the classic way to make different URL parsers
        # disagree about the host (http://public@internal/); they are never needed here.
        raise SSRFBlocked(
            parsed.host,
            None,
            "given with user credentials in the URL",
            hint="Remove 'user:password@' from the URL and send credentials in a header.",
        )
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    if not policy.admits_host(parsed.host, port):
        literal = parse_host_address(parsed.host)
        if literal is not None:
            category = classify_address(literal)
            if category is not None and not policy.admits_address(literal):
                raise SSRFBlocked(_strip_host(parsed.host), str(literal), category, port=port)
        else:
            name_category = blocked_name_category(parsed.host)
            if name_category is not None:
                raise SSRFBlocked(_strip_host(parsed.host), None, name_category, port=port)
    return parsed


class _BoundedBody:
    """Accumulates at most ``limit`` decoded bytes; decompression is bounded the same way."""

    def __init__(self, limit: int, content_encoding: str) -> None:
        self.limit = limit
        self.data = bytearray()
        self.truncated = False
        encoding = content_encoding.strip().lower()
        # Decoding ourselves (instead of httpx's decoders) bounds a decompression bomb: zlib is
        # asked for at most the remaining budget per call.
        self._inflater: Any = None
        if encoding in ("gzip", "x-gzip"):
            self._inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
        elif encoding == "deflate":
            self._inflater = zlib.decompressobj(zlib.MAX_WBITS)

    def feed(self, chunk: bytes) -> bool:
        """Add a raw chunk; returns False once the limit is exceeded (stop reading)."""
        if self._inflater is None:
            room = self.limit - len(self.data)
            self.data += chunk[:room]
            if len(chunk) > room:
                self.truncated = True
            return not self.truncated
        pending = chunk
        while pending:
            room = self.limit - len(self.data)
            try:
                # Ask for one byte more than the room so an exact-fit body is not "truncated".
                out = self._inflater.decompress(pending, room + 1)
            except zlib.error:
                self._inflater = None  # not really compressed: keep the raw bytes
                return self.feed(pending)
            self.data += out[:room]
            if len(out) > room:
                self.truncated = True
                return False
            pending = self._inflater.unconsumed_tail
        return True


def _decode_text(data: bytes, charset: str | None) -> str:
    """Decode with the declared charset when Python knows it, else UTF-8; never raises."""
    try:
        return data.decode(charset or "utf-8", errors="replace")
    except LookupError:  # a server-chosen charset name Python does not know
        return data.decode("utf-8", errors="replace")


async def guarded_fetch(
    url: str,
    *,
    method: str = "GET",
    headers: Mapping[str, str] | None = None,
    body: str | bytes | None = None,
    policy: SSRFPolicy | None = None,
    resolver: Resolver | None = None,
    connector: Connector | None = None,
) -> FetchResult:
    """Send one request through the SSRF guard and return a bounded :class:`FetchResult`.

    Raises :class:`SSRFBlocked` for refused targets and :class:`FetchError` for invalid URLs,
    network failures and timeouts. A redirect is returned (``redirect_location``), not followed.
    """
    policy = policy or SSRFPolicy()
    parsed = _precheck_url(url, policy)
    request_headers = httpx.Headers(dict(headers or {}))
    if "accept-encoding" not in request_headers:
        request_headers["Accept-Encoding"] = "identity"
    content = body.encode("utf-8") if isinstance(body, str) else body
    try:
        async with (
            asyncio.timeout(policy.timeout_seconds),
            make_guarded_client(policy, resolver=resolver, connector=connector) as client,
            client.stream(
                method.upper(), parsed, headers=request_headers, content=content
            ) as response,
        ):
            sink = _BoundedBody(
                policy.max_response_bytes, response.headers.get("content-encoding", "")
            )
            async for chunk in response.aiter_raw():
                if not sink.feed(chunk):
                    break
    except TimeoutError as exc:
        raise FetchError(
            f"request to {parsed.host!r} timed out after {policy.timeout_seconds} s "
            "(raise the SSRF policy's timeoutSeconds if the service is just slow)"
        ) from exc
    except httpx.TimeoutException as exc:
        raise FetchError(f"request to {parsed.host!r} timed out: {exc}") from exc
    except httpx.HTTPError as exc:
        raise FetchError(f"request to {parsed.host!r} failed: {exc or type(exc).__name__}") from exc
    text = _decode_text(bytes(sink.data), response.charset_encoding)
    location = response.headers.get("location") if response.is_redirect else None
    return FetchResult(
        url=str(parsed),
        status=response.status_code,
        headers={key: value for key, value in response.headers.items()},
        body=text,
        truncated=sink.truncated,
        redirect_location=location,
    )
