"""SSRF guard: every attack must be refused before a byte reaches a real server.

The targets are real HTTP servers on 127.0.0.1 (and ::1 when the host has IPv6) that count
hits. Attacks aimed at other internal ranges go through a recording connector that would route
any connection it is asked for to the 127.0.0.1 target, so a bypass of any class becomes a real,
counted connection instead of outside traffic. No test contacts a non-local address.
"""

from __future__ import annotations

import asyncio
import gzip
import ipaddress
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import httpcore
import httpx
import pytest
from agentplug.security.ssrf import (
    FetchError,
    FetchResult,
    SSRFBlocked,
    SSRFPolicy,
    classify_address,
    guarded_fetch,
    make_guarded_client,
    parse_host_address,
)

PUBLIC_V4 = "93.184.216.34"
PUBLIC_V6 = "2606:2800:220:1:248:1893:25c8:1946"


# ------------------------------------------------------------------------------------------
# Local servers
# ------------------------------------------------------------------------------------------


@dataclass
class Hit:
    """One request a local server received."""

    method: str
    path: str
    host_header: str | None


class CountingServer:
    """Threaded HTTP server that records every request it receives."""

    def __init__(self, bind: str) -> None:
        self.hits: list[Hit] = []
        self.release = threading.Event()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:
                return

            def _reply(self, status: int, body: bytes, extra: dict[str, str]) -> None:
                self.send_response(status)
                for key, value in extra.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

            def _handle(self) -> None:
                owner.hits.append(Hit(self.command, self.path, self.headers.get("Host")))
                length = int(self.headers.get("Content-Length") or 0)
                if length:
                    self.rfile.read(length)
                parts = urlsplit(self.path)
                query = {k: v[0] for k, v in parse_qs(parts.query).items()}
                if parts.path == "/redirect":
                    self._reply(302, b"moved", {"Location": query["to"]})
                elif parts.path == "/big":
                    self._reply(200, b"a" * int(query["n"]), {})
                elif parts.path == "/gzip":
                    packed = gzip.compress(b"z" * int(query["n"]))
                    self._reply(200, packed, {"Content-Encoding": "gzip"})
                elif parts.path == "/hang":
                    owner.release.wait(30)
                    self._reply(200, b"late", {})
                else:
                    self._reply(200, b"hello from " + bind.encode(), {})

            do_GET = do_POST = do_HEAD = do_PUT = _handle

        family = socket.AF_INET6 if ":" in bind else socket.AF_INET

        class Server(ThreadingHTTPServer):
            address_family = family
            daemon_threads = True

        self.server = Server((bind, 0), Handler)
        self.port: int = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


def _ipv6_available() -> bool:
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as probe:
            probe.bind(("::1", 0))
        return True
    except OSError:
        return False


@dataclass
class Targets:
    """The loopback servers attacks aim at, plus helper servers for allowed traffic."""

    v4: CountingServer
    v6: CountingServer | None
    standin: CountingServer  # where the recording connector sends allowed "public" traffic
    redirector: CountingServer  # allowlisted server that answers redirects

    def internal_hits(self) -> int:
        return len(self.v4.hits) + (len(self.v6.hits) if self.v6 else 0)


@pytest.fixture(scope="module")
def targets() -> Iterator[Targets]:
    servers = Targets(
        v4=CountingServer("127.0.0.1"),
        v6=CountingServer("::1") if _ipv6_available() else None,
        standin=CountingServer("127.0.0.1"),
        redirector=CountingServer("127.0.0.1"),
    )
    yield servers
    for server in (servers.v4, servers.v6, servers.standin, servers.redirector):
        if server is not None:
            server.close()


# ------------------------------------------------------------------------------------------
# Injectable resolver and connector
# ------------------------------------------------------------------------------------------


@dataclass
class FakeResolver:
    """DNS stand-in: answers from a table (or a sequence of tables) and counts lookups."""

    answers: dict[str, list[str]] = field(default_factory=dict)
    calls: list[str] = field(default_factory=list)

    async def __call__(self, host: str, port: int) -> list[str]:
        self.calls.append(host)
        if host not in self.answers:
            raise socket.gaierror(socket.EAI_NONAME, f"fake DNS has no answer for {host}")
        return self.answers[host]


