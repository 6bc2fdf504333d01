"""One config lookup for every command: ``--config``, then ``AGENTPLUG_CONFIG``, then
``./agentplug.{toml,yaml,json}``, then none; ``-v`` says which file, doctor always does."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from agentplug.cli.main import main
from agentplug.config.lookup import locate_config, resolve_config

BAD = {"runtime": {"defaultTimeoutMs": 0}}  # invalid: proves the command read the file
GOOD = {"runtime": {"defaultTimeoutMs": 1234}}

COMMANDS = {
    "hooks": ["hooks", "--builtin-only"],
    "plugins": ["plugins"],
    "doctor": ["doctor"],
    "actions-list": ["actions", "list"],
    "actions-test": ["actions", "test", "NO_SUCH_ACTION"],
    "actions-run": ["actions", "run", "CORE_STATUS"],
    "serve": ["serve", "--port", "0"],
    "plugin-list": ["plugin", "list"],
    "plugin-ejected": ["plugin", "ejected"],
    "approvals-list": ["approvals", "list"],
}
SOURCES = ["--config", "AGENTPLUG_CONFIG", "agentplug.toml", "agentplug.yaml", "agentplug.json"]


def _toml(data: dict[str, dict[str, int]]) -> str:
    return "".join(
        f"[{section}]\n" + "".join(f"{k} = {v}\n" for k, v in values.items())
        for section, values in data.items()
    )


def _yaml(data: dict[str, dict[str, int]]) -> str:
    return "".join(
        f"{section}:\n" + "".join(f"  {k}: {v}\n" for k, v in values.items())
        for section, values in data.items()
    )


def write(folder: Path, name: str, data: dict[str, dict[str, int]]) -> Path:
    path = folder / name
    text = {".toml": _toml, ".yaml": _yaml}.get(path.suffix, json.dumps)(data)
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty working directory, no AGENTPLUG_CONFIG, private state and caches."""
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.delenv("AGENTPLUG_CONFIG", raising=False)
    monkeypatch.setenv("AGENTPLUG_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("AGENTPLUG_STATE_DIR", str(tmp_path / "state"))
    return work


def arrange(source: str, here: Path, monkeypatch: pytest.MonkeyPatch, data: dict) -> list[str]:
    """Put ``data`` where ``source`` looks; return the extra arguments that point at it."""
    if source == "--config":
        return ["--config", str(write(here.parent, "elsewhere.json", data))]
    if source == "AGENTPLUG_CONFIG":
        monkeypatch.setenv("AGENTPLUG_CONFIG", str(write(here.parent, "from-env.toml", data)))
        return []
    write(here, source, data)
    return []


@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize("command", list(COMMANDS))
def test_every_command_reads_its_config_from_each_source(
    command: str,
    source: str,
    here: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    extra = arrange(source, here, monkeypatch, BAD)
    code = main([*COMMANDS[command], *extra])
    out = capsys.readouterr()
    text = out.out + out.err
    assert code == 2, text  # an invalid config is exit 2 everywhere, doctor included
    assert "runtime.defaultTimeoutMs" in text  # the file's own (bad) setting was read
    assert "Traceback" not in text
    lines = [line for line in text.splitlines() if "runtime.defaultTimeoutMs" in line]
    assert len(lines) == 1  # one line naming the file and the key
    expected = {"agentplug.toml", "agentplug.yaml", "agentplug.json"}
    name = source if source in expected else ("elsewhere.json" if extra else "from-env.toml")
    assert name in lines[0]


@pytest.mark.parametrize("source", [*SOURCES, "none"])
@pytest.mark.parametrize("command", [c for c in COMMANDS if c != "serve"])
def test_every_command_says_which_config_it_used_with_v(
    command: str,
    source: str,
    here: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    extra = [] if source == "none" else arrange(source, here, monkeypatch, GOOD)
    main(["-v", *COMMANDS[command], *extra])
    out = capsys.readouterr()
    said = [line for line in out.err.splitlines() if line.startswith("agentplug: config: ")]
    if command == "doctor":  # doctor's report says it, -v or not
        said = [line for line in out.out.splitlines() if line.startswith("config: ")]
    assert len(said) == 1, out
    why = {
        "--config": "(from --config)",
        "AGENTPLUG_CONFIG": "(from $AGENTPLUG_CONFIG)",
        "none": "none, using the defaults",
    }.get(source, "(found in the current directory)")
    assert why in said[0]


def test_doctor_always_says_which_config_it_used(
    here: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(here, "agentplug.toml", GOOD)
    assert main(["doctor"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == (
        "config: agentplug.toml (found in the current directory)"
    )
    (here / "agentplug.toml").unlink()
    assert main(["doctor"]) == 0
    assert capsys.readouterr().out.startswith("config: none, using the defaults")


def test_the_lookup_order_is_flag_then_environment_then_current_directory(
    here: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    flag = write(here.parent, "flag.json", GOOD)
    env = write(here.parent, "env.json", GOOD)
    write(here, "agentplug.json", GOOD)
    monkeypatch.setenv("AGENTPLUG_CONFIG", str(env))
    assert locate_config(str(flag)).path == flag
    assert locate_config(None).path == env
    monkeypatch.setenv("AGENTPLUG_CONFIG", "  ")  # empty counts as unset
    assert locate_config(None).path == Path("agentplug.json")
    (here / "agentplug.json").unlink()
    assert locate_config(None).path is None and locate_config(None).origin == "none"


def test_in_the_current_directory_toml_wins_over_yaml_over_json_and_the_rest_are_named(
    here: Path,
) -> None:
    for name in ("agentplug.json", "agentplug.yaml", "agentplug.toml"):
        write(here, name, GOOD)
    found = locate_config(None)
    assert found.path == Path("agentplug.toml")
    assert found.ignored == (Path("agentplug.yaml"), Path("agentplug.json"))
    assert "ignored: agentplug.yaml, agentplug.json" in found.describe()


@pytest.mark.parametrize("name", ["agentplug.toml", "agentplug.yaml", "agentplug.json"])
def test_each_format_loads_the_same_settings(here: Path, name: str) -> None:
    write(here, name, GOOD)
    config, source = resolve_config(None)
    assert source.path == Path(name)
    assert config.runtime.default_timeout_ms == 1234


def test_the_toml_example_of_the_config_docs_loads(here: Path) -> None:
    docs = (Path(__file__).resolve().parents[1] / "docs" / "config.md").read_text()
    example = docs.split("```toml\n", 1)[1].split("```", 1)[0]
    (here / "agentplug.toml").write_text(example, encoding="utf-8")
    config, _ = resolve_config(None)
    assert config.plugins.deny == ["experimental-plugin"]
    assert config.entry("tool-preflight").hooks.timeouts == {"before_tool_call": 5000}


@pytest.mark.parametrize(
    ("old", "new", "name"),
    [
        ("agentplug.core.config", "agentplug.config.model", "load_config"),
        ("agentplug.core.config_lookup", "agentplug.config.lookup", "locate_config"),
        ("agentplug.core.datafiles", "agentplug.config.datafiles", "read_data_file"),
    ],
)
def test_the_config_modules_old_core_paths_still_import_with_a_deprecation_warning(
    old: str, new: str, name: str
) -> None:
    import importlib
    import sys

    sys.modules.pop(old, None)
    with pytest.warns(DeprecationWarning, match=new.replace(".", r"\.")):
        module = importlib.import_module(old)
    assert getattr(module, name) is getattr(importlib.import_module(new), name)
