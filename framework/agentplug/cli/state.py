"""``agentplug state migrate|check|export|import``: the state store as an operator runs it.

Every command works on one store: ``--url``, else ``$AGENTPLUG_STATE_URL``, else the
config's ``state.url``, else ``<state-dir>/state.sqlite3`` (``--state-dir``, else
``$AGENTPLUG_STATE_DIR``, else ``runtime.state_dir``, else ``.agentplug-state``). URLs are
``postgresql://user@host:5432/db``, ``sqlite:///path/state.sqlite3`` or ``memory:``; what is
printed never shows a password.

* ``migrate`` creates or upgrades the schema and prints ``old -> new`` version.
* ``check`` says whether the store is reachable, its backend, URL, schema version and the
  connection failures it saw; exit 1 when it cannot be reached. A state folder whose
  SQLite file was never written (the defaults of a fresh folder) is "not created yet",
  exit 0; a URL naming a file that does not exist is an error.
* ``export`` writes JSON lines (to stdout, or ``-o FILE``): one header, then every key of
  every namespace, every queue entry in order with its claim (owner and lease end), and
  every change-channel version. A record an import would refuse (a key an older agentplug
  stored before the key rule) is written too, named on stderr, and the exit status is 1.
* ``import FILE`` (``-`` for stdin) checks every record first (see
  :mod:`agentplug.store.records`): each bad one is named by line and field, the exit
  status is 2 and nothing is written. Then it writes the export into the store in one
  transaction, keeping queue order, sequence numbers and claims. A store that already
  holds anything is refused, unless ``--force``, which replaces everything in it.

Long exports and imports count their records on stderr every ``--progress-every`` (1000).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any

from agentplug.cli.common import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    command_config,
    command_state,
    error_line,
)
from agentplug.config.lookup import CONFIG_HELP
from agentplug.store import (
    STATE_URL_ENV,
    StateStoreUnavailable,
    StateUrlError,
    store_display_url,
)
from agentplug.store.base import SCHEMA_VERSION, TransferableStore
from agentplug.store.location import STATE_DIR_HELP, StateLocation
from agentplug.store.outages import outage_line
from agentplug.store.records import (
    EXPORT_FORMAT,
    FORMAT_VERSION,
    SHOWN_PROBLEMS,
    BadRecords,
    header_problems,
    record_problems,
    split_records,
)

__all__ = ["EXPORT_FORMAT", "add_state_commands", "store_status"]


class _Refused(Exception):
    """A problem with what the operator asked (exit 2): a bad URL, a missing file. Each
    entry of ``lines`` is printed as one error line."""

    def __init__(self, *lines: str) -> None:
        super().__init__(lines[-1])
        self.lines = lines


def _location(args: argparse.Namespace) -> tuple[StateLocation, Any]:
    """Where the command's store is (the one rule), and the config."""
    config, _ = command_config(args)
    return command_state(args, config, url=args.url, option="--url"), config


def _open(args: argparse.Namespace, *, migrate: bool, must_exist: bool) -> tuple[Any, str]:
    location, _ = _location(args)
    if must_exist and not location.created:
        raise StateStoreUnavailable(
            f"state store {location.display_url} unreachable: no such file (from "
            f"{location.source}); run `agentplug state migrate` to create it, or pass --url"
        )
    try:
        store = location.open(migrate=migrate)
    except StateUrlError as exc:
        raise _Refused(str(exc)) from None
    return store, location.source


def _backend(store: Any) -> str:
    return type(store).__name__.removesuffix("Store").lower()


