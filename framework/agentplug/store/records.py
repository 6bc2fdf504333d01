"""The records of ``agentplug state export|import``: one model per kind, checked before
anything is written.

An export is JSON lines: a :class:`ExportHeader`, then :class:`KvRecord`,
:class:`QueueRecord` and :class:`ChannelRecord` lines. Every backend's ``load`` runs
:func:`split_records`, which checks every record against these models (the key rule,
integer ranges, finite and plausible leases, no duplicates) and raises
:class:`BadRecords` naming each bad one, so a bad file changes nothing.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
)
from pydantic_core import PydanticCustomError

from agentplug.store.base import MAX_KEY_BYTES, dump_value, key_problem

__all__ = [
    "EXPORT_FORMAT",
    "FORMAT_VERSION",
    "MAX_COUNTER",
    "MAX_LEASE_AHEAD_S",
    "SHOWN_PROBLEMS",
    "BadRecords",
    "ChannelRecord",
    "ExportHeader",
    "KvRecord",
    "QueueRecord",
    "RecordProblem",
    "header_problems",
    "join_records",
    "record_problems",
    "split_records",
]

EXPORT_FORMAT = "agentplug-state"
"""The ``format`` of an export's header line."""
FORMAT_VERSION = 1
"""The newest ``format_version`` this agentplug reads and the one it writes."""
MAX_COUNTER = 2**62
"""The largest queue ``seq`` and channel ``version`` an import accepts: well inside the
64-bit integers both databases store, with room for the counters to go on growing."""
MAX_LEASE_AHEAD_S = 86_400
"""How far after the import a claim's ``claimed_until`` may end (one day; the leases
agentplug takes last seconds to minutes). A later or non-finite end is refused: that
entry could not be claimed again for that long."""
SHOWN_PROBLEMS = 20
"""How many problems :class:`BadRecords` lists one by one; it counts the rest."""


def _rule(name: str) -> str:
    problem = key_problem(name)
    if problem is not None:
        raise PydanticCustomError(
            "key_rule",
            "{problem}; names are at most {limit} bytes of UTF-8 without NUL characters",
            {"problem": problem, "limit": MAX_KEY_BYTES},
        )
    return name


_Name = Annotated[str, AfterValidator(_rule)]
_Count = Annotated[int, Field(ge=0, le=MAX_COUNTER)]


def _json_value(value: Any) -> Any:
    try:
        dump_value(value)
    except (TypeError, RecursionError) as exc:
        raise PydanticCustomError("json_value", "{why}", {"why": str(exc)}) from None
    return value


_JsonValue = Annotated[Any, AfterValidator(_json_value)]


class _Record(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)


class ExportHeader(BaseModel):
    """The first line of an export. Fields other than these are ignored."""

    model_config = ConfigDict(strict=True, extra="ignore", frozen=True)

    kind: Literal["header"]
    format: Literal["agentplug-state"]
    format_version: Annotated[int, Field(ge=1)]
    schema_version: _Count | None = None
    source: str | None = None

    @field_validator("format_version")
    @classmethod
    def _readable(cls, version: int) -> int:
        if version > FORMAT_VERSION:
            raise PydanticCustomError(
                "format_version",
                "format version {version} is newer than this agentplug reads ({known});"
                " import it with a newer agentplug",
                {"version": version, "known": FORMAT_VERSION},
            )
        return version


class KvRecord(_Record):
    """One key of one namespace and its value."""

    kind: Literal["kv"]
    namespace: _Name
    key: _Name
    value: _JsonValue


