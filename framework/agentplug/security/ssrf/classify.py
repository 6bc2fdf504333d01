"""Address and host-name classification for the SSRF guard.

Holds the blocked ranges (loopback, RFC 1918, link-local, reserved ...), the cloud metadata
addresses and names, IPv4 carried inside IPv6 (mapped, compatible, NAT64, 6to4, Teredo) and the
two classifiers :func:`classify_address` and :func:`blocked_name_category`.
"""

from __future__ import annotations

import ipaddress

from agentplug.security.ssrf.hosts import IPAddress, strip_host

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
    name = strip_host(host)
    if name in _LOOPBACK_NAMES or name.endswith(".localhost"):
        return "loopback (localhost name)"
    if name in _METADATA_NAMES:
        return "metadata (cloud instance metadata host name)"
    return None
