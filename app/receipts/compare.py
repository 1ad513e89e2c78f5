"""Two scenarios side by side: A, B and B − A for every figure of their receipts' stages.

Each side is read off its own receipt (:func:`app.receipts.receipt.receipt`), so a comparison
holds exactly the integers ``/api/estimate`` answers for A and for B: per stage, persistent state
by tensor class, the peak's parts, the fit verdict with its headroom, and the communication per
step. The difference is ``b − a``, an exact integer; a category "moved" when it is not 0.

Worked example (the seed's scenario, D = 8 as A against D = 64 as B). Stage 3 shards every
class, so its persistent state is ⌈7,000,000,000 ÷ D⌉ × (2 + 2 + 4 + 2 × 4) B:

    A: 875,000,000 × 16 B = 14,000,000,000 B (14 GB)
    B: 109,375,000 × 16 B =  1,750,000,000 B (1.75 GB)
    B − A                 = −12,250,000,000 B (−12.25 GB), exactly

while activations (20,000,000,000 B, never divided by D) do not move.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import parse_qsl, urlencode

from app.ledger.estimate import run_stage_peak
from app.ledger.scenario import Scenario, ScenarioError, parse_scenario
from app.ledger.scenario.fields import FIELDS
from app.ledger.scenario.links import canonical_query, slug
from app.ledger.scenario.stacks import stack_choices
from app.ledger.state.rules import CLASSES
from app.receipts.answers import whole_estimate
from app.receipts.csv_format import Row, csv_records
from app.receipts.receipt import SCHEMA_VERSION, receipt

PATH = "/compare"
PERSISTENT_CATEGORIES: tuple[str, ...] = (*CLASSES, "total")
PEAK_CATEGORIES: tuple[str, ...] = (
    "persistent", "gather", "buckets", "activations", "overhead", "contingency", "subtotal", "total",
)  # fmt: skip
CSV_COLUMNS: tuple[str, ...] = ("side", "stage", "ledger", "category", "bytes", "value")

Ledger = Literal["persistent", "peak", "fit", "communication"]
VerdictChange = Literal["unchanged", "now fits", "no longer fits"]


@dataclass(frozen=True, slots=True)
class Delta:
    """One figure of one stage on both sides: ``ledger`` and ``category`` name it as the CSV does."""

    ledger: Ledger
    category: str
    a: int
    b: int

    @property
    def diff(self) -> int:
        return self.b - self.a

    @property
    def moved(self) -> bool:
        return self.a != self.b

    @property
    def key(self) -> str:
        """``persistent.gradients``, ``peak.activations``, ``fit.headroom``, ``communication.total``."""
        return f"{self.ledger}.{self.category}"


@dataclass(frozen=True, slots=True)
class StageComparison:
    stage: int
    persistent: tuple[Delta, ...]  # PERSISTENT_CATEGORIES, in order
    peak: tuple[Delta, ...]  # PEAK_CATEGORIES, in order
    fits_a: bool
    fits_b: bool
    headroom: Delta
    communication: Delta

    @property
    def deltas(self) -> tuple[Delta, ...]:
        return (*self.persistent, *self.peak, self.headroom, self.communication)

    @property
    def moved(self) -> tuple[Delta, ...]:
        return tuple(d for d in self.deltas if d.moved)

    @property
    def verdict(self) -> VerdictChange:
        if self.fits_a == self.fits_b:
            return "unchanged"
        return "now fits" if self.fits_b else "no longer fits"


@dataclass(frozen=True, slots=True)
class InputChange:
    """An input that differs between A and B (defaults filled in: a changed N moves the default U too)."""

    name: str
    a: int | str
    b: int | str
    # For a choice a side's stack decides: "stack" (that side has its stack's value) or "set"; else None.
    a_source: str | None = None
    b_source: str | None = None
    # B's edit alone on A: the peak at the stage A-with-this-edit runs, minus A's (None: the input only follows
    # another one, as N follows the model, or A cannot take the edit alone: ``alone_error`` says why).
    alone: int | None = None
    alone_error: str | None = None


@dataclass(frozen=True, slots=True)
class Moved:
    """A category that moved, and the stages where it did."""

    ledger: Ledger
    category: str
    stages: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Comparison:
    a: Scenario
    b: Scenario
    a_receipt: Mapping[str, Any]
    b_receipt: Mapping[str, Any]
    stages: tuple[StageComparison, ...]
    inputs: tuple[InputChange, ...]

    @property
    def moved(self) -> tuple[Moved, ...]:
        """Every category that moved at some stage, in ledger order, with those stages."""
        order: dict[tuple[Ledger, str], list[int]] = {}
        for st in self.stages:
            for d in st.deltas:
                stages = order.setdefault((d.ledger, d.category), [])
                if d.moved:
                    stages.append(st.stage)
        return tuple(Moved(ledger, cat, tuple(stages)) for (ledger, cat), stages in order.items() if stages)

    @property
    def query(self) -> str:
        return compare_query(self.a, self.b)

    @property
    def link(self) -> str:
        return f"{PATH}?{self.query}"


def compare_query(a: Scenario, b: Scenario) -> str:
    """``a=<canonical A>&b=<canonical B>``: each side's canonical query string, URL-encoded."""
    return urlencode((("a", canonical_query(a)), ("b", canonical_query(b))))


