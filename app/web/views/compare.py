"""``compare.html`` and ``partials/_compare_results.html``: the comparison of two scenarios ready to lay
out (each side's title, link and least fitting stage, the inputs that differ, the categories that moved),
B's form beside it, and the request's two sides with their errors and the comparison's address."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from app.ledger.scenario import FieldError, Scenario
from app.ledger.scenario.fields import FIELD_BY_NAME, FIELDS
from app.ledger.scenario.links import canonical_query
from app.ledger.scenario.presets import DEVICES
from app.ledger.scenario.stacks import least_stage
from app.receipts.compare import PATH, Comparison
from app.web.views.charts import PARTS
from app.web.views.form import DERIVED_ORDER, derived_hint, display_value, field_groups, form_fields
from app.web.views.model import model_groups
from app.web.views.page import raw_query, title_of

PEAK_LABELS: dict[str, str] = {**dict(PARTS), "subtotal": "subtotal (before contingency)", "total": "peak total"}


@dataclass(frozen=True, slots=True)
class SideError:
    """A bad input of one side: ``name`` is the field, or empty for the side as a whole."""

    side: str
    name: str
    message: str
    allowed: str

    @property
    def field(self) -> str:
        return f"{self.side}.{self.name}" if self.name else self.side

    def detail(self) -> dict[str, Any]:
        return {
            "loc": ["query", self.side, *([self.name] if self.name else [])],
            "field": self.field,
            "msg": f"{self.field}: {self.message} (allowed: {self.allowed})",
            "allowed": self.allowed,
            "type": "value_error",
        }


@dataclass(frozen=True, slots=True)
class Sides:
    """What one request names: both sides (None while invalid), their errors, and B as typed."""

    a: Scenario | None
    b: Scenario | None
    errors: tuple[SideError, ...]
    a_text: str  # the a= text (the form sends it back unchanged)
    b_raw: Mapping[str, str]  # B's fields, as the link or the form gave them
    from_form: bool  # B came from the form's fields, not a b= link

    @property
    def query(self) -> str:
        """The comparison's address: canonical when both sides are valid, else as typed."""
        if self.a is not None and self.b is not None:
            return urlencode((("a", canonical_query(self.a)), ("b", canonical_query(self.b))))
        a = canonical_query(self.a) if self.a is not None else self.a_text
        b_errors = {e.name: _field_error(e) for e in self.errors if e.side == "b"}
        b = canonical_query(self.b) if self.b is not None else raw_query(self.b_raw, b_errors)
        return urlencode((("a", a), ("b", b)))


def _field_error(e: SideError) -> FieldError:
    return FieldError(e.name, e.message, e.allowed)


def _least_fitting(c: Comparison, side: str) -> int | None:
    """The least complex stage the side's stack runs that fits."""
    stack = c.a.stack if side == "a" else c.b.stack
    return least_stage(stack, [st.fits_a if side == "a" else st.fits_b for st in c.stages])


def _changes(c: Comparison) -> list[tuple[str, str, str, int | None, str | None]]:
    def shown(name: str, value: int | str) -> str:
        text = display_value(FIELD_BY_NAME[name], value)
        return text if isinstance(value, str) or text.replace(",", "") == str(value) else f"{text} ({value:,})"

    def origin(source: str | None, stack: str) -> str:
        return {"stack": f" — {stack}'s", "set": f" — set over {stack}'s"}.get(source or "", "")

    return [
        (
            i.name,
            shown(i.name, i.a) + origin(i.a_source, c.a.stack),
            shown(i.name, i.b) + origin(i.b_source, c.b.stack),
            i.alone,
            i.alone_error,
        )
        for i in c.inputs
    ]


@dataclass(frozen=True, slots=True)
class SideRun:
    """One side's run at the stage it runs: its peak, whether it fits, its headroom."""

    stage: int
    peak: int
    fits: bool
    headroom: int


def _runs(c: Comparison) -> tuple[SideRun, SideRun]:
    """The key figures first: each side's peak at its own stage (what the lab leads with for each run)."""

    def side(s: Scenario, index: int) -> SideRun:
        st = c.stages[s.stage]
        peak = next(d for d in st.peak if d.category == "total")
        fits = st.fits_a if index == 0 else st.fits_b
        return SideRun(s.stage, (peak.a, peak.b)[index], fits, (st.headroom.a, st.headroom.b)[index])

    return side(c.a, 0), side(c.b, 1)


