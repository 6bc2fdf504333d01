"""The SSRF policy model, the fetch result model and the guard's two exceptions."""

from __future__ import annotations

import ipaddress

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic.alias_generators import to_camel

from agentplug.security.ssrf.hosts import (
    POLICY_KEY_CIDRS,
    POLICY_KEY_HOSTS,
    IPAddress,
    canonical_host,
    split_allow_entry,
)


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
            split_allow_entry(entry)  # raises ValueError naming the bad entry
        return value

    @field_validator("allow_cidrs")
    @classmethod
    def _check_allow_cidrs(cls, value: list[str]) -> list[str]:
        for entry in value:
            try:
                ipaddress.ip_network(entry, strict=False)
            except ValueError as exc:
                raise ValueError(
                    f"{POLICY_KEY_CIDRS} entry {entry!r} is not a network such as "
                    f"'10.1.2.0/24' or 'fd00:1::/64': {exc}"
                ) from exc
        return value

    def admits_host(self, host: str, port: int) -> bool:
        """Whether ``host:port`` (URL host, any spelling) is admitted by ``allow_hosts``."""
        canonical = canonical_host(host)
        for entry in self.allow_hosts:
            entry_host, entry_port = split_allow_entry(entry)
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
                hint += f"{POLICY_KEY_HOSTS} (or '{address}/{prefix}' to {POLICY_KEY_CIDRS})."
            else:
                hint += f"{POLICY_KEY_HOSTS}."
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
