"""Secret values this process must never show: registered where they enter, scrubbed on the way out.

Configured secrets (an API key read from its environment variable, a database password,
the control API token, credential headers of MCP servers and http actions) are registered
with :func:`register_secret` at the place they enter the process. :func:`scrub` replaces
each registered value with :data:`REDACTED` in a text, together with the forms a server or
a library echoes it in: URL-encoded, JSON-escaped, ``repr``-escaped, and split by
whitespace (a message wrapped over lines or re-spaced). :func:`scrub_data` does the same
for JSON-like values (a trace, a hook event).

Values shorter than :data:`MIN_SECRET_LENGTH` characters are not registered: scrubbing a
short word everywhere would mangle every message and protect little. The first
registration installs a log-record factory (chained to the one in place), so every log
record of the process, whichever logger and handler, has its message, arguments,
exception text and stack scrubbed before any handler sees it (``extra`` fields are
added after the factory runs: attach :class:`ScrubbingFilter` to a handler for those).
"""

from __future__ import annotations

import json
import logging
import re
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, quote_plus

__all__ = [
    "MIN_SECRET_LENGTH",
    "REDACTED",
    "SPACES",
    "ScrubbingFilter",
    "forget_secret",
    "looks_like_credential",
    "register_credentials",
    "register_secret",
    "register_secrets",
    "scrub",
    "scrub_clipped",
    "scrub_data",
    "scrub_record",
    "unfinished_secret",
]

REDACTED = "***"
"""What a secret is replaced with."""
MIN_SECRET_LENGTH = 8
"""Shorter values are not registered (see the module docstring)."""

