"""One-shot guarded fetch: URL pre-check, bounded body reading and :func:`guarded_fetch`."""

from __future__ import annotations

import asyncio
import zlib
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

import httpx

from agentplug.security.ssrf.classify import blocked_name_category, classify_address
from agentplug.security.ssrf.hosts import IPAddress, parse_host_address, strip_host
from agentplug.security.ssrf.policy import FetchError, FetchResult, SSRFBlocked, SSRFPolicy
from agentplug.security.ssrf.transport import Connector, Resolver, make_guarded_client

MAX_URL_CHARS = 65_536
"""The longest URL sent (httpx's own limit): a longer one is a :class:`FetchError` saying so."""
_SHOWN_URL_CHARS = 200


def shown_url(url: str) -> str:
    """``url`` as an error message quotes it: cut after 200 characters."""
    if len(url) <= _SHOWN_URL_CHARS:
        return url
    return f"{url[:_SHOWN_URL_CHARS]}... ({len(url)} characters)"


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


def _admitted(url: str, address: IPAddress, policy: SSRFPolicy) -> bool:
    """Whether the policy admits the (numeric) host of a URL httpx refused to parse."""
    parts = urlsplit(url)
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        port = 0
    return policy.admits_host(parts.hostname or "", port) or policy.admits_address(address)


def _precheck_url(url: str, policy: SSRFPolicy) -> httpx.URL:
    """Refuse unusable URLs early with a clear message; the pinned connect re-checks anyway."""
    if len(url) > MAX_URL_CHARS:
        # Checked first: httpx's own refusal would otherwise be read as an odd host spelling.
        raise FetchError(
            f"URL too long: {len(url)} characters, the limit is {MAX_URL_CHARS} "
            f"({shown_url(url)!r}); send long values in the request body instead"
        )
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL as exc:
        # httpx refuses some spellings a resolver would accept (``0177.0.0.1``). Say what the
        # host denotes when it is internal, so the operator sees why, not just "invalid".
        denoted = _denoted_address(url)
        if denoted is not None and not _admitted(url, denoted[1], policy):
            bad_host, bad_address, bad_class = denoted
            raise SSRFBlocked(bad_host, str(bad_address), bad_class) from exc
        raise FetchError(f"invalid URL {shown_url(url)!r}: {exc}") from exc
    if parsed.scheme not in ("http", "https"):
        raise SSRFBlocked(
            parsed.host or url,
            None,
            f"reached through unsupported scheme {parsed.scheme!r}",
            hint="Only http:// and https:// URLs are allowed.",
        )
    if not parsed.host:
        raise FetchError(f"invalid URL {shown_url(url)!r}: it has no host")
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
                raise SSRFBlocked(strip_host(parsed.host), str(literal), category, port=port)
        else:
            name_category = blocked_name_category(parsed.host)
            if name_category is not None:
                raise SSRFBlocked(strip_host(parsed.host), None, name_category, port=port)
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
