"""Reading data that comes from outside: config files, scenario files, request bodies.

Every reader here has the same limits and the same failure: a :class:`DataFileError`
whose message is one line naming the file (or ``request body``) and what to do. Nothing
a file holds can make them raise anything else (no ``RecursionError``, no
``UnicodeDecodeError``, no ``ValueError`` from a 5000-digit integer):

* **size**: at most :data:`MAX_FILE_BYTES` bytes are read (callers pass a smaller
  limit for request bodies);
* **encoding**: UTF-8 (with or without a BOM), UTF-16 and UTF-32 (with a BOM, or
  recognised by their zero bytes around ASCII, as RFC 4627 describes); anything else is
  "not valid UTF-8 or UTF-16";
* **nesting**: at most :data:`MAX_DEPTH` levels of objects/arrays ("nested deeper than
  N"), checked without recursion, and at most :data:`MAX_VALUES` values in total (YAML
  aliases can make a small file expand into a huge tree);
* **numbers**: JSON number literals of at most :data:`MAX_NUMBER_CHARS` characters
  ("number too long"); ``NaN`` and ``Infinity`` are refused (not JSON).

:func:`read_data_file` picks the format by the file name (``.json``, ``.toml``,
``.yaml``/``.yml``; anything else is read as JSON); :func:`parse_json` parses text or
bytes already in memory (a request body). YAML needs PyYAML, imported only for YAML
files.
"""

from __future__ import annotations

import codecs
import importlib
import json
import os
import stat
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from agentplug.config.errors import AgentplugError, printable

__all__ = [
    "MAX_DEPTH",
    "MAX_FILE_BYTES",
    "MAX_NUMBER_CHARS",
    "MAX_VALUES",
    "DataFileError",
    "check_shape",
    "decode_text",
    "parse_json",
    "read_data_file",
    "read_text_file",
]

MAX_DEPTH = 64
"""Deepest nesting of objects and arrays accepted in a file or a request body."""
MAX_NUMBER_CHARS = 100
"""Longest JSON number literal accepted (a 64-bit integer has 20 characters)."""
MAX_VALUES = 1_000_000
"""Most values (scalars, objects, arrays) one document may hold once parsed."""
MAX_FILE_BYTES = 8 * 1024 * 1024
"""Largest config or scenario file read."""


class DataFileError(AgentplugError, ValueError):
    """A file or body that cannot be read as data. The message is one line.

    ``source`` names the file (or ``request body``); ``problem`` says what is wrong and
    what to do; ``line``/``column`` locate a syntax error when known.
    """

    def __init__(
        self, source: str, problem: str, *, line: int | None = None, column: int | None = None
    ) -> None:
        self.source = source
        self.problem = problem
        self.line = line
        self.column = column
        super().__init__(f"{printable(source)}: {printable(problem)}")


class _NumberTooLong(Exception):
    def __init__(self, literal: str) -> None:
        self.literal = literal


def _number_too_long(literal: str) -> str:
    return (
        f"number too long ({len(literal)} characters; at most {MAX_NUMBER_CHARS}); "
        "write it as a string if it is an identifier"
    )


def _int(literal: str) -> int:
    if len(literal) > MAX_NUMBER_CHARS:
        raise _NumberTooLong(literal)
    return int(literal)


def _float(literal: str) -> float:
    if len(literal) > MAX_NUMBER_CHARS:
        raise _NumberTooLong(literal)
    return float(literal)


def _constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


_BOMS: tuple[tuple[bytes, str], ...] = (
    (codecs.BOM_UTF32_LE, "utf-32"),  # before UTF-16 LE: it starts with the same two bytes
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)


def _encoding(raw: bytes) -> str:
    for bom, name in _BOMS:
        if raw.startswith(bom):
            return name
    # No BOM: text that starts with an ASCII character shows its encoding by where the
    # zero bytes are (RFC 4627 section 3).
    head = raw[:4]
    if len(head) >= 4 and head[:3] == b"\0\0\0":
        return "utf-32-be"
    if len(head) >= 4 and head[1:4] == b"\0\0\0":
        return "utf-32-le"
    if len(head) >= 2 and head[0] == 0:
        return "utf-16-be"
    if len(head) >= 2 and head[1] == 0:
        return "utf-16-le"
    return "utf-8"


def decode_text(raw: bytes, source: str) -> str:
    """``raw`` as text (UTF-8, UTF-16 or UTF-32, see the module docstring)."""
    encoding = _encoding(raw)
    try:
        return raw.decode(encoding)
    except UnicodeDecodeError as exc:
        bad = raw[exc.start : exc.start + 1].hex() or "end of data"
        raise DataFileError(
            source,
            f"is not valid UTF-8 or UTF-16 text (read as {encoding}: byte 0x{bad} at offset "
            f"{exc.start} is invalid); save it as UTF-8",
        ) from None