def compare_link(a: Scenario, b: Scenario) -> str:
    return f"{PATH}?{compare_query(a, b)}"


def _stage(index: int, sa: Mapping[str, Any], sb: Mapping[str, Any]) -> StageComparison:
    return StageComparison(
        stage=index,
        persistent=tuple(
            Delta("persistent", c, sa["persistent"][c], sb["persistent"][c]) for c in PERSISTENT_CATEGORIES
        ),
        peak=tuple(Delta("peak", p, sa["peak"][p], sb["peak"][p]) for p in PEAK_CATEGORIES),
        fits_a=sa["fits"],
        fits_b=sb["fits"],
        headroom=Delta("fit", "headroom", sa["headroom_bytes"], sb["headroom_bytes"]),
        communication=Delta("communication", "total", sa["communication_bytes"], sb["communication_bytes"]),
    )


def _follows_dp(name: str, a: Scenario, b: Scenario) -> bool:
    """A shard group left at its default on both sides is D on each: the change is D's, not its own."""
    return name == "shard_group" and a.shard_group == a.dp and b.shard_group == b.dp


def compare(a: Scenario, b: Scenario) -> Comparison:
    """A against B: both receipts, and every stage's figures with their difference. Each side's estimate is the
    shared one (:func:`app.receipts.answers.whole_estimate`): a comparison's sides are mostly scenarios asked for
    just before, by the page's downloads or by another comparison."""
    ra, rb = receipt(whole_estimate(a)), receipt(whole_estimate(b))
    stages = tuple(_stage(i, sa, sb) for i, (sa, sb) in enumerate(zip(ra["stages"], rb["stages"], strict=True)))
    sources_a, sources_b = _choice_sources(a), _choice_sources(b)
    alone = _each_alone(a, b, ra["stages"][a.stage]["peak"]["total"])  # A's peak: its receipt's, not walked again
    inputs = tuple(
        InputChange(
            f.name,
            getattr(a, f.name),
            getattr(b, f.name),
            sources_a.get(f.name),
            sources_b.get(f.name),
            *alone.get(f.name, (None, None)),
        )
        for f in FIELDS
        if getattr(a, f.name) != getattr(b, f.name) and not _follows_dp(f.name, a, b)
    )
    return Comparison(a, b, ra, rb, stages, inputs)


def _each_alone(a: Scenario, b: Scenario, base: int) -> dict[str, tuple[int | None, str | None]]:
    """Each input B typed differently from A (its canonical link's), applied alone to A: the peak it moves at the
    stage that run uses, or why A cannot take it alone. One estimate of one stage per edit, and at most one edit per
    field: bounded by the form, not by anything typed. ``base`` is A's peak at the stage it runs."""
    qa, qb = dict(parse_qsl(canonical_query(a))), dict(parse_qsl(canonical_query(b)))
    out: dict[str, tuple[int | None, str | None]] = {}
    for name in (f.name for f in FIELDS):
        if name == "name" or qa.get(name) == qb.get(name):
            continue
        edited = {k: v for k, v in qa.items() if k != name} | ({name: qb[name]} if name in qb else {})
        try:
            out[name] = (run_stage_peak(parse_scenario(edited)) - base, None)
        except ScenarioError as exc:
            out[name] = (None, "; ".join(f"{e.field}: {e.message}" for e in exc.errors))
    return out