def store_status(location: StateLocation) -> tuple[list[str], list[str]]:
    """What ``agentplug doctor`` says about the store at ``location``: ``(lines,
    problems)``. Looks without changing anything (no schema upgrade, no new SQLite file)."""
    if location.kind == "memory" or not location.created:
        return [location.describe()], []
    try:
        store = location.open(migrate=False)
    except (StateUrlError, StateStoreUnavailable) as exc:
        return [location.describe()], [f"state ({location.source}): {exc}"]
    try:
        version = int(getattr(store, "schema_version", lambda: SCHEMA_VERSION)())
        health: dict[str, Any] = dict(getattr(store, "health", dict)())
    except StateStoreUnavailable as exc:
        return [location.describe()], [f"state ({location.source}): {exc}"]
    finally:
        store.close()
    line = f"{location.describe()}: {_backend(store)}, reachable"
    line += f", schema v{version}, failures seen {health.get('failures', 0)}"
    outages = health.get("outages") or []
    if outages:
        line += f"; {len(outages)} connection outage(s) recorded, last: {outage_line(outages[-1])}"
    problems = []
    if version < SCHEMA_VERSION:
        problems.append(
            f"state: schema v{version} is older than v{SCHEMA_VERSION}; run "
            "`agentplug state migrate`"
        )
    return [line], problems


def _not_created(args: argparse.Namespace, location: StateLocation) -> int:
    """``state check`` on a state folder whose SQLite file was never written: nothing to
    check yet, and nothing wrong (the first gateway that keeps state creates it)."""
    if args.json:
        report = {
            "reachable": True,
            "created": False,
            "backend": "sqlite",
            "url": location.display_url,
            "source": location.source,
            "state": location.describe(),
        }
        print(json.dumps(report))
        return EXIT_OK
    print(location.describe())
    print(
        "reachable: not created yet (the first gateway that keeps state creates it; "
        "`agentplug state migrate` creates it now)"
    )
    return EXIT_OK


def cmd_check(args: argparse.Namespace) -> int:
    """Is the store reachable; its backend, URL, schema version and failures."""
    location, _ = _location(args)
    # A state folder's file not written yet is no error; a URL naming a missing file is.
    if not location.created and not location.by_url:
        return _not_created(args, location)
    try:
        store, source = _open(args, migrate=False, must_exist=True)
    except StateStoreUnavailable as exc:
        if args.json:
            print(json.dumps({"reachable": False, "error": str(exc)}))
        else:
            print("reachable: no")
            print(f"error: {exc}")
        return EXIT_FAILED
    try:
        version = int(getattr(store, "schema_version", lambda: SCHEMA_VERSION)())
        health: dict[str, Any] = dict(getattr(store, "health", dict)())
        report: dict[str, Any] = {
            "reachable": True,
            "created": True,
            "backend": _backend(store),
            "url": store_display_url(store),
            "source": source,
            "state": location.describe(),
            "schema_version": version,
            "current_schema_version": SCHEMA_VERSION,
            **health,
        }
    except StateStoreUnavailable as exc:
        report = {"reachable": False, "error": str(exc)}
    finally:
        store.close()
    if args.json:
        print(json.dumps(report))
    elif not report["reachable"]:
        print("reachable: no")
        print(f"error: {report['error']}")
    else:
        print("reachable: yes")
        print(f"backend: {report['backend']}")
        print(f"url: {report['url']} (from {source})")
        old = " (run `agentplug state migrate`)" if version < SCHEMA_VERSION else ""
        print(f"schema version: {version} (current {SCHEMA_VERSION}){old}")
        if "failures" in health:
            print(f"failures: {health['failures']}")
            print(f"last error: {health.get('last_error') or 'none'}")
        if "outages" in health:
            outages = health["outages"]
            print(f"outages recorded: {len(outages)}")
            for outage in outages[-5:]:
                print(f"  {outage_line(outage)}")
    return EXIT_OK if report["reachable"] else EXIT_FAILED


def cmd_migrate(args: argparse.Namespace) -> int:
    """Create or upgrade the schema; print ``old -> new``."""
    store, _ = _open(args, migrate=True, must_exist=False)
    try:
        old = int(getattr(store, "migrated_from", SCHEMA_VERSION))
        new = int(getattr(store, "schema_version", lambda: SCHEMA_VERSION)())
    finally:
        store.close()
    shown = store_display_url(store)
    if old == new:
        print(f"{shown}: schema version {new}, already current")
    else:
        print(f"{shown}: schema version {old} -> {new}")
    return EXIT_OK