def check_shape(value: Any, source: str, *, max_depth: int = MAX_DEPTH) -> None:
    """Raise :class:`DataFileError` when ``value`` nests deeper than ``max_depth`` levels
    or holds more than :data:`MAX_VALUES` values (checked without recursion)."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    seen = 0
    while stack:
        item, depth = stack.pop()
        seen += 1
        if seen > MAX_VALUES:
            raise DataFileError(
                source, f"holds more than {MAX_VALUES} values; split it or make it smaller"
            )
        if isinstance(item, Mapping):
            children: Any = item.values()
        elif isinstance(item, list | tuple):
            children = item
        else:
            continue
        if depth >= max_depth:
            raise DataFileError(source, f"JSON nested deeper than {max_depth} levels")
        stack.extend((child, depth + 1) for child in children)


def parse_json(data: str | bytes, source: str, *, max_depth: int = MAX_DEPTH) -> Any:
    """Parse a JSON document within the limits; :class:`DataFileError` otherwise."""
    text = decode_text(data, source) if isinstance(data, bytes) else data
    try:
        value = json.loads(text, parse_int=_int, parse_float=_float, parse_constant=_constant)
    except json.JSONDecodeError as exc:
        raise DataFileError(
            source,
            f"not valid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}",
            line=exc.lineno,
            column=exc.colno,
        ) from None
    except _NumberTooLong as exc:
        raise DataFileError(source, _number_too_long(exc.literal)) from None
    except RecursionError:
        raise DataFileError(source, f"JSON nested deeper than {max_depth} levels") from None
    except ValueError as exc:  # parse_constant: NaN, Infinity
        raise DataFileError(source, f"not valid JSON: {exc}") from None
    check_shape(value, source, max_depth=max_depth)
    return value


def _parse_toml(text: str, source: str, max_depth: int) -> Any:
    import tomllib

    try:
        value = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise DataFileError(source, f"not valid TOML: {exc}") from None
    except RecursionError:
        raise DataFileError(source, f"TOML nested deeper than {max_depth} levels") from None
    except ValueError as exc:  # int() of a literal longer than Python accepts
        raise DataFileError(source, f"not valid TOML: {exc}") from None
    check_shape(value, source, max_depth=max_depth)
    return value


def _parse_yaml(text: str, source: str, max_depth: int) -> Any:
    try:
        yaml: Any = importlib.import_module("yaml")
    except ImportError:
        raise DataFileError(
            source,
            "reading YAML needs PyYAML: pip install 'agentplug[yaml]' (or use a TOML or JSON file)",
        ) from None
    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        at = f" at line {where.line + 1} column {where.column + 1}" if where is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise DataFileError(source, f"not valid YAML{at}: {problem}") from None
    except RecursionError:
        raise DataFileError(source, f"YAML nested deeper than {max_depth} levels") from None
    except ValueError as exc:  # int() of a literal longer than Python accepts
        raise DataFileError(source, f"not valid YAML: {exc}") from None
    check_shape(value, source, max_depth=max_depth)
    return value


_PARSERS: dict[str, Callable[[str, str, int], Any]] = {
    ".toml": _parse_toml,
    ".yaml": _parse_yaml,
    ".yml": _parse_yaml,
}


def read_text_file(path: str | os.PathLike[str], *, max_bytes: int = MAX_FILE_BYTES) -> str:
    """The text of a file (decoded as :func:`decode_text` does), at most ``max_bytes``."""
    p = Path(path)
    source = str(p)
    try:
        with open(p, "rb") as handle:
            if stat.S_ISDIR(os.fstat(handle.fileno()).st_mode):
                raise IsADirectoryError
            raw = handle.read(max_bytes + 1)
    except FileNotFoundError:
        raise DataFileError(source, "does not exist; check the path") from None
    except IsADirectoryError:
        raise DataFileError(source, "is a directory, not a file; pass the file's path") from None
    except OSError as exc:
        raise DataFileError(source, f"cannot be read: {exc.strerror or exc}") from None
    if len(raw) > max_bytes:
        raise DataFileError(source, f"is larger than {max_bytes} bytes; make it smaller")
    return decode_text(raw, source)


def read_data_file(
    path: str | os.PathLike[str],
    *,
    max_bytes: int = MAX_FILE_BYTES,
    max_depth: int = MAX_DEPTH,
) -> Any:
    """Read and parse a JSON, TOML or YAML file (chosen by its suffix; JSON otherwise)."""
    p = Path(path)
    text = read_text_file(p, max_bytes=max_bytes)
    parser = _PARSERS.get(p.suffix.lower())
    if parser is None:
        return parse_json(text, str(p), max_depth=max_depth)
    return parser(text, str(p), max_depth)
