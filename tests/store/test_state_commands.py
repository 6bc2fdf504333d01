"""``agentplug state migrate|check|export|import``, ``state.url`` and the refusal to start.

Real processes on real stores: the ``agentplug`` CLI in a subprocess, SQLite files and the
session's PostgreSQL server (``postgres_server``, ``postgres_url`` in tests/conftest.py).
Issue 15 items 1 (config), 5 and 6.
"""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from agentplug.config.model import AgentplugConfig
from agentplug.core.errors import ConfigError
from agentplug.store import open_store_url, store_from_config
from agentplug.store.base import SCHEMA_VERSION

from tests.conftest import write_v1_sqlite_file

SECRET = "s3cret-pw"


def _env(**extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("AGENTPLUG_STATE_URL", "AGENTPLUG_CONFIG", "AGENTPLUG_STATE_DIR")
    }
    env.update(extra)
    return env


def cli(cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agentplug.cli", *args],
        cwd=cwd,
        env=_env(**env),
        capture_output=True,
        text=True,
        timeout=120,
    )


def _closed_port() -> int:
    """A port on 127.0.0.1 with nothing listening."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _with_password(url: str) -> str:
    # The test cluster trusts every connection, so a password is accepted and ignored.
    return url.replace("postgresql://postgres@", f"postgresql://postgres:{SECRET}@", 1)


def _seed(url: str) -> None:
    """Keys in several namespaces, two queues (one entry claimed), channel versions."""
    store = open_store_url(url)
    store.put("approvals.grants", "g1", {"tool": "exec", "n": 1})
    store.put("session.ext", "agent:main:a|plug|state", {"items": [1, 2, 3]})
    store.put("session.ext", "ünïcode-key", "välue")
    store.put("other", "k", None)
    for i in range(5):
        store.append("session.injections", "s1", {"i": i})
    store.append("session.injections", "s2", "only")
    claimed = store.claim("session.injections", "s2", owner="gw-1", lease_ms=600_000)
    assert [value for _, value in claimed] == ["only"]
    for _ in range(3):
        store.notify("approvals:a1")
    store.notify("other")
    store.close()


def _records(path: Path) -> list[dict[str, Any]]:
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert lines[0]["kind"] == "header"
    return lines[1:]


# -- config ---------------------------------------------------------------------------


def test_state_url_with_an_unknown_scheme_is_a_config_error_naming_state_url() -> None:
    with pytest.raises(ConfigError) as caught:
        AgentplugConfig.parse({"state": {"url": f"mysql://root:{SECRET}@db/x"}})
    message = str(caught.value)
    assert "state.url: unknown store scheme; use postgresql://" in message
    assert SECRET not in message


def test_the_state_url_env_var_wins_over_state_url(tmp_path: Path) -> None:
    config = AgentplugConfig.parse({"state": {"url": f"sqlite:///{tmp_path / 'config.db'}"}})
    env = {"AGENTPLUG_STATE_URL": f"sqlite:///{tmp_path / 'env.db'}"}
    store = store_from_config(config, environ=env)
    assert Path(store.path) == tmp_path / "env.db"  # type: ignore[attr-defined]
    store.close()


def test_state_url_wins_over_the_state_dir(tmp_path: Path) -> None:
    config = AgentplugConfig.parse(
        {"state": {"url": f"sqlite:///{tmp_path / 'shared.db'}"}, "runtime": {"stateDir": "x"}}
    )
    store = store_from_config(config, tmp_path / "dir", environ={})
    assert Path(store.path) == tmp_path / "shared.db"  # type: ignore[attr-defined]
    store.close()


def test_a_host_opens_the_store_state_url_names(tmp_path: Path) -> None:
    from agentplug import PluginHost

    url = f"sqlite:///{tmp_path / 'shared.db'}"
    host = PluginHost({"state": {"url": url}}, state_dir=tmp_path / "ignored")
    host.gateway.store.put("ns", "k", 1)
    host.gateway.store.close()
    assert open_store_url(url).get("ns", "k") == 1
    assert not (tmp_path / "ignored").exists()


def test_without_a_state_url_a_host_store_never_imports_psycopg(tmp_path: Path) -> None:
    code = (
        "import sys\nfrom agentplug import PluginHost\n"
        f"h = PluginHost(state_dir={str(tmp_path)!r})\nh.store.put('ns', 'k', 1)\n"
        "print(type(h.store).__name__, 'psycopg' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env=_env(), capture_output=True, text=True, check=True
    )
    assert out.stdout.split() == ["SQLiteStore", "False"]


def test_a_bad_env_state_url_is_one_line_naming_the_variable(tmp_path: Path) -> None:
    done = cli(tmp_path, "state", "check", AGENTPLUG_STATE_URL="redis://x")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "agentplug state check: error: $AGENTPLUG_STATE_URL 'redis': unknown store scheme; "
        "use postgresql://..., sqlite:///path or memory:"
    ]


# -- refusing to start ----------------------------------------------------------------


def _assert_refused(done: subprocess.CompletedProcess[str], command: str, shown: str) -> None:
    assert done.returncode == 1, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(f"agentplug {command}: error: state store {shown} unreachable: ")
    assert SECRET not in done.stderr and "Traceback" not in done.stderr
    assert "listening" not in done.stdout


def test_serve_with_nothing_listening_on_the_database_port_exits_1_with_one_line(
    tmp_path: Path,
) -> None:
    port = _closed_port()
    url = f"postgresql://postgres:{SECRET}@127.0.0.1:{port}/agentplug"
    done = cli(tmp_path, "serve", "--port", "0", AGENTPLUG_STATE_URL=url)
    _assert_refused(done, "serve", f"postgresql://127.0.0.1:{port}/agentplug")
    assert "refused" in done.stderr.lower()


def test_serve_with_a_stopped_database_server_exits_1_with_one_line(
    postgres_server: Any, postgres_url: str, tmp_path: Path
) -> None:
    config = tmp_path / "agentplug.json"
    config.write_text(json.dumps({"state": {"url": _with_password(postgres_url)}}))
    postgres_server.pg_ctl("stop", "-m", "fast")
    try:
        done = cli(tmp_path, "serve", "--port", "0", "--config", str(config))
    finally:
        postgres_server.pg_ctl("start")
    shown = postgres_url.replace("postgresql://postgres@", "postgresql://")
    _assert_refused(done, "serve", shown)


def test_chat_with_an_unreachable_database_exits_1_with_one_line(tmp_path: Path) -> None:
    port = _closed_port()
    url = f"postgresql://postgres:{SECRET}@127.0.0.1:{port}/agentplug"
    done = cli(tmp_path, "chat", "--no-plugins", AGENTPLUG_STATE_URL=url)
    _assert_refused(done, "chat", f"postgresql://127.0.0.1:{port}/agentplug")


# -- state check ------------------------------------------------------------------------


def test_state_check_reports_a_reachable_postgres_store_without_its_password(
    postgres_url: str, tmp_path: Path
) -> None:
    done = cli(tmp_path, "state", "check", "--url", _with_password(postgres_url))
    assert done.returncode == 0, done.stderr
    shown = postgres_url.replace("postgresql://postgres@", "postgresql://")
    assert done.stdout.splitlines() == [
        "reachable: yes",
        "backend: postgres",
        f"url: {shown} (from --url)",
        f"schema version: 0 (current {SCHEMA_VERSION}) (run `agentplug state migrate`)",
        "failures: 0",
        "last error: none",
        "outages recorded: 0",
    ]
    assert SECRET not in done.stdout + done.stderr


def test_state_check_exits_1_when_the_database_is_unreachable(tmp_path: Path) -> None:
    port = _closed_port()
    url = f"postgresql://postgres:{SECRET}@127.0.0.1:{port}/x"
    done = cli(tmp_path, "state", "check", "--json", AGENTPLUG_STATE_URL=url)
    assert done.returncode == 1
    report = json.loads(done.stdout)
    assert report["reachable"] is False
    assert f"postgresql://127.0.0.1:{port}/x unreachable" in report["error"]
    assert SECRET not in done.stdout


def test_state_check_exits_1_when_a_url_names_a_sqlite_file_that_does_not_exist(
    tmp_path: Path,
) -> None:
    missing = tmp_path / "st" / "state.sqlite3"
    done = cli(tmp_path, "state", "check", "--url", f"sqlite:///{missing}")
    assert done.returncode == 1
    assert done.stdout.splitlines()[0] == "reachable: no"
    assert "no such file" in done.stdout
    assert not missing.exists()


def test_state_check_of_a_state_folder_not_written_yet_is_no_error_and_creates_none(
    tmp_path: Path,
) -> None:
    done = cli(tmp_path, "state", "check", "--state-dir", str(tmp_path / "st"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[0] == (
        f"state: sqlite:///{tmp_path / 'st' / 'state.sqlite3'} (from --state-dir; not created yet)"
    )
    assert not (tmp_path / "st").exists()


def test_state_check_on_an_old_file_says_to_migrate_and_changes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite3"
    write_v1_sqlite_file(path)
    done = cli(tmp_path, "state", "check", "--url", f"sqlite:///{path}")
    assert done.returncode == 0, done.stderr
    assert (
        f"schema version: 1 (current {SCHEMA_VERSION}) (run `agentplug state migrate`)"
        in done.stdout
    )
    tables = {r[0] for r in sqlite3.connect(path).execute("SELECT name FROM sqlite_master")}
    assert "meta" not in tables


# -- state migrate ----------------------------------------------------------------------


def test_state_migrate_upgrades_a_v1_sqlite_file_and_prints_old_to_new(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite3"
    write_v1_sqlite_file(path)
    url = f"sqlite:///{path}"
    done = cli(tmp_path, "state", "migrate", "--url", url)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"{url}: schema version 1 -> {SCHEMA_VERSION}"
    store = open_store_url(url)
    assert store.get("ns", "k") == "v" and store.peek("ns", "q") == [1]
    assert store.schema_version() == SCHEMA_VERSION  # type: ignore[attr-defined]
    store.close()


def test_state_migrate_twice_says_the_schema_is_already_current(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.sqlite3'}"
    assert (
        cli(tmp_path, "state", "migrate", "--url", url)
        .stdout.strip()
        .endswith(f"0 -> {SCHEMA_VERSION}")
    )
    again = cli(tmp_path, "state", "migrate", "--url", url)
    assert again.stdout.strip() == f"{url}: schema version {SCHEMA_VERSION}, already current"


# -- export / import --------------------------------------------------------------------


def test_export_import_round_trip_sqlite_postgres_sqlite_loses_nothing(
    postgres_url: str, tmp_path: Path
) -> None:
    first, second = f"sqlite:///{tmp_path / 'a.sqlite3'}", f"sqlite:///{tmp_path / 'b.sqlite3'}"
    _seed(first)
    files = [tmp_path / f"export{i}.jsonl" for i in range(3)]
    for source, target, out in ((first, postgres_url, 0), (postgres_url, second, 1)):
        done = cli(tmp_path, "state", "export", "--url", source, "-o", str(files[out]))
        assert done.returncode == 0, done.stderr
        done = cli(tmp_path, "state", "import", str(files[out]), "--url", target)
        assert done.returncode == 0, done.stderr
    done = cli(tmp_path, "state", "export", "--url", second, "-o", str(files[2]))
    assert done.returncode == 0, done.stderr

    original = _records(files[0])
    assert _records(files[1]) == original
    assert _records(files[2]) == original
    kinds = [r["kind"] for r in original]
    assert kinds.count("kv") == 4 and kinds.count("queue") == 6 and kinds.count("channel") == 2
    queue = [r for r in original if r["kind"] == "queue"]
    assert [r["value"] for r in queue if r["queue"] == "s1"] == [{"i": i} for i in range(5)]
    [held] = [r for r in queue if r["claim_owner"] is not None]
    assert held["value"] == "only" and held["claim_owner"] == "gw-1"


def test_an_imported_claim_is_still_held_and_new_entries_queue_after_it(
    postgres_url: str, tmp_path: Path
) -> None:
    source = f"sqlite:///{tmp_path / 'a.sqlite3'}"
    _seed(source)
    export = tmp_path / "export.jsonl"
    cli(tmp_path, "state", "export", "--url", source, "-o", str(export))
    assert cli(tmp_path, "state", "import", str(export), "--url", postgres_url).returncode == 0
    store = open_store_url(postgres_url)
    assert store.claim("session.injections", "s2", owner="gw-2", lease_ms=1000) == []
    seq = store.append("session.injections", "s2", "next")
    assert store.peek("session.injections", "s2") == ["only", "next"]
    [(held_seq, _)] = [(r["seq"], r) for r in _records(export) if r.get("claim_owner") == "gw-1"]
    assert seq > held_seq
    assert store.ack("session.injections", "s2", [held_seq], owner="gw-1") == 1
    store.close()


def _export_and_a_non_empty_target(tmp_path: Path) -> tuple[Path, str]:
    """An export of a seeded store, and another store holding ``kept``/``k`` = "before"."""
    source, target = f"sqlite:///{tmp_path / 'a.sqlite3'}", f"sqlite:///{tmp_path / 'b.sqlite3'}"
    _seed(source)
    store = open_store_url(target)
    store.put("kept", "k", "before")
    store.close()
    export = tmp_path / "export.jsonl"
    cli(tmp_path, "state", "export", "--url", source, "-o", str(export))
    return export, target


def test_import_into_a_store_that_is_not_empty_is_refused_without_force(tmp_path: Path) -> None:
    export, target = _export_and_a_non_empty_target(tmp_path)

    done = cli(tmp_path, "state", "import", str(export), "--url", target)
    assert done.returncode == 2
    assert "is not empty" in done.stderr and "--force" in done.stderr
    assert open_store_url(target).get("kept", "k") == "before"


def test_import_with_force_replaces_everything_in_the_target(tmp_path: Path) -> None:
    export, target = _export_and_a_non_empty_target(tmp_path)

    done = cli(tmp_path, "state", "import", str(export), "--url", target, "--force")
    assert done.returncode == 0, done.stderr
    assert open_store_url(target).get("kept", "k") is None
    again = tmp_path / "again.jsonl"
    cli(tmp_path, "state", "export", "--url", target, "-o", str(again))
    assert _records(again) == _records(export)


def test_export_counts_records_on_stderr_every_n(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'a.sqlite3'}"
    _seed(url)
    done = cli(tmp_path, "state", "export", "--url", url, "--progress-every", "5")
    assert done.returncode == 0, done.stderr
    assert "agentplug state export: 5 records..." in done.stderr.splitlines()
    assert len(done.stdout.splitlines()) == 1 + 12  # the header and every record


def test_export_uses_the_configured_state_url(postgres_url: str, tmp_path: Path) -> None:
    _seed(postgres_url)
    config = tmp_path / "agentplug.json"
    config.write_text(json.dumps({"state": {"url": postgres_url}}))
    done = cli(tmp_path, "state", "export", "--config", str(config))
    assert done.returncode == 0, done.stderr
    assert len(done.stdout.splitlines()) == 1 + 12


# -- doctor ---------------------------------------------------------------------------


def test_doctor_reports_a_reachable_store_with_its_schema_and_failures(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'a.sqlite3'}"
    _seed(url)
    config = tmp_path / "agentplug.json"
    config.write_text(json.dumps({"state": {"url": url}, "plugins": {"enabled": False}}))
    done = cli(tmp_path, "doctor", "--config", str(config))
    assert (
        f"state: {url} (from state.url): sqlite, reachable, schema v{SCHEMA_VERSION}, "
        "failures seen 0"
    ) in done.stdout.splitlines()


def test_doctor_reports_an_unreachable_store_as_a_problem(tmp_path: Path) -> None:
    port = _closed_port()
    config = tmp_path / "agentplug.json"
    url = f"postgresql://postgres:{SECRET}@127.0.0.1:{port}/x"
    config.write_text(json.dumps({"state": {"url": url}, "plugins": {"enabled": False}}))
    done = cli(tmp_path, "doctor", "--config", str(config))
    assert done.returncode == 1
    [problem] = [line for line in done.stdout.splitlines() if line.startswith("PROBLEM: state")]
    assert f"postgresql://127.0.0.1:{port}/x unreachable" in problem
    assert SECRET not in done.stdout


def _grant(url: str) -> str:
    """Save one allow-always grant in the store ``url`` names; return its id."""
    import asyncio

    from agentplug.services.approvals import ApprovalBroker, ProgrammaticResolver
    from agentplug_hookspecs.tools import ApprovalRequest

    store = open_store_url(url)
    resolver = ProgrammaticResolver()
    resolver.on_pending = lambda p: resolver.resolve(p.id, "allow-always")
    request = ApprovalRequest(title="run it", description="d", plugin_id="plug")
    try:
        verdict = asyncio.run(ApprovalBroker(resolver, store=store).request("exec", {}, request))
    finally:
        store.close()
    assert verdict.grant_id is not None
    return verdict.grant_id


def test_approvals_list_and_revoke_use_the_store_state_url_names(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'shared.sqlite3'}"
    grant = _grant(url)
    (tmp_path / "agentplug.json").write_text(json.dumps({"state": {"url": url}}))
    listed = cli(tmp_path, "approvals", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    assert [g["grant_id"] for g in json.loads(listed.stdout)] == [grant]
    revoked = cli(tmp_path, "approvals", "revoke", grant)
    assert revoked.returncode == 0, revoked.stderr
    assert json.loads(cli(tmp_path, "approvals", "list", "--json").stdout) == []


def test_approvals_list_uses_the_state_url_env_var(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'shared.sqlite3'}"
    grant = _grant(url)
    listed = cli(tmp_path, "approvals", "list", "--json", AGENTPLUG_STATE_URL=url)
    assert [g["grant_id"] for g in json.loads(listed.stdout)] == [grant]


def test_approvals_pending_uses_the_configured_state_url(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'shared.sqlite3'}"
    open_store_url(url).close()
    (tmp_path / "agentplug.json").write_text(json.dumps({"state": {"url": url}}))
    done = cli(tmp_path, "approvals", "pending", "--json")
    assert done.returncode == 0, done.stderr  # no .agentplug-state needed: the URL is used
    assert json.loads(done.stdout) == []


def test_approvals_with_an_unreachable_state_url_is_one_line(tmp_path: Path) -> None:
    url = f"postgresql://postgres@127.0.0.1:{_closed_port()}/none?connect_timeout=1"
    done = cli(tmp_path, "approvals", "list", AGENTPLUG_STATE_URL=url)
    assert done.returncode == 1
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("agentplug approvals list: error: $AGENTPLUG_STATE_URL: ")