def _transferable(store: Any) -> TransferableStore:
    if not isinstance(store, TransferableStore):
        raise _Refused(f"{store_display_url(store)} cannot be exported or imported")
    return store


def _counted(records: Iterable[dict[str, Any]], every: int, what: str) -> Iterator[dict[str, Any]]:
    for count, record in enumerate(records, 1):
        if every > 0 and count % every == 0:
            print(f"agentplug state {what}: {count} records...", file=sys.stderr, flush=True)
        yield record


def cmd_export(args: argparse.Namespace) -> int:
    """JSON lines of every key, queue entry (with its claim) and channel version."""
    store, _ = _open(args, migrate=True, must_exist=True)
    out: IO[str] = sys.stdout
    try:
        source = _transferable(store)
        if args.output:
            out = Path(args.output).open("w", encoding="utf-8")  # noqa: SIM115 (closed below)
        header = {
            "kind": "header",
            "format": EXPORT_FORMAT,
            "format_version": FORMAT_VERSION,
            "schema_version": SCHEMA_VERSION,
            "source": store_display_url(store),
        }
        out.write(json.dumps(header) + "\n")
        kinds: dict[str, int] = {}
        bad = 0
        shown = args.output or "<stdout>"
        for number, record in enumerate(_counted(source.dump(), args.progress_every, "export")):
            kinds[record["kind"]] = kinds.get(record["kind"], 0) + 1
            out.write(json.dumps(record, separators=(",", ":")) + "\n")
            # Rows written before the key rule are exported as they are, and named.
            problems = record_problems(record, number + 1)
            bad += bool(problems)
            for problem in problems:
                where = problem.line(lambda n: f"{shown} line {n + 1}")  # the header is line 1
                error_line(args, f"{where}; `agentplug state import` refuses it")
        out.flush()
    finally:
        if out is not sys.stdout:
            out.close()
        store.close()
    total = sum(kinds.values())
    print(
        f"agentplug state export: {total} records ({kinds.get('kv', 0)} keys, "
        f"{kinds.get('queue', 0)} queue entries, {kinds.get('channel', 0)} channels) from "
        f"{store_display_url(store)}",
        file=sys.stderr,
    )
    if bad:
        error_line(
            args,
            f"{bad} record(s) an import would refuse (named above); delete or rename them in "
            "the source store and export again",
        )
        return EXIT_FAILED
    return EXIT_OK


def _read_export(path: str) -> list[dict[str, Any]]:
    """The records of an export, every one checked first: :class:`_Refused` names each bad
    line and field, so a bad file never reaches the store."""
    try:
        stream = sys.stdin if path == "-" else Path(path).open(encoding="utf-8")  # noqa: SIM115
    except OSError as exc:
        raise _Refused(f"cannot read {path}: {exc.strerror or exc}") from None
    records: list[Any] = []
    lines: list[int] = []  # the line of each record
    unreadable: list[tuple[int, str]] = []
    bad_lines = 0
    with stream:
        for number, text in enumerate(stream, 1):
            if not text.strip():
                continue
            try:
                record = json.loads(text)
            except (ValueError, RecursionError) as exc:  # nested past the parser's depth
                bad_lines += 1
                if len(unreadable) < SHOWN_PROBLEMS:
                    unreadable.append((number, f"{path} line {number}: not JSON ({exc})"))
                continue
            if not (records or bad_lines) and _is_header(record):
                found = header_problems(record, number)
                if found:  # a file this agentplug cannot read: its records are not checked
                    shown = [p.line(lambda n: f"{path} line {n}") for p in found]
                    raise _Refused(
                        *shown,
                        f"{path}: not an {EXPORT_FORMAT} export this "
                        "agentplug reads; nothing was imported",
                    )
                continue
            records.append(record)
            lines.append(number)
    try:
        split_records(records)
        problems: list[tuple[int, str]] = []
        bad = 0
    except BadRecords as exc:
        where = lambda n: f"{path} line {lines[n - 1]}"  # noqa: E731
        problems = [(lines[p.number - 1], p.line(where)) for p in exc.problems]
        bad = exc.count
    if not (bad or bad_lines):
        return records
    listed = sorted(unreadable + problems)[:SHOWN_PROBLEMS]
    total = bad + bad_lines
    more = ""
    if total > len({line for line, _ in listed}):
        more = f" (the first {len(listed)} problems are shown)"
    raise _Refused(
        *(text for _, text in listed),
        f"{path}: {total} bad record{'s' if total != 1 else ''}{more}; nothing was imported"
        " (the target is unchanged): fix or remove them",
    )