def _titles(c: Comparison) -> tuple[str, str]:
    """Each side's heading: its name or what it is, and, where both read the same (B starts as a copy of A, its
    name too), the first inputs that differ, so that the two are told apart."""
    a, b = title_of(c.a), title_of(c.b)
    if a != b:
        return a, b
    differ = [i for i in c.inputs if i.name != "name"]
    if not differ:
        return a, b  # the same scenario twice

    def what(side: str) -> str:
        shown = [f"{i.name} = {display_value(FIELD_BY_NAME[i.name], getattr(i, side))}" for i in differ[:2]]
        more = f", {len(differ) - 2} more" if len(differ) > 2 else ""
        return f" ({', '.join(shown)}{more})"

    return a + what("a"), b + what("b")


def _moved(c: Comparison) -> list[tuple[str, str, str]]:
    """Each category that moved: its label, its ``ledger.category`` key, and the stages."""
    out = []
    for m in c.moved:
        if m.ledger == "persistent":
            label = f"persistent {m.category}"
        elif m.ledger == "peak":
            label = f"peak: {PEAK_LABELS[m.category]}"
        else:
            label = "headroom" if m.ledger == "fit" else "communication per step"
        stages = ("stage " if len(m.stages) == 1 else "stages ") + ", ".join(str(s) for s in m.stages)
        out.append((label, f"{m.ledger}.{m.category}", stages))
    return out


def _addresses(c: Comparison) -> dict[str, Any]:
    """The links of a valid comparison: A and B swapped, B reset to A, and each side in the lab."""
    a, b = canonical_query(c.a), canonical_query(c.b)
    return {
        "swap": f"{PATH}?{urlencode((('a', b), ('b', a)))}",
        "reset": f"{PATH}?{urlencode((('a', a), ('b', a)))}",
        "a_link": "/?" + a,
        "b_link": "/?" + b,
    }


def comparison_context(sides: Sides, c: Comparison | None, *, oob: bool) -> dict[str, Any]:
    """``partials/_compare_results.html``: the comparison ``c`` of ``sides`` (None while either is invalid:
    then the bad inputs), and for a live update (``oob``) B's error slots and derived hints, swapped out of
    band."""
    b_errors = {e.name: e for e in sides.errors if e.side == "b" and e.name}
    a_title, b_title = _titles(c) if c else ("A", "B")
    return {
        "title": f"compare: {a_title} vs {b_title}" if c else "compare: fix the highlighted inputs",
        "comparison": c,
        "errors": sides.errors,
        "link": f"{PATH}?{sides.query}",
        "q": f"?{sides.query}",
        **(_addresses(c) if c else {"swap": None, "reset": None, "a_link": None, "b_link": None}),
        "a_title": a_title,
        "b_title": b_title,
        "runs": _runs(c) if c else None,
        "a_fits": _least_fitting(c, "a") if c else None,
        "b_fits": _least_fitting(c, "b") if c else None,
        "changes": _changes(c) if c else [],
        "moved": _moved(c) if c else [],
        "peak_labels": PEAK_LABELS,
        "oob": oob,
        "b_slots": [(f.name, b_errors.get(f.name)) for f in FIELDS],
        "derived_hints": [(name, derived_hint(sides.b, name)) for name in DERIVED_ORDER],
    }


def compare_page_context(sides: Sides, c: Comparison | None) -> dict[str, Any]:
    """``compare.html``: B's form (A pinned in a hidden field) beside the comparison."""
    b_errors = {e.name: _field_error(e) for e in sides.errors if e.side == "b" and e.name}
    b_raw = {k: v for k, v in sides.b_raw.items() if k in FIELD_BY_NAME}
    return {
        **comparison_context(sides, c, oob=False),
        "a_query": canonical_query(sides.a) if sides.a is not None else sides.a_text,
        "pinned_link": "/?" + canonical_query(sides.a) if sides.a is not None else None,
        "groups": field_groups(form_fields(b_raw, sides.b, b_errors)),
        "models": model_groups(),
        "devices": DEVICES,
        "alternate": f"/compare.json?{sides.query}",
    }
