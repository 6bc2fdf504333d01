"""Files that cannot be read as data get one line naming the file, never a traceback.

Issue 18 (items 1 and 4): the config loader, the scenario loader and the commands that
read them (``doctor``, ``actions list``, ``run``, ``serve``) share one reader
(:mod:`agentplug.config.datafiles`) with the same depth, number and size limits as the
control API's request bodies, and one-line errors.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from agentplug.config.datafiles import MAX_DEPTH, DataFileError, parse_json, read_data_file
from agentplug.config.model import ConfigError, ConfigFileError, load_config
from agentplug.testing.scenario import ScenarioError, load_scenario

WAIT_S = 120.0
"""Upper bound for one command (never a timing assertion)."""

BAD_FILES: dict[str, Callable[[Path], Path]] = {}


def bad_file(name: str) -> Callable[[Callable[[Path], Path]], Callable[[Path], Path]]:
    def register(make: Callable[[Path], Path]) -> Callable[[Path], Path]:
        BAD_FILES[name] = make
        return make

    return register


@bad_file("latin-1")
def _latin1(folder: Path) -> Path:
    path = folder / "latin1.json"
    path.write_bytes('{"description": "café"}'.encode("latin-1"))
    return path


@bad_file("nested-10000")
def _deep(folder: Path) -> Path:
    path = folder / "deep.json"
    path.write_text('{"description": ' + "[" * 10_000 + "]" * 10_000 + "}", encoding="utf-8")
    return path


@bad_file("5000-digit-int")
def _huge_int(folder: Path) -> Path:
    path = folder / "huge.json"
    path.write_text('{"description": ' + "9" * 5000 + "}", encoding="utf-8")
    return path


@bad_file("directory")
def _directory(folder: Path) -> Path:
    path = folder / "a-directory.json"
    path.mkdir()
    return path


EXPECTED_PROBLEM = {
    "latin-1": "is not valid UTF-8 or UTF-16 text",
    "nested-10000": f"JSON nested deeper than {MAX_DEPTH} levels",
    "5000-digit-int": "number too long (5000 characters",
    "directory": "is a directory, not a file",
}


# -- the shared reader ------------------------------------------------------------------


@pytest.mark.parametrize("kind", sorted(BAD_FILES))
def test_the_config_loader_gives_one_line_naming_the_file(kind: str, tmp_path: Path) -> None:
    path = BAD_FILES[kind](tmp_path)
    with pytest.raises(ConfigFileError) as info:
        load_config(path)
    message = str(info.value)
    assert "\n" not in message
    assert str(path) in message and EXPECTED_PROBLEM[kind] in message
    assert isinstance(info.value, ConfigError)  # callers catching ConfigError still do


@pytest.mark.parametrize("kind", sorted(BAD_FILES))
def test_the_scenario_loader_gives_one_line_naming_the_file(kind: str, tmp_path: Path) -> None:
    path = BAD_FILES[kind](tmp_path)
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    message = str(info.value)
    assert "\n" not in message
    assert str(path) in message and EXPECTED_PROBLEM[kind] in message


def test_config_files_have_the_same_depth_limit_as_request_bodies(tmp_path: Path) -> None:
    at_limit = {"x": json.loads("[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1))}
    path = tmp_path / "agentplug.json"
    path.write_text(json.dumps({"ui": at_limit}), encoding="utf-8")
    with pytest.raises(ConfigFileError, match=f"nested deeper than {MAX_DEPTH}"):
        load_config(path)
    path.write_text(json.dumps({"ui": at_limit["x"]}), encoding="utf-8")
    assert load_config(path).model_extra == {"ui": at_limit["x"]}


def test_a_utf16_config_file_with_a_bom_is_read(tmp_path: Path) -> None:
    path = tmp_path / "agentplug.json"
    path.write_bytes(json.dumps({"runtime": {"defaultTimeoutMs": 1234}}).encode("utf-16"))
    assert load_config(path).runtime.default_timeout_ms == 1234


def test_nan_and_infinity_are_not_json(tmp_path: Path) -> None:
    for literal in ("NaN", "Infinity", "-Infinity"):
        with pytest.raises(DataFileError, match="not a JSON value"):
            parse_json('{"a": ' + literal + "}", "body")


def test_toml_files_get_the_same_limits(tmp_path: Path) -> None:
    deep = tmp_path / "deep.toml"
    deep.write_text("a = " + "[" * 10_000 + "]" * 10_000 + "\n", encoding="utf-8")
    with pytest.raises(DataFileError, match="nested deeper"):
        read_data_file(deep)
    huge = tmp_path / "huge.toml"
    huge.write_text("a = " + "9" * 5000 + "\n", encoding="utf-8")
    with pytest.raises(DataFileError) as info:
        read_data_file(huge)
    assert "\n" not in str(info.value) and str(huge) in str(info.value)


def test_yaml_aliases_cannot_expand_past_the_value_limit(tmp_path: Path) -> None:
    pytest.importorskip("yaml")
    lines = ['a0: &a0 ["x", "x", "x", "x", "x", "x", "x", "x", "x", "x"]']
    for level in range(1, 9):
        refs = ", ".join([f"*a{level - 1}"] * 10)
        lines.append(f"a{level}: &a{level} [{refs}]")
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(DataFileError, match="more than"):
        read_data_file(bomb)


# -- the commands -----------------------------------------------------------------------


def _agentplug(*argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "AGENTPLUG_CACHE_DIR": str(cwd / ".cache")}
    env.pop("AGENTPLUG_CONFIG", None)
    return subprocess.run(
        [sys.executable, "-m", "agentplug.cli", *argv],
        capture_output=True,
        text=True,
        timeout=WAIT_S,
        cwd=cwd,
        env=env,
        check=False,
    )


COMMANDS: dict[str, Callable[[Path, Path], list[str]]] = {
    "doctor": lambda f, d: ["doctor", "--config", str(f)],
    "actions list": lambda f, d: ["actions", "list", "--config", str(f)],
    "run": lambda f, d: ["run", str(f)],
    "serve": lambda f, d: ["serve", "--config", str(f), "--port", "0", "--state-dir", str(d)],
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("kind", sorted(BAD_FILES))
def test_every_command_reports_a_bad_file_in_one_line_without_a_traceback(
    command: str, kind: str, tmp_path: Path
) -> None:
    if command == "serve":
        pytest.importorskip("uvicorn")
    path = BAD_FILES[kind](tmp_path)
    done = _agentplug(*COMMANDS[command](path, tmp_path / "state"), cwd=tmp_path)
    output = done.stdout + done.stderr
    assert "Traceback" not in output
    assert done.returncode != 0
    # (doctor's first line says which config file it checks: not an error line)
    naming = [
        line
        for line in output.splitlines()
        if str(path) in line and not line.startswith(f"config: {path} ")
    ]
    assert len(naming) == 1, output
    assert EXPECTED_PROBLEM[kind] in naming[0]


def test_a_key_with_a_line_break_cannot_add_lines_to_an_error(tmp_path: Path) -> None:
    path = tmp_path / "agentplug.json"
    path.write_text(json.dumps({"plugins": {"x\n  runtime.ok: fine\u0085": 1}}), "utf-8")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    lines = str(info.value).splitlines()
    assert len(lines) == 2
    assert "x\\n  runtime.ok: fine\\x85" in lines[1]
