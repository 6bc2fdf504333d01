"""``agentplug state import`` checks every record before it writes any.

Each bad record is reported on its own line with its line number and field, the command
exits 2 (bad input) and the target is left as it was; ``load()`` refuses the same records
on every backend. ``state export`` names the records an import would refuse (rows an older
agentplug wrote before the key rule). Issue 25 item 16.
"""

from __future__ import annotations

import json
import math
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from agentplug.store import StateStore, open_store_url

Records = list[dict[str, Any]]


def _export() -> Records:
    """A valid export: the header (line 1), then one record per line (lines 2 to 6)."""
    return [
        {"kind": "header", "format": "agentplug-state", "format_version": 1},
        {"kind": "kv", "namespace": "ns", "key": "a", "value": {"n": 1}},
        {"kind": "kv", "namespace": "ns", "key": "b", "value": [1, 2]},
        {
            "kind": "queue",
            "namespace": "ns",
            "queue": "q",
            "seq": 1,
            "value": "x",
            "claim_owner": None,
            "claimed_until": 0.0,
        },
        {
            "kind": "queue",
            "namespace": "ns",
            "queue": "q",
            "seq": 2,
            "value": "y",
            "claim_owner": "gw-1",
            "claimed_until": time.time() + 60,
        },
        {"kind": "channel", "channel": "ch", "version": 3},
    ]


def _set(line: int, field: str, value: Any) -> Callable[[Records], None]:
    def change(records: Records) -> None:
        records[line - 1][field] = value

    return change


# (change, the line reported, the field reported, a word of the reason)
BAD_INPUTS = {
    "format_version-abc": (_set(1, "format_version", "abc"), 1, "format_version", "integer"),
    "seq-2**70": (_set(4, "seq", 2**70), 4, "seq", "less than"),
    "version-2**64": (_set(6, "version", 2**64), 6, "version", "less than"),
    "nul-key": (_set(2, "key", "a\x00b"), 2, "key", "NUL"),
    "duplicate-key": (_set(3, "key", "a"), 3, "key", "line 2"),
    "lease-Infinity": (_set(5, "claimed_until", math.inf), 5, "claimed_until", "finite"),
    "lease-1e300": (_set(5, "claimed_until", 1e300), 5, "claimed_until", "within"),
}


def _write(path: Path, records: Records) -> Path:
    # json.dumps writes math.inf as Infinity, as a hand-edited or foreign file may hold it.
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def _cli(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agentplug.cli", "state", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _target(request: pytest.FixtureRequest, backend: str, tmp_path: Path) -> str:
    """A store holding one key, ``kept``/``k``."""
    url = (
        f"sqlite:///{tmp_path / 'target.sqlite3'}"
        if backend == "sqlite"
        else str(request.getfixturevalue("postgres_url"))
    )
    store = open_store_url(url)
    store.put("kept", "k", "before")
    store.close()
    return url


def _contents(url: str) -> list[dict[str, Any]]:
    store = open_store_url(url)
    try:
        return list(store.dump())  # type: ignore[attr-defined]
    finally:
        store.close()


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
@pytest.mark.parametrize("case", list(BAD_INPUTS))
def test_a_bad_record_is_named_by_line_and_field_exit_2_and_the_target_is_unchanged(
    request: pytest.FixtureRequest, tmp_path: Path, backend: str, case: str
) -> None:
    change, line, field, reason = BAD_INPUTS[case]
    records = _export()
    change(records)
    export = _write(tmp_path / "bad.jsonl", records)
    target = _target(request, backend, tmp_path)
    before = _contents(target)

    done = _cli(tmp_path, "import", str(export), "--url", target, "--force")

    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert all(entry.startswith("agentplug state import: error: ") for entry in lines), lines
    [named] = [entry for entry in lines if f"{export} line {line} " in entry]
    assert f" {field}: " in named and reason in named, named
    assert "unexpected" not in done.stderr and "Traceback" not in done.stderr
    assert _contents(target) == before


def test_every_bad_record_of_a_file_is_reported_not_only_the_first(tmp_path: Path) -> None:
    records = _export()
    _set(2, "key", "a\x00b")(records)
    _set(4, "seq", -1)(records)
    _set(6, "channel", 7)(records)
    export = _write(tmp_path / "bad.jsonl", records)

    done = _cli(tmp_path, "import", str(export), "--url", f"sqlite:///{tmp_path / 't.db'}")

    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    for line, field in ((2, "key"), (4, "seq"), (6, "channel")):
        assert any(f"line {line} " in entry and f" {field}: " in entry for entry in lines), lines
    assert "3 bad records; nothing was imported" in lines[-1]
    assert not (tmp_path / "t.db").exists()  # the target is not even created


@pytest.mark.parametrize(
    "case", ["seq-2**70", "version-2**64", "nul-key", "duplicate-key", "lease-Infinity"]
)
def test_load_refuses_a_bad_record_naming_its_number_and_field_and_changes_nothing(
    store: StateStore, case: str
) -> None:
    change, line, field, _ = BAD_INPUTS[case]
    records = _export()
    change(records)
    store.put("kept", "k", "before")

    with pytest.raises(ValueError) as caught:
        store.load(records[1:], replace=True)  # type: ignore[attr-defined]

    message = str(caught.value)
    assert f"record {line - 1} " in message and f" {field}: " in message, message
    assert "\n" not in message
    assert store.items("kept") == [("k", "before")]
    assert store.peek("ns", "q") == [] and store.version("ch") == 0


def test_export_names_each_record_an_import_would_refuse_and_exits_1(
    postgres_url: str, tmp_path: Path
) -> None:
    path = tmp_path / "old.sqlite3"
    store = open_store_url(f"sqlite:///{path}")
    store.put("ns", "ok", 3)
    store.close()
    # Rows an agentplug without the key rule wrote: a NUL in a key, a 2 000-byte key.
    db = sqlite3.connect(path)
    db.executemany(
        "INSERT INTO kv(namespace, key, value, updated) VALUES ('ns', ?, ?, 0)",
        [("a\x00b", "1"), ("k" * 2000, "2")],
    )
    db.commit()
    db.close()
    export = tmp_path / "export.jsonl"

    done = _cli(tmp_path, "export", "--url", f"sqlite:///{path}", "-o", str(export))

    assert done.returncode == 1, done.stderr
    assert len(export.read_text().splitlines()) == 4  # the header and every record, kept
    lines = done.stderr.strip().splitlines()
    assert any("line 2 " in entry and "NUL" in entry for entry in lines), lines
    assert any("line 3 " in entry and "2000 bytes" in entry for entry in lines), lines
    assert "Traceback" not in done.stderr

    done = _cli(tmp_path, "import", str(export), "--url", postgres_url)
    assert done.returncode == 2
    assert f"{export} line 2 (kv) key: " in done.stderr
    assert f"{export} line 3 (kv) key: " in done.stderr
    assert _contents(postgres_url) == []


def test_a_line_nested_past_the_json_parser_is_named_by_line_and_exits_2(
    tmp_path: Path,
) -> None:
    records = _export()
    path = _write(tmp_path / "export.jsonl", records)
    with path.open("a", encoding="utf-8") as out:
        out.write('{"kind": "kv", "namespace": "ns", "key": "deep", "value": ')
        out.write("[" * 200_000 + "\n")
    target = f"sqlite:///{tmp_path / 'target.sqlite3'}"
    done = _cli(tmp_path, "import", str(path), "--url", target)
    assert done.returncode == 2, done.stderr
    line = len(records) + 1
    assert f"line {line}" in done.stderr and "unexpected" not in done.stderr
    assert not (tmp_path / "target.sqlite3").exists()