def _is_header(record: Any) -> bool:
    return isinstance(record, dict) and record.get("kind") == "header"


def cmd_import(args: argparse.Namespace) -> int:
    """Write an export into the store (refused when it is not empty, unless --force)."""
    records = _read_export(args.file)
    store, _ = _open(args, migrate=True, must_exist=False)
    try:
        target = _transferable(store)
        try:
            counted = _counted(records, args.progress_every, "import")
            count = target.load(counted, replace=args.force)
        except ValueError as exc:
            hint = "; pass --force to replace everything in it" if "not empty" in str(exc) else ""
            raise _Refused(f"{exc}{hint}") from None
    finally:
        store.close()
    print(f"imported {count} records into {store_display_url(store)}")
    return EXIT_OK


def _run(command: Any) -> Any:
    def run(args: argparse.Namespace) -> int:
        try:
            code: int = command(args)
        except _Refused as exc:
            for line in exc.lines:
                error_line(args, line)
            return EXIT_USAGE
        except StateStoreUnavailable as exc:
            error_line(args, str(exc))
            return EXIT_FAILED
        return code

    return run


def add_state_commands(sub: Any) -> None:
    """``agentplug state migrate|check|export|import``."""
    group = sub.add_parser(
        "state",
        help="migrate, check, export or import the state store (SQLite or PostgreSQL)",
        description=(__doc__ or "").split("\n\n")[1],
    )
    commands = group.add_subparsers(dest="state_command", required=True, metavar="COMMAND")
    parsers = {
        "migrate": commands.add_parser(
            "migrate", help="create or upgrade the store's schema (prints old -> new version)"
        ),
        "check": commands.add_parser(
            "check",
            help="reachable? backend, URL, schema version, failures seen (exit 1: unreachable)",
        ),
        "export": commands.add_parser(
            "export", help="every key, queue entry (with its claim) and channel as JSON lines"
        ),
        "import": commands.add_parser(
            "import", help="load an export into an empty store (--force replaces its contents)"
        ),
    }
    parsers["migrate"].set_defaults(func=_run(cmd_migrate))
    parsers["check"].add_argument("--json", action="store_true", help="print one JSON object")
    parsers["check"].set_defaults(func=_run(cmd_check))
    parsers["export"].add_argument(
        "-o", "--output", metavar="FILE", help="write to FILE (default: stdout)"
    )
    parsers["export"].set_defaults(func=_run(cmd_export))
    parsers["import"].add_argument("file", metavar="FILE", help="an export (- reads stdin)")
    parsers["import"].add_argument(
        "--force",
        action="store_true",
        help="import into a store that is not empty: everything in it is replaced",
    )
    parsers["import"].set_defaults(func=_run(cmd_import))
    for name, p in parsers.items():
        p.add_argument(
            "--url",
            metavar="URL",
            help=f"the store (default: ${STATE_URL_ENV}, else state.url, else "
            "<state-dir>/state.sqlite3)",
        )
        p.add_argument("--config", metavar="FILE", help=CONFIG_HELP)
        p.add_argument(
            "--state-dir",
            metavar="DIR",
            help=STATE_DIR_HELP,
        )
        if name in ("export", "import"):
            p.add_argument(
                "--progress-every",
                type=int,
                default=1000,
                metavar="N",
                help="count records on stderr every N (0: never; default 1000)",
            )
