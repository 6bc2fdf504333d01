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
  streamed and cut at a byte limit; the whole exchange is bounded in time (a total deadline,
  not a per-read one); a URL over :data:`MAX_URL_CHARS` is refused as too long.

An operator allowlist (``allowHosts`` / ``allowCidrs`` in :class:`SSRFPolicy`) admits specific
internal targets, for example the host's own API port.


The guard is split by job: :mod:`.hosts` (host parsing), :mod:`.classify` (blocked ranges and
names), :mod:`.policy` (policy, result and errors), :mod:`.transport` (resolution, checking and
the pinned httpcore backend) and :mod:`.fetch` (:func:`guarded_fetch`).
"""

from agentplug.security.ssrf.classify import blocked_name_category, classify_address
from agentplug.security.ssrf.fetch import MAX_URL_CHARS, guarded_fetch, shown_url
from agentplug.security.ssrf.hosts import IPAddress, parse_host_address
from agentplug.security.ssrf.policy import FetchError, FetchResult, SSRFBlocked, SSRFPolicy
from agentplug.security.ssrf.transport import (
    Connector,
    Resolver,
    default_connector,
    default_resolver,
    make_guarded_client,
    resolve_checked,
)

__all__ = [
    "MAX_URL_CHARS",
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
    "shown_url",
]
