"""The probe's JSON lines, read with every bound: bytes, lines, line length, ranks and each integer.

A file is untrusted input (a paste in the page, a file from a cluster), so nothing is read past its
bounds and every problem names where it is: ``line 3: allocated: Input should be a valid integer``.
Problems are collected (up to :data:`MAX_PROBLEMS`) so that one pass shows what to fix.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Annotated, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from app.ledger.json_text import loads_strict
from app.observed.probe import FORMAT, MARKS, START

MAX_FILE_BYTES = 4 * 1024 * 1024  # what the CLI reads in all; the page has the request's own, smaller cap
MAX_LINES = 50_000  # 4 records a step: 8 ranks × 1,500 steps, or 1,024 ranks × 12 steps
MAX_LINE_BYTES = 1024  # a probe record is about 200 bytes
MAX_RANKS = 4096
MAX_WORLD = 131_072  # the scenario's own bound on D
MAX_STEP = 10**9
MAX_DEVICE_BYTES = 2**50  # 1 PiB: far above any device, low enough to stay exact in JavaScript
MAX_PROBLEMS = 20
INSTANTS: tuple[str, ...] = (START, *MARKS)

DeviceBytes = Annotated[int, Field(ge=0, le=MAX_DEVICE_BYTES)]


class Record(BaseModel):
    """One line of the probe: a rank's allocator figures at a named instant of a step."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    v: Annotated[int, Field(ge=FORMAT, le=FORMAT, description="the probe's format version")]
    rank: Annotated[int, Field(ge=0, lt=MAX_WORLD)]
    world: Annotated[int, Field(ge=1, le=MAX_WORLD)] | None = None
    step: Annotated[int, Field(ge=0, le=MAX_STEP)]
    instant: Literal["start", "end-of-forward", "end-of-backward", "after-step"]
    allocated: DeviceBytes
    max_allocated: DeviceBytes  # the highest allocated since the previous record (the probe resets it)
    reserved: DeviceBytes
    max_reserved: DeviceBytes | None = None
    device_total: DeviceBytes | None = None  # start only: torch.cuda.mem_get_info's total
    device_used: DeviceBytes | None = None  # start only: total − free

    @property
    def order(self) -> tuple[int, int]:
        """Where the record lies in a rank's run: the start first, then step by step, mark by mark."""
        if self.instant == START:
            return (-1, 0)
        return (self.step, MARKS.index(self.instant))


assert get_args(Record.model_fields["instant"].annotation) == INSTANTS  # the probe's names, in step order


@dataclass(frozen=True, slots=True)
class Where:
    """A line of an input: ``observed.jsonl line 3``, or ``line 3`` for a paste."""

    source: str
    line: int

    def __str__(self) -> str:
        return f"{self.source} line {self.line:,}" if self.source else f"line {self.line:,}"


@dataclass(frozen=True, slots=True)
class Problem:
    where: Where | None  # None: the input as a whole (too large, empty)
    field: str  # the record's field, or "" for the line as a whole
    message: str

    def __str__(self) -> str:
        head = "" if self.where is None else f"{self.where}: "
        return f"{head}{self.field + ': ' if self.field else ''}{self.message}"


class ObservedError(ValueError):
    """The input cannot be reconciled; ``problems`` names each line and field."""

    def __init__(self, problems: Iterable[Problem]) -> None:
        self.problems: tuple[Problem, ...] = tuple(problems)
        super().__init__("; ".join(str(p) for p in self.problems))


@dataclass(frozen=True, slots=True)
class Sample:
    record: Record
    where: Where


@dataclass(frozen=True, slots=True)
class Observed:
    """Every rank's records in run order (start first, then step by step)."""

    ranks: dict[int, tuple[Sample, ...]]
    world: int | None  # the world size the records state (all the same), or None when none does

    def start_of(self, rank: int) -> Record | None:
        first = self.ranks[rank][0].record
        return first if first.instant == START else None


def read_lines(data: bytes, source: str = "", *, max_bytes: int = MAX_FILE_BYTES) -> list[Sample]:
    """The records of one input; raises :class:`ObservedError` naming every bad line (up to a bound)."""
    if len(data) > max_bytes:
        raise ObservedError([Problem(None, "", f"{source or 'the input'} is larger than {max_bytes:,} bytes")])
    text = data.removeprefix(b"\xef\xbb\xbf")  # a BOM from a Windows editor is no error
    samples: list[Sample] = []
    problems: list[Problem] = []
    for number, raw in enumerate(text.split(b"\n", MAX_LINES), start=1):  # the rest unsplit: at most one line more
        where = Where(source, number)
        if number > MAX_LINES:
            problems.append(Problem(where, "", f"more than {MAX_LINES:,} lines"))
            break
        line = raw.strip()
        if not line:
            continue  # blank lines (the file's last newline, a blank between concatenated files)
        problem, record = _parse(line, where)
        if problem is not None:
            problems.extend(problem)
            if len(problems) >= MAX_PROBLEMS:
                break
        elif record is not None:
            samples.append(Sample(record, where))
    if problems:
        raise ObservedError(problems[:MAX_PROBLEMS])
    return samples