class RebindingResolver:
    """Answers a public address the first time and loopback on every later lookup."""

    def __init__(self) -> None:
        self.calls = 0

    async def __call__(self, host: str, port: int) -> list[str]:
        self.calls += 1
        return [PUBLIC_V4] if self.calls == 1 else ["127.0.0.1"]


class RecordingConnector:
    """Records the pinned (ip, port, hostname) and really connects to a local server instead."""

    def __init__(self, route_port: int) -> None:
        self.route_port = route_port
        self.calls: list[tuple[str, int, str]] = []

    async def __call__(
        self, ip: str, port: int, hostname: str, timeout: float | None
    ) -> httpcore.AsyncNetworkStream:
        self.calls.append((ip, port, hostname))
        return await httpcore.AnyIOBackend().connect_tcp(
            "127.0.0.1", self.route_port, timeout=timeout
        )


class TLSProbeStream(httpcore.AsyncNetworkStream):
    """Wraps a real stream and records the SNI name httpcore asks TLS for, then stops."""

    def __init__(self, inner: httpcore.AsyncNetworkStream, seen: list[str | None]) -> None:
        self.inner = inner
        self.seen = seen

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return await self.inner.read(max_bytes, timeout)

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        await self.inner.write(buffer, timeout)

    async def aclose(self) -> None:
        await self.inner.aclose()

    async def start_tls(
        self,
        ssl_context: object,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.AsyncNetworkStream:
        self.seen.append(server_hostname)
        await self.inner.aclose()
        raise httpcore.ConnectError("test probe stops before the TLS handshake")


# ------------------------------------------------------------------------------------------
# Attack table
# ------------------------------------------------------------------------------------------

ATTACK_DNS: dict[str, list[str]] = {
    "internal.attacker.test": ["10.0.0.5"],
    "loopback.attacker.test": ["127.0.0.1"],
    "imds.attacker.test": ["169.254.169.254"],
    "mixed.attacker.test": [PUBLIC_V4, "127.0.0.1"],
    "mixed-last.attacker.test": [PUBLIC_V4, PUBLIC_V6, "192.168.0.10"],
    "ula.attacker.test": ["fd00::1"],
    "mapped.attacker.test": ["::ffff:127.0.0.1"],
    "zone.attacker.test": ["fe80::1%eth0"],
    "zero.attacker.test": ["0.0.0.0"],
    "cgnat.attacker.test": ["100.64.1.1"],
    "v6loop.attacker.test": [PUBLIC_V6, "::1"],
    "127.0.0.1.nip.io": ["127.0.0.1"],
    "public.example": [PUBLIC_V4],
}


@dataclass(frozen=True)
class Attack:
    """One attack URL; ``real`` marks targets that are safe to try on the real connect path."""

    id: str
    url: str
    real: bool = False
    expect: type[Exception] = SSRFBlocked
    httpx_rejects: bool = False  # httpx itself refuses the URL before any transport is used


ATTACKS: list[Attack] = [
    # Numeric IPv4 spellings of loopback, each as getaddrinfo/inet_aton would read it.
    Attack("ipv4-loopback", "http://127.0.0.1:{p4}/", real=True),
    Attack("ipv4-loopback-127.0.0.2", "http://127.0.0.2:{p4}/", real=True),
    Attack("ipv4-loopback-127.255.255.254", "http://127.255.255.254:{p4}/", real=True),
    Attack("decimal-dword", "http://2130706433:{p4}/", real=True),
    Attack("hex-dword", "http://0x7f000001:{p4}/", real=True),
    Attack("octal-dword", "http://017700000001:{p4}/", real=True),
    Attack("hex-two-part", "http://0x7f.1:{p4}/", real=True),
    Attack("octal-dotted", "http://0177.0.0.1:{p4}/", real=True, httpx_rejects=True),
    Attack("zero-padded-dotted", "http://127.000.000.001:{p4}/", real=True, httpx_rejects=True),
    Attack("short-127.1", "http://127.1:{p4}/", real=True),
    Attack("short-127.0.1", "http://127.0.1:{p4}/", real=True),
    Attack("mixed-hex-octal", "http://0x7f.0.00.01:{p4}/", real=True),
    Attack("uppercase-hex", "http://0X7F.0.0.1:{p4}/", real=True),
    Attack("trailing-dot", "http://127.0.0.1.:{p4}/", real=True),
    Attack("unspecified-0.0.0.0", "http://0.0.0.0:{p4}/", real=True),
    Attack("unspecified-0", "http://0:{p4}/", real=True),
    Attack("unspecified-hex-0x0", "http://0x0:{p4}/", real=True),
    # Loopback names.
    Attack("localhost", "http://localhost:{p4}/", real=True),
    Attack("localhost-uppercase", "http://LOCALHOST:{p4}/", real=True),
    Attack("localhost-trailing-dot", "http://localhost.:{p4}/", real=True),
    Attack("subdomain-of-localhost", "http://app.localhost:{p4}/", real=True),
    Attack("localhost-localdomain", "http://localhost.localdomain:{p4}/", real=True),
    Attack("ip6-localhost", "http://ip6-localhost:{p6}/", real=True),
    # IPv6 loopback / unspecified and IPv4 embedded in IPv6.
    Attack("ipv6-loopback", "http://[::1]:{p6}/", real=True),
    Attack("ipv6-loopback-expanded", "http://[0:0:0:0:0:0:0:1]:{p6}/", real=True),
    Attack("ipv6-loopback-zone-id", "http://[::1%25lo]:{p6}/", real=True),
    Attack("ipv6-unspecified", "http://[::]:{p6}/", real=True),
    Attack("ipv4-mapped-dotted", "http://[::ffff:127.0.0.1]:{p4}/", real=True),
    Attack("ipv4-mapped-hex", "http://[::ffff:7f00:1]:{p4}/", real=True),
    Attack("ipv4-mapped-expanded", "http://[0:0:0:0:0:ffff:127.0.0.1]:{p4}/", real=True),
    Attack("ipv4-mapped-unspecified", "http://[::ffff:0.0.0.0]:{p4}/", real=True),
    Attack("ipv4-mapped-rfc1918", "http://[::ffff:10.0.0.1]/"),
    Attack("ipv4-mapped-metadata", "http://[::ffff:169.254.169.254]/"),
    Attack("ipv4-compatible-loopback", "http://[::127.0.0.1]:{p4}/"),
    Attack("nat64-loopback", "http://[64:ff9b::127.0.0.1]:{p4}/"),
    Attack("nat64-metadata-hex", "http://[64:ff9b::a9fe:a9fe]/"),
    Attack("nat64-local-use-loopback", "http://[64:ff9b:1::7f00:1]:{p4}/"),
    Attack("6to4-loopback", "http://[2002:7f00:1::]:{p4}/"),
    Attack("6to4-rfc1918", "http://[2002:c0a8:101::1]/"),
    Attack("teredo-client-loopback", "http://[2001:0:4136:e378:8000:63bf:80ff:fffe]:{p4}/"),
    # Other IPv6 internal ranges.
    Attack("ipv6-link-local", "http://[fe80::1]/"),
    Attack("ipv6-link-local-zone-id", "http://[fe80::1%25eth0]/"),
    Attack("ipv6-unique-local-fc", "http://[fc00::1]/"),
    Attack("ipv6-unique-local-fd", "http://[fd12:3456:789a::1]/"),
    Attack("ipv6-site-local", "http://[fec0::1]/"),
    Attack("ipv6-multicast", "http://[ff02::1]/"),
    Attack("ipv6-documentation", "http://[2001:db8::1]/"),
    # IPv4 private, shared and reserved ranges.
    Attack("rfc1918-10", "http://10.0.0.1/"),
    Attack("rfc1918-172.16", "http://172.16.0.1/"),
    Attack("rfc1918-172.31", "http://172.31.255.254/"),
    Attack("rfc1918-192.168", "http://192.168.1.1/"),
    Attack("rfc1918-decimal-dword", "http://3232235777/"),
    Attack("rfc1918-hex-two-part", "http://0xa.1/"),
    Attack("cgnat-low", "http://100.64.0.1/"),
    Attack("cgnat-high", "http://100.127.255.254/"),
    Attack("link-local-v4", "http://169.254.1.1/"),
    Attack("multicast-v4", "http://224.0.0.1/"),
    Attack("broadcast", "http://255.255.255.255/"),
    Attack("reserved-240", "http://240.0.0.1/"),
    Attack("documentation-test-net-1", "http://192.0.2.1/"),
    Attack("documentation-test-net-3", "http://203.0.113.9/"),
    Attack("benchmarking", "http://198.18.0.1/"),
    Attack("this-network", "http://0.1.2.3/"),
    Attack("ietf-protocol-assignments", "http://192.0.0.8/"),
    # Cloud metadata endpoints.
    Attack("aws-metadata", "http://169.254.169.254/latest/meta-data/"),
    Attack("aws-metadata-decimal", "http://2852039166/latest/meta-data/"),
    Attack("aws-metadata-hex", "http://0xa9fea9fe/latest/meta-data/"),
    Attack("aws-metadata-ipv6", "http://[fd00:ec2::254]/latest/meta-data/"),
    Attack("aws-ecs-credentials", "http://169.254.170.2/v2/credentials"),
    Attack("gcp-metadata-name", "http://metadata.google.internal/computeMetadata/v1/"),
    Attack("gcp-metadata-name-dot", "http://metadata.google.internal./computeMetadata/v1/"),
    Attack("gcp-metadata-goog", "http://metadata.goog/computeMetadata/v1/"),
    Attack("gcp-metadata-short-name", "http://metadata/computeMetadata/v1/"),
    Attack("aws-instance-data-name", "http://instance-data/latest/meta-data/"),
    Attack("alibaba-metadata", "http://100.100.100.200/latest/meta-data/"),
    Attack("azure-wireserver", "http://168.63.129.16/machine?comp=goalstate"),
    # Names whose DNS answers are internal (served by the fake resolver).
    Attack("dns-name-to-rfc1918", "http://internal.attacker.test/"),
    Attack("dns-name-to-loopback", "http://loopback.attacker.test:{p4}/"),
    Attack("dns-name-to-metadata", "http://imds.attacker.test/latest/meta-data/"),
    Attack("dns-public-then-loopback", "http://mixed.attacker.test:{p4}/"),
    Attack("dns-public-then-rfc1918", "http://mixed-last.attacker.test/"),
    Attack("dns-name-to-unique-local", "http://ula.attacker.test/"),
    Attack("dns-name-to-mapped-loopback", "http://mapped.attacker.test:{p4}/"),
    Attack("dns-name-to-link-local-zone", "http://zone.attacker.test/"),
    Attack("dns-name-to-unspecified", "http://zero.attacker.test:{p4}/"),
    Attack("dns-name-to-cgnat", "http://cgnat.attacker.test/"),
    Attack("dns-public-v6-then-loopback-v6", "http://v6loop.attacker.test:{p6}/"),
    Attack("dns-nip-io-style-name", "http://127.0.0.1.nip.io:{p4}/"),
    # URL parser confusion.
    Attack("userinfo-public-at-loopback", "http://public.example@127.0.0.1:{p4}/", real=True),
    Attack("userinfo-loopback-at-public", "http://127.0.0.1:{p4}@public.example/"),
    Attack("fragment-at-trick", "http://127.0.0.1:{p4}#@public.example/", real=True),
    Attack("backslash-at-trick", "http://public.example\\@127.0.0.1:{p4}/", real=True),
    Attack("percent-encoded-host", "http://%31%32%37.0.0.1:{p4}/", real=True),
    Attack("scheme-file", "file:///etc/passwd", real=True, httpx_rejects=True),
    Attack("scheme-gopher", "gopher://127.0.0.1:{p4}/_GET", real=True, httpx_rejects=True),
    Attack(
        "fullwidth-digits",
        "http://\uff11\uff12\uff17.0.0.1:{p4}/",
        real=True,
        expect=FetchError,
        httpx_rejects=True,
    ),
]


def _url(attack: Attack, targets: Targets) -> str:
    p6 = targets.v6.port if targets.v6 is not None else targets.v4.port
    return attack.url.format(p4=targets.v4.port, p6=p6)


def test_attack_table_has_at_least_sixty_distinct_urls() -> None:
    assert len({a.url for a in ATTACKS}) >= 60
    assert len({a.id for a in ATTACKS}) == len(ATTACKS)


@pytest.mark.parametrize("attack", ATTACKS, ids=[a.id for a in ATTACKS])
def test_attack_is_refused_before_any_connection(attack: Attack, targets: Targets) -> None:
    connector = RecordingConnector(route_port=targets.v4.port)
    before = targets.internal_hits()
    with pytest.raises(attack.expect):
        asyncio.run(
            guarded_fetch(
                _url(attack, targets),
                resolver=FakeResolver(dict(ATTACK_DNS)),
                connector=connector,
            )
        )
    assert connector.calls == []
    assert targets.internal_hits() == before


REAL_PATH_ATTACKS = [a for a in ATTACKS if a.real]


@pytest.mark.parametrize("attack", REAL_PATH_ATTACKS, ids=[a.id for a in REAL_PATH_ATTACKS])
def test_local_attack_is_refused_on_the_real_resolver_and_connect_path(
    attack: Attack, targets: Targets
) -> None:
    before = targets.internal_hits()
    with pytest.raises(attack.expect):
        asyncio.run(guarded_fetch(_url(attack, targets)))
    assert targets.internal_hits() == before


@pytest.mark.parametrize("attack", REAL_PATH_ATTACKS, ids=[a.id for a in REAL_PATH_ATTACKS])
def test_guarded_client_refuses_local_attack_when_used_directly(
    attack: Attack, targets: Targets
) -> None:
    async def attempt() -> None:
        async with make_guarded_client(SSRFPolicy()) as client:
            await client.get(_url(attack, targets))

    expected: tuple[type[Exception], ...] = (
        (httpx.InvalidURL, httpx.UnsupportedProtocol) if attack.httpx_rejects else (SSRFBlocked,)
    )
    before = targets.internal_hits()
    with pytest.raises(expected):
        asyncio.run(attempt())
    assert targets.internal_hits() == before


# ------------------------------------------------------------------------------------------
# DNS pinning and rebinding
# ------------------------------------------------------------------------------------------


def test_dns_rebinding_never_connects_to_the_rebound_address(targets: Targets) -> None:
    resolver = RebindingResolver()
    connector = RecordingConnector(route_port=targets.standin.port)
    url = f"http://rebind.attacker.test:{targets.v4.port}/"
    before = targets.internal_hits()

    first = asyncio.run(guarded_fetch(url, resolver=resolver, connector=connector))
    with pytest.raises(SSRFBlocked):
        asyncio.run(guarded_fetch(url, resolver=resolver, connector=connector))

    assert first.status == 200
    assert [ip for ip, _, _ in connector.calls] == [PUBLIC_V4]
    assert targets.internal_hits() == before


def test_each_connection_resolves_exactly_once_and_connects_to_the_checked_address(
    targets: Targets,
) -> None:
    resolver = FakeResolver({"api.public.test": [PUBLIC_V4]})
    connector = RecordingConnector(route_port=targets.standin.port)

    asyncio.run(guarded_fetch("http://api.public.test/", resolver=resolver, connector=connector))

    assert resolver.calls == ["api.public.test"]
    assert connector.calls == [(PUBLIC_V4, 80, "api.public.test")]


def test_name_with_any_blocked_answer_is_blocked_even_if_first_answer_is_public() -> None:
    resolver = FakeResolver({"mixed.attacker.test": [PUBLIC_V4, "10.1.2.3"]})
    with pytest.raises(SSRFBlocked) as caught:
        asyncio.run(guarded_fetch("http://mixed.attacker.test/", resolver=resolver))
    assert caught.value.address == "10.1.2.3"


def test_unresolvable_name_is_a_fetch_error_not_a_connection() -> None:
    with pytest.raises(FetchError, match="could not resolve"):
        asyncio.run(guarded_fetch("http://nowhere.test/", resolver=FakeResolver()))


# ------------------------------------------------------------------------------------------
# Allowed traffic
# ------------------------------------------------------------------------------------------


def test_public_name_is_allowed_and_host_header_keeps_the_hostname(targets: Targets) -> None:
    connector = RecordingConnector(route_port=targets.standin.port)
    resolver = FakeResolver({"api.public.test": [PUBLIC_V4]})

    result = asyncio.run(
        guarded_fetch("http://api.public.test/status", resolver=resolver, connector=connector)
    )

    assert result.status == 200
    assert targets.standin.hits[-1].host_header == "api.public.test"
    assert targets.standin.hits[-1].path == "/status"


def test_host_header_keeps_hostname_and_explicit_port(targets: Targets) -> None:
    connector = RecordingConnector(route_port=targets.standin.port)
    resolver = FakeResolver({"api.public.test": [PUBLIC_V4]})

    asyncio.run(
        guarded_fetch("http://api.public.test:8080/", resolver=resolver, connector=connector)
    )

    assert connector.calls == [(PUBLIC_V4, 8080, "api.public.test")]
    assert targets.standin.hits[-1].host_header == "api.public.test:8080"


def test_public_ipv6_literal_is_allowed(targets: Targets) -> None:
    connector = RecordingConnector(route_port=targets.standin.port)

    result = asyncio.run(guarded_fetch(f"http://[{PUBLIC_V6}]/", connector=connector))

    assert result.status == 200
    assert connector.calls == [(PUBLIC_V6, 80, PUBLIC_V6)]


def test_public_ipv4_literal_in_decimal_spelling_is_allowed_as_its_address(
    targets: Targets,
) -> None:
    connector = RecordingConnector(route_port=targets.standin.port)
    decimal = str(int(ipaddress.IPv4Address(PUBLIC_V4)))

    asyncio.run(guarded_fetch(f"http://{decimal}/", connector=connector))

    assert connector.calls[0][0] == PUBLIC_V4


def test_tls_sni_uses_the_url_hostname_not_the_pinned_address() -> None:
    seen: list[str | None] = []
    pinned: list[str] = []

    async def connector(
        ip: str, port: int, hostname: str, timeout: float | None
    ) -> httpcore.AsyncNetworkStream:
        pinned.append(ip)
        server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
        local_port = server.sockets[0].getsockname()[1]
        stream = await httpcore.AnyIOBackend().connect_tcp("127.0.0.1", local_port)
        server.close()
        return TLSProbeStream(stream, seen)

    resolver = FakeResolver({"secure.public.test": [PUBLIC_V4]})
    with pytest.raises(FetchError):
        asyncio.run(
            guarded_fetch("https://secure.public.test/", resolver=resolver, connector=connector)
        )

    assert pinned == [PUBLIC_V4]
    assert seen == ["secure.public.test"]


def test_allowlisted_host_and_port_is_admitted(targets: Targets) -> None:
    policy = SSRFPolicy(allow_hosts=[f"127.0.0.1:{targets.redirector.port}"])
    before = len(targets.redirector.hits)

    result = asyncio.run(
        guarded_fetch(f"http://127.0.0.1:{targets.redirector.port}/", policy=policy)
    )

    assert result.status == 200
    assert len(targets.redirector.hits) == before + 1


def test_allowlist_entry_matches_other_spellings_of_the_same_address(targets: Targets) -> None:
    policy = SSRFPolicy(allow_hosts=[f"127.0.0.1:{targets.redirector.port}"])

    result = asyncio.run(
        guarded_fetch(f"http://2130706433:{targets.redirector.port}/", policy=policy)
    )

    assert result.status == 200


def test_allowlist_entry_with_other_port_does_not_admit(targets: Targets) -> None:
    policy = SSRFPolicy(allow_hosts=[f"127.0.0.1:{targets.redirector.port + 1}"])
    before = targets.internal_hits()

    with pytest.raises(SSRFBlocked):
        asyncio.run(guarded_fetch(f"http://127.0.0.1:{targets.v4.port}/", policy=policy))

    assert targets.internal_hits() == before


def test_allowlist_entry_without_port_admits_any_port(targets: Targets) -> None:
    policy = SSRFPolicy(allow_hosts=["127.0.0.1"])

    result = asyncio.run(
        guarded_fetch(f"http://127.0.0.1:{targets.redirector.port}/", policy=policy)
    )

    assert result.status == 200


def test_allow_cidrs_admits_addresses_inside_the_network(targets: Targets) -> None:
    policy = SSRFPolicy(allow_cidrs=["127.0.0.0/8"])

    result = asyncio.run(
        guarded_fetch(f"http://127.0.0.1:{targets.redirector.port}/", policy=policy)
    )

    assert result.status == 200


def test_allowlisted_host_does_not_admit_other_internal_hosts(targets: Targets) -> None:
    policy = SSRFPolicy(allow_hosts=[f"127.0.0.1:{targets.redirector.port}"])
    connector = RecordingConnector(route_port=targets.v4.port)

    with pytest.raises(SSRFBlocked):
        asyncio.run(guarded_fetch("http://10.0.0.1/", policy=policy, connector=connector))

    assert connector.calls == []


# ------------------------------------------------------------------------------------------
# Redirects, proxies, size and time bounds
# ------------------------------------------------------------------------------------------

REDIRECT_TARGETS = {
    "loopback": "http://127.0.0.1:{p4}/",
    "loopback-decimal": "http://2130706433:{p4}/",
    "ipv6-loopback": "http://[::1]:{p6}/",
    "metadata": "http://169.254.169.254/latest/meta-data/",
    "rfc1918": "http://10.0.0.1/",
    "public-name": "http://public.example/",
}


@pytest.mark.parametrize("kind", list(REDIRECT_TARGETS))
def test_redirect_is_reported_and_never_followed(kind: str, targets: Targets) -> None:
    p6 = targets.v6.port if targets.v6 is not None else targets.v4.port
    location = REDIRECT_TARGETS[kind].format(p4=targets.v4.port, p6=p6)
    policy = SSRFPolicy(allow_hosts=[f"127.0.0.1:{targets.redirector.port}"])
    connector = RecordingConnector(route_port=targets.redirector.port)
    before = targets.internal_hits()
    url = str(
        httpx.URL(f"http://127.0.0.1:{targets.redirector.port}/redirect", params={"to": location})
    )

    result = asyncio.run(guarded_fetch(url, policy=policy, connector=connector))

    assert result.status == 302
    assert result.redirect_location == location
    assert [ip for ip, _, _ in connector.calls] == ["127.0.0.1"]
    assert targets.internal_hits() == before


def test_environment_proxies_are_ignored(targets: Targets, monkeypatch: pytest.MonkeyPatch) -> None:
    proxy = CountingServer("127.0.0.1")
    try:
        for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "all_proxy"):
            monkeypatch.setenv(name, f"http://127.0.0.1:{proxy.port}")
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        policy = SSRFPolicy(allow_hosts=[f"127.0.0.1:{targets.redirector.port}"])
        before = len(targets.redirector.hits)

        result = asyncio.run(
            guarded_fetch(f"http://127.0.0.1:{targets.redirector.port}/", policy=policy)
        )

        assert result.status == 200
        assert len(targets.redirector.hits) == before + 1
        assert proxy.hits == []
    finally:
        proxy.close()