_WHITESPACE = re.compile(r"\s")
SPACES = (
    "\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005"
    "\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)
"""Every character ``str.isspace`` accepts (a test keeps the copy true)."""
_DROP_SPACES = dict.fromkeys(map(ord, SPACES))
_CREDENTIAL_NAME = re.compile(
    r"auth|token|secret|passw|pwd|api[-_]?key|access[-_]?key|private[-_]?key|cookie|"
    r"credential|session|signature|^key$|[-_]key$",
    re.IGNORECASE,
)
_AUTH_SCHEME = re.compile(r"^(?:bearer|basic|token|digest|apikey)\s+", re.IGNORECASE)
_lock = threading.Lock()
_raw: set[str] = set()
_factory_installed = False


@dataclass(frozen=True)
class _Compiled:
    """Everything :func:`scrub` needs, built once per registration and swapped whole, so
    a scrub running while another thread registers a secret reads one consistent view."""

    pattern: re.Pattern[str]
    needles: tuple[str, ...]
    """The secrets without their whitespace, for :func:`_scrub_spread`."""
    prefixes: tuple[str, ...]
    """Every form and secret without whitespace, for :func:`unfinished_secret`."""
    heads: frozenset[str]
    """Their first characters."""


_compiled: _Compiled | None = None


def _forms(value: str) -> set[str]:
    """``value`` as servers and libraries echo it."""
    forms = {
        value,
        quote(value, safe=""),
        quote(value),
        quote_plus(value),
        json.dumps(value)[1:-1],
        json.dumps(value, ensure_ascii=False)[1:-1],
        repr(value)[1:-1],
    }
    return {f for f in forms if len(f) >= MIN_SECRET_LENGTH}


def _compile(raw: Iterable[str]) -> _Compiled | None:
    values = list(raw)
    forms: set[str] = set()
    for value in values:
        forms |= _forms(value)
    if not forms:
        return None
    # Longest first: a form that contains another is replaced whole.
    ordered = sorted(forms, key=len, reverse=True)
    needles = {"".join(v.split()) for v in values}
    prefixes = sorted({"".join(f.split()) for f in forms} | needles, key=len, reverse=True)
    prefixes = [p for p in prefixes if p]
    return _Compiled(
        re.compile("|".join(re.escape(f) for f in ordered)),
        tuple(n for n in needles if len(n) >= MIN_SECRET_LENGTH),
        tuple(prefixes),
        frozenset(p[0] for p in prefixes),
    )


def register_secret(value: object) -> bool:
    """Never show ``value`` again (see the module docstring); ``True`` when registered.

    Anything that is not a string of at least :data:`MIN_SECRET_LENGTH` characters
    (after stripping surrounding whitespace) is ignored. Registering a value twice is
    cheap and changes nothing.
    """
    global _compiled
    if not isinstance(value, str):
        return False
    value = value.strip()
    if len(value) < MIN_SECRET_LENGTH:
        return False
    with _lock:
        if value not in _raw:
            _raw.add(value)
            _compiled = _compile(_raw)
    _install_record_factory()
    return True


def register_secrets(values: Iterable[object]) -> int:
    """:func:`register_secret` for each of ``values``; return how many were registered."""
    return sum(register_secret(v) for v in values)


def looks_like_credential(name: str) -> bool:
    """Whether a header or variable called ``name`` usually holds a credential
    (``Authorization``, ``X-Api-Key``, ``GITHUB_TOKEN``, ``DB_PASSWORD``, ``Cookie``...)."""
    return _CREDENTIAL_NAME.search(name) is not None


def register_credentials(values: Mapping[str, object] | None) -> int:
    """Register the values of ``values`` (headers, an environment) whose names look like
    credentials (:func:`looks_like_credential`); an ``Authorization`` value is registered
    with and without its scheme (``Bearer``, ``Basic``...). Return how many were."""
    count = 0
    for name, value in (values or {}).items():
        if not isinstance(value, str) or not looks_like_credential(str(name)):
            continue
        count += register_secret(value)
        bare = _AUTH_SCHEME.sub("", value.strip())
        if bare != value.strip():
            count += register_secret(bare)
    return count


def forget_secret(value: str) -> None:
    """Stop scrubbing ``value`` (for a rotated secret whose old value is harmless)."""
    global _compiled
    with _lock:
        _raw.discard(value.strip())
        _compiled = _compile(_raw)


def unfinished_secret(text: str) -> int:
    """Where the possible start of a secret at the end of ``text`` begins (``len(text)``
    when there is none): text released piece by piece (a streamed reply) is released up
    to there, the rest waits for more: :func:`scrub` recognises a secret only whole. No
    secret straddles the returned position, so scrubbing the part before it and, later,
    the part after it gives what scrubbing the whole would."""
    compiled = _compiled
    if compiled is None or not text:
        return len(text)
    # Only the last characters can start an unfinished secret: as many non-space ones
    # as the longest secret has (and the whitespace between them).
    longest = len(compiled.prefixes[0])
    start, seen = len(text), 0
    while start > 0 and seen < longest:
        start -= 1
        if not text[start].isspace():
            seen += 1
    heads = compiled.heads
    for index in range(start, len(text)):
        if text[index] not in heads:
            continue
        rest = text[index:].translate(_DROP_SPACES)
        if any(p.startswith(rest) for p in compiled.prefixes):
            return index
    return len(text)


def scrub(text: str) -> str:
    """``text`` with every registered secret (in every echoed form) replaced by ``***``."""
    compiled = _compiled
    if compiled is None or not text:
        return text
    text = compiled.pattern.sub(REDACTED, text)
    if _WHITESPACE.search(text) is not None:
        text = _scrub_spread(text, compiled.needles)
    return text


def scrub_clipped(text: str, limit: int, ellipsis: str = "...") -> str:
    """``text`` scrubbed, then cut to ``limit`` characters (ending with ``ellipsis``).

    In this order: a secret that a cut went through could no longer be recognised, and
    its first part would be shown.
    """
    clean = scrub(text)
    if len(clean) <= limit:
        return clean
    return clean[: max(0, limit - len(ellipsis))] + ellipsis


def _scrub_spread(text: str, all_needles: tuple[str, ...]) -> str:
    """Replace secrets that whitespace was inserted into (a wrapped or re-spaced line)."""
    squeezed = text.translate(_DROP_SPACES)  # one pass in C
    needles = [n for n in all_needles if n in squeezed]
    if not needles:  # the common case: no position map to build
        return text
    positions = [i for i, ch in enumerate(text) if ch not in SPACES]
    spans: list[tuple[int, int]] = []
    for needle in needles:
        start = squeezed.find(needle)
        while start != -1:
            spans.append((positions[start], positions[start + len(needle) - 1] + 1))
            start = squeezed.find(needle, start + len(needle))
    out: list[str] = []
    cursor = 0
    for begin, end in sorted(spans):
        if end <= cursor:
            continue
        out.append(text[cursor : max(begin, cursor)])
        out.append(REDACTED)
        cursor = end
    out.append(text[cursor:])
    return "".join(out)


def scrub_data(value: Any) -> Any:
    """A JSON-like value (dicts, lists, strings) with every string scrubbed; keys too."""
    if _compiled is None:
        return value
    if isinstance(value, str):
        return scrub(value)
    if isinstance(value, dict):
        return {(scrub(k) if isinstance(k, str) else k): scrub_data(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(scrub_data(v) for v in value)
    return value


def scrub_record(record: logging.LogRecord) -> logging.LogRecord:
    """Scrub one log record in place: message and arguments, exception text, stack."""
    if _compiled is None:
        return record
    try:
        message = record.getMessage()
    except Exception:  # a bad format string: logging reports it as usual
        return record
    clean = scrub(message)
    if clean != message:
        record.msg, record.args = clean, ()
    if record.exc_info and record.exc_info[0] is not None:
        text = record.exc_text or logging.Formatter().formatException(record.exc_info)
        clean = scrub(text)
        if clean != text:
            # The exception object itself still holds the secret: handlers format
            # ``exc_text`` when ``exc_info`` is gone.
            record.exc_info, record.exc_text = None, clean
        else:
            record.exc_text = text  # formatted once: handlers reuse it
    elif record.exc_text:
        record.exc_text = scrub(record.exc_text)
    if record.stack_info:
        record.stack_info = scrub(record.stack_info)
    return record


_STANDARD_ATTRIBUTES = frozenset(vars(logging.makeLogRecord({}))) | {"message", "asctime"}


class ScrubbingFilter(logging.Filter):
    """A handler filter that also scrubs ``extra`` fields (the factory covers the rest)."""

    def filter(self, record: logging.LogRecord) -> bool:
        scrub_record(record)
        for name, value in list(vars(record).items()):
            if name not in _STANDARD_ATTRIBUTES and isinstance(value, (str, dict, list)):
                setattr(record, name, scrub_data(value))
        return True


def _install_record_factory() -> None:
    global _factory_installed
    with _lock:
        if _factory_installed:
            return
        _factory_installed = True
        inner = logging.getLogRecordFactory()

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        return scrub_record(inner(*args, **kwargs))

    logging.setLogRecordFactory(factory)