def _parse(line: bytes, where: Where) -> tuple[list[Problem] | None, Record | None]:
    if len(line) > MAX_LINE_BYTES:
        return [Problem(where, "", f"longer than {MAX_LINE_BYTES:,} bytes (a probe record is about 200)")], None
    try:
        loaded = loads_strict(line)
    except json.JSONDecodeError as exc:  # its own "line 1" would read as the file's: the column alone
        return [Problem(where, "", f"not valid JSON: {exc.msg} at column {exc.colno:,}")], None
    except (ValueError, RecursionError) as exc:  # bad UTF-8, an integer of thousands of digits, deep nesting
        return [Problem(where, "", f"not valid JSON ({exc})")], None
    if not isinstance(loaded, dict):
        return [Problem(where, "", "must be a JSON object, one record per line")], None
    try:
        record = Record.model_validate(loaded)
    except ValidationError as exc:
        return [
            Problem(where, ".".join(str(part) for part in err["loc"]), err["msg"])
            for err in exc.errors(include_url=False)
        ], None
    bad = _inconsistent(record)
    return ([Problem(where, field, message) for field, message in bad] or None), record


def _inconsistent(r: Record) -> list[tuple[str, str]]:
    """What a real allocator never reports (a peak below the current figure, more allocated than reserved)."""
    bad: list[tuple[str, str]] = []
    if r.world is not None and r.rank >= r.world:
        bad.append(("rank", f"{r.rank:,} is not below world {r.world:,}"))
    if r.max_allocated < r.allocated:
        bad.append(("max_allocated", f"{r.max_allocated:,} is below allocated {r.allocated:,}"))
    if r.reserved < r.allocated:
        bad.append(("reserved", f"{r.reserved:,} is below allocated {r.allocated:,}"))
    if r.max_reserved is not None and r.max_reserved < r.reserved:
        bad.append(("max_reserved", f"{r.max_reserved:,} is below reserved {r.reserved:,}"))
    if r.max_reserved is not None and r.max_reserved < r.max_allocated:
        bad.append(("max_reserved", f"{r.max_reserved:,} is below max_allocated {r.max_allocated:,}"))
    if r.instant == START:
        for name in ("device_total", "device_used"):
            if getattr(r, name) is None:
                bad.append((name, "the start record needs it (torch.cuda.mem_get_info)"))
        if r.device_total is not None and r.device_used is not None and r.device_used > r.device_total:
            bad.append(("device_used", f"{r.device_used:,} is above device_total {r.device_total:,}"))
        if r.device_used is not None and r.device_used < r.reserved:  # the CUDA context would be negative
            bad.append(("device_used", f"{r.device_used:,} is below reserved {r.reserved:,}: the device holds at "
                        "least what the allocator reserved"))  # fmt: skip
    else:
        for name in ("device_total", "device_used"):
            if getattr(r, name) is not None:
                bad.append((name, "only the start record carries it"))
    return bad


def collect(samples: Sequence[Sample]) -> Observed:
    """Every rank's records in run order; refuses duplicates, disagreeing world sizes and too many ranks."""
    if not samples:
        raise ObservedError([Problem(None, "", "no records: paste or upload the probe's JSON lines")])
    problems: list[Problem] = []
    seen: dict[tuple[int, int, str], Where] = {}
    worlds: dict[int, Where] = {}
    ranks: dict[int, list[Sample]] = {}
    for sample in samples:
        r = sample.record
        key = (r.rank, -1 if r.instant == START else r.step, r.instant)
        if key in seen:
            what = "start" if r.instant == START else f"step {r.step:,} {r.instant}"
            problems.append(Problem(sample.where, "instant", f"rank {r.rank:,} {what} already on {seen[key]}"))
            continue
        seen[key] = sample.where
        if r.world is not None:
            worlds.setdefault(r.world, sample.where)
        if r.rank not in ranks and len(ranks) == MAX_RANKS:
            problems.append(Problem(sample.where, "rank", f"more than {MAX_RANKS:,} ranks"))
            break
        ranks.setdefault(r.rank, []).append(sample)
    if len(worlds) > 1:
        first, *others = sorted(worlds.items(), key=lambda item: (item[1].source, item[1].line))
        for world, where in others:
            problems.append(Problem(where, "world", f"{world:,}, but {first[1]} says {first[0]:,}"))
    if problems:
        raise ObservedError(problems[:MAX_PROBLEMS])
    ordered = {rank: tuple(sorted(found, key=lambda s: s.record.order)) for rank, found in sorted(ranks.items())}
    return Observed(ordered, next(iter(worlds), None))


def read_observed(data: bytes, source: str = "", *, max_bytes: int = MAX_FILE_BYTES) -> Observed:
    return collect(read_lines(data, source, max_bytes=max_bytes))