def test_environment_proxy_cannot_carry_a_blocked_request(
    targets: Targets, monkeypatch: pytest.MonkeyPatch
) -> None:
    proxy = CountingServer("127.0.0.1")
    try:
        monkeypatch.setenv("ALL_PROXY", f"http://127.0.0.1:{proxy.port}")
        monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{proxy.port}")
        with pytest.raises(SSRFBlocked):
            asyncio.run(guarded_fetch("http://169.254.169.254/latest/meta-data/"))
        assert proxy.hits == []
    finally:
        proxy.close()


def test_guarded_client_does_not_trust_env_or_follow_redirects() -> None:
    client = make_guarded_client(SSRFPolicy())
    assert client.trust_env is False
    assert client.follow_redirects is False
    asyncio.run(client.aclose())


def _fetch_local(targets: Targets, path: str, **policy: int | float) -> FetchResult:
    allowed = SSRFPolicy(allow_hosts=[f"127.0.0.1:{targets.redirector.port}"], **policy)
    return asyncio.run(
        guarded_fetch(f"http://127.0.0.1:{targets.redirector.port}{path}", policy=allowed)
    )


def test_response_body_is_cut_at_max_response_bytes(targets: Targets) -> None:
    result = _fetch_local(targets, "/big?n=5000", max_response_bytes=1000)
    assert len(result.body) == 1000
    assert result.truncated is True


