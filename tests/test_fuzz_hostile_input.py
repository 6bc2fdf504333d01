"""Fuzzing the readers of outside data: hostile input gets a 4xx or a one-line error.

Issue 18 acceptance: with hypothesis (bounded examples, a deterministic seed), the
config loader (and doctor's section checks), the scenario loader and the control API's
body parser never let anything but their own error escape, whatever the bytes: deep
nesting, huge numbers, random encodings and BOMs, random JSON shapes in every section.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

hypothesis = pytest.importorskip("hypothesis")
from agentplug.actions.config_check import check_config  # noqa: E402
from agentplug.config.model import load_config  # noqa: E402
from agentplug.core.errors import AgentplugError  # noqa: E402
from agentplug.testing.scenario import load_scenario  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

FUZZ = settings(
    max_examples=150,
    derandomize=True,  # the same examples on every run and machine
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=20),
)
json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=12), inner, max_size=4)
    ),
    max_leaves=30,
)
KEYS = [
    "plugins",
    "runtime",
    "security",
    "actions",
    "customActions",
    "steps",
    "config",
    "approvals",
    "description",
]
SECTIONS = ["shell", "media", "restart", "plugins", "disabled", "ssrf", "install_policy", "emotes"]


@st.composite
def hostile_documents(draw: st.DrawFn) -> bytes:
    """Bytes that look like, or are near, a JSON config/scenario/body."""
    kind = draw(st.sampled_from(["shaped", "deep", "number", "bytes", "encoded", "spliced"]))
    if kind == "shaped":
        doc = draw(st.dictionaries(st.sampled_from(KEYS), json_values, max_size=5))
        for section in ("actions", "security"):
            if section in doc and draw(st.booleans()):
                doc[section] = draw(
                    st.dictionaries(
                        st.sampled_from(SECTIONS),
                        json_values,
                        max_size=3,
                    )
                )
        return json.dumps(doc).encode("utf-8")
    if kind == "deep":
        depth = draw(st.integers(min_value=1, max_value=20_000))
        opener, closer = draw(st.sampled_from([("[", "]"), ('{"a":', "}")]))
        inner = (
            "[" * depth + "]" * depth if opener == "[" else opener * depth + "1" + closer * depth
        )
        return ('{"steps": ' + inner + "}").encode("utf-8")
    if kind == "number":
        digits = draw(st.integers(min_value=1, max_value=6000))
        literal = draw(st.sampled_from(["9" * digits, "1." + "0" * digits, "1e" + "9" * digits]))
        return ('{"runtime": {"defaultTimeoutMs": ' + literal + "}}").encode("ascii")
    if kind == "bytes":
        return draw(st.binary(max_size=200))
    if kind == "encoded":
        text = json.dumps(draw(st.dictionaries(st.sampled_from(KEYS), json_values, max_size=3)))
        encoding = draw(st.sampled_from(["utf-16", "utf-16-le", "utf-32", "latin-1", "cp1252"]))
        return text.encode(encoding, errors="replace") + draw(st.binary(max_size=3))
    base = json.dumps(draw(st.dictionaries(st.sampled_from(KEYS), json_values, max_size=3)))
    cut = draw(st.integers(min_value=0, max_value=len(base)))
    return (base[:cut] + draw(st.text(max_size=10)) + base[cut:]).encode("utf-8", "replace")


@contextlib.contextmanager
def _one_file(data: bytes, suffix: str = ".json") -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="agentplug-fuzz-") as folder:
        path = Path(folder) / f"input{suffix}"
        path.write_bytes(data)
        yield path


def _assert_readable(exc: AgentplugError, path: Path) -> None:
    lines = str(exc).splitlines()
    assert lines and str(path) in lines[0]
    assert all(line.startswith("  ") for line in lines[1:])  # one line per key, indented
    assert "Traceback" not in str(exc)


@FUZZ
@given(hostile_documents())
def test_the_config_loader_and_doctor_checks_only_raise_readable_errors(data: bytes) -> None:
    with _one_file(data) as path:
        try:
            config = load_config(path)
        except AgentplugError as exc:
            _assert_readable(exc, path)
            return
    for key, problem in check_config(config):  # never raises: problems are data
        assert "\n" not in key and "could not be checked" not in problem, (key, problem)


@FUZZ
@given(hostile_documents(), st.sampled_from([".json", ".toml"]))
def test_the_scenario_loader_only_raises_readable_errors(data: bytes, suffix: str) -> None:
    with _one_file(data, suffix) as path:
        try:
            load_scenario(path)
        except AgentplugError as exc:
            _assert_readable(exc, path)


def _body(data: bytes, chunk: int) -> Any:
    from agentplug.api.routes.base import ApiBase
    from starlette.requests import Request

    pieces = [data[i : i + chunk] for i in range(0, len(data), chunk)] or [b""]
    messages = [
        {"type": "http.request", "body": piece, "more_body": index < len(pieces) - 1}
        for index, piece in enumerate(pieces)
    ]

    async def receive() -> dict[str, Any]:
        return messages.pop(0) if messages else {"type": "http.disconnect"}

    scope = {
        "type": "http",
        "method": "POST",
        "path": "/api/terminal/run",
        "headers": [(b"content-type", b"application/json")],
        "query_string": b"",
    }
    return asyncio.run(ApiBase._body(Request(scope, receive)))


@FUZZ
@given(hostile_documents(), st.integers(min_value=1, max_value=4096))
def test_the_api_body_parser_answers_a_4xx_or_an_object(data: bytes, chunk: int) -> None:
    pytest.importorskip("starlette")
    from starlette.exceptions import HTTPException

    try:
        body = _body(data, chunk)
    except HTTPException as exc:
        assert 400 <= exc.status_code < 500
        assert "\n" not in str(exc.detail)
        return
    assert isinstance(body, dict)
