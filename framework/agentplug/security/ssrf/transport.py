"""Resolution, checking and the pinned connection layer of the SSRF guard.

DNS is resolved once per TCP connection, every answer is checked (:func:`resolve_checked`) and
the socket connects to one of exactly those addresses. The pinning lives in an httpcore network
backend, so TLS SNI and the ``Host`` header still carry the URL's hostname;
:func:`make_guarded_client` wraps it in an ``httpx.AsyncClient`` without proxies or redirects.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import httpcore
import httpx

from agentplug.security.ssrf.classify import blocked_name_category, classify_address
from agentplug.security.ssrf.hosts import HOST_NAME_RE, parse_host_address, strip_host
from agentplug.security.ssrf.policy import FetchError, SSRFBlocked, SSRFPolicy

Resolver = Callable[[str, int], Awaitable[list[str]]]
"""Async name resolver: ``(hostname, port) -> [ip, ...]``. Injectable so tests can simulate DNS."""

Connector = Callable[[str, int, str, float | None], Awaitable[httpcore.AsyncNetworkStream]]
"""Final TCP connector: ``(checked_ip, port, original_hostname, timeout) -> stream``.

It only ever receives an address that passed the policy check. Tests inject one that records
the pinned address and connects to a local server instead of the outside world.
"""


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
    shown = strip_host(host)
    allowlisted = policy.admits_host(host, port)
    literal = parse_host_address(host)
    if literal is None and not allowlisted:
        if not HOST_NAME_RE.match(shown):
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
