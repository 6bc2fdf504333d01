"""The ``http`` custom-action handler: a templated HTTP request sent through the SSRF guard.

A definition such as::

    {"type": "http", "method": "POST",
     "url": "https://api.example.com/data/{{query}}",
     "headers": {"Authorization": "Bearer sk-xxx"},
     "bodyTemplate": "{\\"search\\": \\"{{query}}\\"}"}

loads unchanged into :class:`HttpHandlerDef`. ``{{param}}`` placeholders are URI-component
encoded in the URL and inserted raw in the body; only declared parameters are substituted.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from typing import Literal
from urllib.parse import quote

from pydantic import BaseModel, ConfigDict, field_validator
from pydantic.alias_generators import to_camel

from agentplug.actions.handler_output import HandlerOutput
from agentplug.core.redaction import register_credentials
from agentplug.security.ssrf import (
    Connector,
    FetchError,
    Resolver,
    SSRFBlocked,
    SSRFPolicy,
    guarded_fetch,
    shown_url,
)

__all__ = ["HttpHandlerDef", "render_body", "render_url", "run_http_handler"]

_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
_BODYLESS_METHODS = frozenset({"GET", "HEAD"})
_PLACEHOLDER = re.compile(r"\{\{([^{}]+)\}\}")
# encodeURIComponent leaves exactly these unescaped besides ASCII letters and digits.
_URI_COMPONENT_SAFE = "-_.!~*'()"


class HttpHandlerDef(BaseModel):
    """``{type: "http", method, url, headers?, bodyTemplate?}`` (camelCase keys accepted)."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")

    type: Literal["http"] = "http"
    method: str = "GET"
    url: str
    headers: dict[str, str] | None = None
    body_template: str | None = None

    @field_validator("method")
    @classmethod
    def _normalise_method(cls, value: str) -> str:
        method = value.strip().upper()
        if method not in _METHODS:
            raise ValueError(
                f"http handler method {value!r} is not supported; use one of "
                f"{', '.join(sorted(_METHODS))}"
            )
        return method

    @field_validator("headers")
    @classmethod
    def _register_credentials(cls, value: dict[str, str] | None) -> dict[str, str] | None:
        register_credentials(value)  # an Authorization header is never shown again
        return value


def _substitute(
    template: str,
    params: Mapping[str, str],
    declared_names: Collection[str],
    encode: bool,
) -> str:
    """Replace ``{{name}}`` for declared names in one pass (values are never re-expanded)."""

    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in declared_names:
            return match.group(0)  # undeclared: left exactly as written
        value = str(params.get(name, ""))  # declared but not supplied: empty, like the seed
        return quote(value, safe=_URI_COMPONENT_SAFE) if encode else value

    return _PLACEHOLDER.sub(replace, template)


def render_url(template: str, params: Mapping[str, str], declared_names: Collection[str]) -> str:
    """Fill ``{{param}}`` in a URL template, URI-component-encoding each value.

    Encoding matches JavaScript's ``encodeURIComponent`` (UTF-8, ``/?#&=`` escaped), so a value
    cannot add path segments, a query string, or change the host.
    """
    return _substitute(template, params, declared_names, encode=True)


def render_body(template: str, params: Mapping[str, str], declared_names: Collection[str]) -> str:
    """Fill ``{{param}}`` in a body template with the raw values (for JSON contexts)."""
    return _substitute(template, params, declared_names, encode=False)


async def run_http_handler(
    defn: HttpHandlerDef,
    params: Mapping[str, str],
    declared_names: Collection[str],
    *,
    policy: SSRFPolicy | None = None,
    resolver: Resolver | None = None,
    connector: Connector | None = None,
) -> HandlerOutput:
    """Run an ``http`` handler and report ``ok`` (2xx) with the bounded response body.

    Never raises for request problems: SSRF blocks, redirects, invalid URLs, network errors
    and timeouts all become ``ok=False`` with a message saying what happened.
    """
    policy = policy or SSRFPolicy()
    try:
        url = render_url(defn.url, params, declared_names)
    except UnicodeEncodeError as exc:
        return HandlerOutput(ok=False, output=f"HTTP action URL could not be encoded: {exc}")
    headers = dict(defn.headers or {})
    body: str | None = None
    if defn.body_template is not None and defn.method not in _BODYLESS_METHODS:
        body = render_body(defn.body_template, params, declared_names)
        if not any(key.lower() == "content-type" for key in headers):
            headers["Content-Type"] = "application/json"
    try:
        result = await guarded_fetch(
            url,
            method=defn.method,
            headers=headers,
            body=body,
            policy=policy,
            resolver=resolver,
            connector=connector,
        )
    except SSRFBlocked as exc:
        return HandlerOutput(ok=False, output=f"Blocked by SSRF protection: {exc}")
    except FetchError as exc:
        return HandlerOutput(ok=False, output=f"HTTP {defn.method} {shown_url(url)} failed: {exc}")
    if result.redirect_location is not None:
        return HandlerOutput(
            ok=False,
            output=(
                f"Redirect blocked: {defn.method} {shown_url(url)} answered {result.status} "
                "with Location "
                f"{result.redirect_location!r}; redirects are never followed (SSRF protection). "
                "Point the action's url at the final address instead."
            ),
        )
    output = result.body
    if result.truncated:
        output += f"\n[response truncated at {policy.max_response_bytes} bytes]"
    return HandlerOutput(ok=200 <= result.status < 300, output=output)