def _choice_sources(s: Scenario) -> dict[str, str]:
    """Each choice the scenario's stack decides: "stack" where the run has the stack's value, else "set"."""
    return {c.name: c.source for c in stack_choices(s.stack, s.as_dict())}


# --------------------------------------------------------------------------- JSON


def _side_json(r: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "link": r["link"],
        "scenario": r["scenario"],
        "stack": r["stack"],
        "stages": [
            {
                "stage": st["stage"],
                "persistent": {c: st["persistent"][c] for c in PERSISTENT_CATEGORIES},
                "peak": {p: st["peak"][p] for p in PEAK_CATEGORIES},
                "fits": st["fits"],
                "headroom_bytes": st["headroom_bytes"],
                "communication_bytes": st["communication_bytes"],
            }
            for st in r["stages"]
        ],
    }


def comparison_json(c: Comparison, base: str = "") -> dict[str, Any]:
    """Both sides' exact integers and the differences (b − a), as JSON-ready data. ``base`` (e.g.
    ``http://host:8000``) makes the comparison's link absolute."""
    return {
        "schema_version": SCHEMA_VERSION,
        "units": "bytes",
        "link": base + c.link,
        "a": _side_json(c.a_receipt),
        "b": _side_json(c.b_receipt),
        "diff": {
            "inputs": [
                {
                    "name": i.name,
                    "a": i.a,
                    "b": i.b,
                    "a_source": i.a_source,
                    "b_source": i.b_source,
                    "peak_alone_bytes": i.alone,
                    "alone_error": i.alone_error,
                }
                for i in c.inputs
            ],
            "stages": [
                {
                    "stage": st.stage,
                    "persistent": {d.category: d.diff for d in st.persistent},
                    "peak": {d.category: d.diff for d in st.peak},
                    "verdict": st.verdict,
                    "headroom_bytes": st.headroom.diff,
                    "communication_bytes": st.communication.diff,
                    "moved": [d.key for d in st.moved],
                }
                for st in c.stages
            ],
        },
    }


# --------------------------------------------------------------------------- CSV


def _fits(fits: bool) -> str:
    return "fits" if fits else "does not fit"


def csv_rows(c: Comparison) -> Iterator[Row]:
    """``side,stage,ledger,category,bytes,value``: each side's inputs (ledger ``input``) and figures,
    then the differences (side ``diff``, bytes = b − a), then each edit alone (side ``alone``, ledger ``input``: the
    peak the edit moves by itself on A, or why A cannot take it)."""
    for side, s in (("a", c.a), ("b", c.b)):
        for f in FIELDS:
            value = getattr(s, f.name)
            yield {"side": side, "ledger": "input", "category": f.name, "value": value,
                   "bytes": value if f.kind == "bytes" else ""}  # fmt: skip
    for side in ("a", "b", "diff"):
        for st in c.stages:
            for d in st.deltas:
                value = ""
                if d.ledger == "fit":
                    value = {"a": _fits(st.fits_a), "b": _fits(st.fits_b), "diff": st.verdict}[side]
                figure = {"a": d.a, "b": d.b, "diff": d.diff}[side]
                yield {"side": side, "stage": st.stage, "ledger": d.ledger, "category": d.category,
                       "bytes": figure, "value": value}  # fmt: skip
    for i in c.inputs:
        if i.alone is not None or i.alone_error:
            yield {"side": "alone", "ledger": "input", "category": i.name,
                   "bytes": "" if i.alone is None else i.alone, "value": i.alone_error or ""}  # fmt: skip


def csv_lines(c: Comparison, *, bom: bool = False) -> Iterator[str]:
    """The comparison's CSV text, one record at a time (written as the receipt's is)."""
    return csv_records(CSV_COLUMNS, csv_rows(c), bom=bom)


def filename(c: Comparison, suffix: str) -> str:
    return f"zero3-lab-compare-{slug(c.a)}-vs-{slug(c.b)}.{suffix}"