class QueueRecord(_Record):
    """One queue entry, with its sequence number and its claim (owner and lease end)."""

    kind: Literal["queue"]
    namespace: _Name
    queue: _Name
    seq: Annotated[int, Field(ge=1, le=MAX_COUNTER)]
    value: _JsonValue
    claim_owner: _Name | None = None
    claimed_until: Annotated[float, Field(ge=0, allow_inf_nan=False)] = 0.0

    @field_validator("claimed_until")
    @classmethod
    def _plausible_lease(cls, until: float) -> float:
        latest = time.time() + MAX_LEASE_AHEAD_S
        if until > latest:
            raise PydanticCustomError(
                "lease_too_long",
                "a lease must end within {days} day of the import (this one ends at epoch"
                " {until:.0f}); set it to 0 to release the claim",
                {"days": MAX_LEASE_AHEAD_S // 86_400, "until": until},
            )
        return until


class ChannelRecord(_Record):
    """One change channel and how many times it was notified."""

    kind: Literal["channel"]
    channel: _Name
    version: _Count


_KINDS: dict[str, type[_Record]] = {"kv": KvRecord, "queue": QueueRecord, "channel": ChannelRecord}


@dataclass(frozen=True)
class RecordProblem:
    """What is wrong with one record: its ``number`` (1 for the first), ``kind``, the
    ``field`` and why; ``first`` is the record a duplicate repeats."""

    number: int
    kind: str
    field: str
    message: str
    first: int | None = None

    def line(self, where: Callable[[int], str] = lambda n: f"record {n}") -> str:
        """One line: ``record 3 (queue) seq: ...``; ``where`` names a record number."""
        also = f" (first at {where(self.first)})" if self.first is not None else ""
        return f"{where(self.number)} ({self.kind}) {self.field}: {self.message}{also}"


class BadRecords(ValueError):
    """Records an import refuses; ``problems`` lists the first :data:`SHOWN_PROBLEMS`,
    ``count`` how many records were bad. The message is one line."""

    def __init__(self, problems: list[RecordProblem], count: int) -> None:
        self.problems = problems
        self.count = count
        shown = "; ".join(p.line() for p in problems)
        listed = len({p.number for p in problems})
        more = f"; and {count - listed} more" if count > listed else ""
        super().__init__(f"{count} bad record(s), nothing imported: {shown}{more}")


def _field(error: Any) -> str:
    return ".".join(str(part) for part in error["loc"]) or "record"


def _message(error: Any) -> str:
    if error["type"] == "extra_forbidden":
        return "not a field of this kind of record"
    return str(error["msg"]).removeprefix("Value error, ")


def _check(
    record: object, number: int, kinds: Mapping[str, type[BaseModel]] = _KINDS
) -> tuple[list[RecordProblem], BaseModel | None]:
    if not isinstance(record, Mapping):
        return [RecordProblem(number, "?", "record", "not a JSON object")], None
    kind = record.get("kind")
    model = kinds.get(kind) if isinstance(kind, str) else None
    if model is None:
        why = f"{kind!r} is not a kind of record (one of {', '.join(kinds)})"
        return [RecordProblem(number, str(kind), "kind", why)], None
    try:
        return [], model.model_validate(record)
    except ValidationError as exc:
        return [
            RecordProblem(number, str(kind), _field(error), _message(error))
            for error in exc.errors()
        ], None


def record_problems(record: object, number: int) -> list[RecordProblem]:
    """What is wrong with one record on its own (duplicates need the others: see
    :func:`split_records`); empty when it can be imported."""
    return _check(record, number)[0]


def header_problems(record: object, number: int = 1) -> list[RecordProblem]:
    """What is wrong with an export's header line; empty when this agentplug reads it."""
    return _check(record, number, {"header": ExportHeader})[0]


KvRow = tuple[str, str, str]
QueueRow = tuple[int, str, str, str, str | None, float]
ChannelRow = tuple[str, int]


def join_records(
    kv: Iterable[Sequence[Any]], queue: Iterable[Sequence[Any]], channels: Iterable[Sequence[Any]]
) -> Iterator[dict[str, Any]]:
    """The export records of table rows (the inverse of :func:`split_records`): ``kv`` as
    ``(namespace, key, raw JSON)``, ``queue`` as ``(seq, namespace, queue, raw JSON,
    claim_owner, claimed_until)``, ``channels`` as ``(channel, version)``. Lazy: each
    iterable is read only once the records before it were taken."""
    for ns, key, raw in kv:
        yield {"kind": "kv", "namespace": ns, "key": key, "value": json.loads(raw)}
    for seq, ns, name, raw, owner, until in queue:
        yield {
            "kind": "queue",
            "namespace": ns,
            "queue": name,
            "seq": int(seq),
            "value": json.loads(raw),
            "claim_owner": owner,
            "claimed_until": float(until or 0.0),
        }
    for channel, version in channels:
        yield {"kind": "channel", "channel": channel, "version": int(version)}


class _Rows:
    """The table rows of the records checked so far, and where each key was first seen."""

    def __init__(self) -> None:
        self.kv: list[KvRow] = []
        self.queue: list[QueueRow] = []
        self.channels: list[ChannelRow] = []
        self.seen: dict[tuple[str, ...], int] = {}

    def add(self, record: BaseModel, number: int) -> RecordProblem | None:
        identity: tuple[str, ...]
        if isinstance(record, KvRecord):
            identity, field = ("kv", record.namespace, record.key), "key"
        elif isinstance(record, QueueRecord):
            identity, field = ("queue", str(record.seq)), "seq"
        else:
            assert isinstance(record, ChannelRecord)
            identity, field = ("channel", record.channel), "channel"
        first = self.seen.setdefault(identity, number)
        if first != number:
            return RecordProblem(number, identity[0], field, "appears twice", first)
        if isinstance(record, KvRecord):
            self.kv.append((record.namespace, record.key, dump_value(record.value)))
        elif isinstance(record, QueueRecord):
            self.queue.append(
                (
                    record.seq,
                    record.namespace,
                    record.queue,
                    dump_value(record.value),
                    record.claim_owner,
                    record.claimed_until,
                )
            )
        elif isinstance(record, ChannelRecord):
            self.channels.append((record.channel, record.version))
        return None


def split_records(
    records: Iterable[Mapping[str, Any]],
) -> tuple[list[KvRow], list[QueueRow], list[ChannelRow]]:
    """Check every record and split them into table rows (values as JSON text, queue
    entries in sequence order). A ``header`` record is skipped.

    Raises :class:`BadRecords` naming every bad record (its number counts from 1 in
    ``records``, a header included): a wrong field, a name that breaks the key rule,
    a number out of range, a lease that is not finite or ends over a day ahead, a key,
    queue ``seq`` or channel that appears twice.
    """
    rows = _Rows()
    problems: list[RecordProblem] = []
    bad = 0
    for number, record in enumerate(records, 1):
        if isinstance(record, Mapping) and record.get("kind") == "header":
            continue
        found, checked = _check(record, number)
        if checked is not None:
            duplicate = rows.add(checked, number)
            found = [duplicate] if duplicate else []
        if found:
            bad += 1
            problems.extend(found[: max(0, SHOWN_PROBLEMS - len(problems))])
    if bad:
        raise BadRecords(problems, bad)
    rows.queue.sort()
    return rows.kv, rows.queue, rows.channels