def test_response_body_exactly_at_the_limit_is_not_truncated(targets: Targets) -> None:
    result = _fetch_local(targets, "/big?n=1000", max_response_bytes=1000)
    assert len(result.body) == 1000
    assert result.truncated is False


def test_compressed_response_is_bounded_after_decompression(targets: Targets) -> None:
    result = _fetch_local(targets, "/gzip?n=2000000", max_response_bytes=4096)
    assert result.body == "z" * 4096
    assert result.truncated is True


def test_request_is_bounded_in_time(targets: Targets) -> None:
    with pytest.raises(FetchError, match="timed out"):
        _fetch_local(targets, "/hang", timeout_seconds=0.3)


# ------------------------------------------------------------------------------------------
# Parsing, classification, messages and policy model
# ------------------------------------------------------------------------------------------

SPELLINGS = {
    "2130706433": "127.0.0.1",
    "0x7f.1": "127.0.0.1",
    "0177.0.0.1": "127.0.0.1",
    "127.1": "127.0.0.1",
    "0x7f000001": "127.0.0.1",
    "0x7f.0.00.01": "127.0.0.1",
    "127.0.0.1.": "127.0.0.1",
    "0xc0.0250.1": "192.168.0.1",
    "[::1]": "::1",
    "[fe80::1%25eth0]": "fe80::1",
    "::ffff:127.0.0.1": "::ffff:7f00:1",
}


