"""What a PostgreSQL store may show of its URL: the redacted form, never the password.

Pure functions (no psycopg), used by :mod:`agentplug.store.postgres` for its messages
and logs.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from urllib.parse import parse_qs, unquote, unquote_plus, urlsplit

__all__ = ["redact_url", "scrubbed_cause", "url_secrets"]


def redact_url(url: str) -> str:
    """``postgresql://host:port/db`` of ``url``: no user, password or options."""
    try:
        parts = urlsplit(url)
        query = parse_qs(parts.query)
        host = parts.hostname or (query.get("host") or ["localhost"])[0]
        try:
            port = parts.port or int((query.get("port") or ["5432"])[0])
        except ValueError:
            port = 5432
    except ValueError:  # e.g. an unbalanced IPv6 bracket
        return "postgresql://<unparseable URL>"
    db = parts.path.lstrip("/") or (query.get("dbname") or [""])[0]
    return f"postgresql://{host}:{port}/{db}"


_USERINFO_PASSWORD = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://[^/@:]*:([^@]*)@")
_QUERY_PASSWORD = re.compile(r"[?&]password=([^&]*)")


def url_secrets(url: str) -> tuple[str, ...]:
    """What must never be shown of ``url``: itself and its password, raw and decoded
    (libpq echoes the pieces of a URL it cannot parse in its error messages)."""
    found = {url}
    for pattern in (_USERINFO_PASSWORD, _QUERY_PASSWORD):
        for raw in pattern.findall(url):
            found.update({raw, unquote(raw), unquote_plus(raw)})
    return tuple(sorted((s for s in found if s), key=len, reverse=True))


def scrubbed_cause(exc: BaseException, secrets: Sequence[str] = ()) -> str:
    text = str(exc)
    for secret in secrets:
        text = text.replace(secret, "***")
    text = " ".join(text.split()) or type(exc).__name__
    for secret in secrets:  # as libpq may have re-spaced it
        text = text.replace(" ".join(secret.split()), "***")
    return text[:300]