@pytest.mark.parametrize("spelling", list(SPELLINGS))
def test_numeric_host_spelling_denotes_the_resolver_address(spelling: str) -> None:
    parsed = parse_host_address(spelling)
    assert parsed is not None
    assert str(parsed).split("%")[0] == SPELLINGS[spelling]


@pytest.mark.parametrize("name", ["example.com", "1.2.3.4.5", "0x7g.1", "256.256.256.256.1"])
def test_host_name_is_not_mistaken_for_an_address(name: str) -> None:
    assert parse_host_address(name) is None


@pytest.mark.parametrize(
    "address", ["8.8.8.8", "1.1.1.1", PUBLIC_V4, PUBLIC_V6, "::ffff:8.8.8.8", "64:ff9b::808:808"]
)
def test_public_address_is_not_classified_as_blocked(address: str) -> None:
    assert classify_address(ipaddress.ip_address(address)) is None


def test_embedded_ipv4_class_is_named_in_the_category() -> None:
    assert classify_address(ipaddress.ip_address("::ffff:127.0.0.1")) == (
        "ipv4-mapped ipv6 -> loopback"
    )


def test_blocked_message_names_host_address_class_and_allowlist_key() -> None:
    with pytest.raises(SSRFBlocked) as caught:
        asyncio.run(guarded_fetch("http://0x7f.1:8080/admin"))
    message = str(caught.value)
    assert "'0x7f.1'" in message
    assert "127.0.0.1" in message
    assert "loopback" in message
    assert "allowHosts" in message
    assert "0x7f.1:8080" in message


def test_policy_accepts_camel_case_config_keys() -> None:
    policy = SSRFPolicy.model_validate(
        {"allowHosts": ["127.0.0.1:31337"], "allowCidrs": ["10.0.0.0/8"], "maxResponseBytes": 9}
    )
    assert policy.allow_hosts == ["127.0.0.1:31337"]
    assert policy.allow_cidrs == ["10.0.0.0/8"]
    assert policy.max_response_bytes == 9


@pytest.mark.parametrize("entry", ["127.0.0.1:http", "[::1", "host:0", ":80"])
def test_policy_rejects_malformed_allow_hosts_entry(entry: str) -> None:
    with pytest.raises(ValueError, match="allowHosts entry"):
        SSRFPolicy(allow_hosts=[entry])


def test_policy_rejects_malformed_allow_cidrs_entry() -> None:
    with pytest.raises(ValueError, match="allowCidrs entry"):
        SSRFPolicy(allow_cidrs=["10.0.0.0/33"])


def test_a_url_over_the_length_limit_is_too_long_even_for_an_allowed_host() -> None:
    allowed = SSRFPolicy(allow_hosts=["127.0.0.1:9"])
    url = "http://127.0.0.1:9/" + "a" * 70_000
    with pytest.raises(FetchError, match=r"URL too long: 70019 characters, the limit is 65536"):
        asyncio.run(guarded_fetch(url, policy=allowed))


def test_an_unparsable_url_to_an_allowed_host_is_invalid_not_ssrf_blocked() -> None:
    allowed = SSRFPolicy(allow_hosts=["127.0.0.1:9"])
    with pytest.raises(FetchError, match="invalid URL"):
        asyncio.run(guarded_fetch("http://127.0.0.1:9/a\x00b", policy=allowed))


def test_an_unparsable_url_to_an_internal_host_stays_ssrf_blocked() -> None:
    with pytest.raises(SSRFBlocked, match="loopback"):
        asyncio.run(guarded_fetch("http://127.0.0.1:9/a\x00b", policy=SSRFPolicy()))
