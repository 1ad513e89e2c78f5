"""Compare two scenarios: ``/compare?a=<canonical query>&b=<canonical query>`` and its JSON and CSV
twins. Each side is a canonical query string (:func:`app.ledger.scenario.links.canonical_query`), read with
every bound and no unknown keys; a bad field is named with its side (``a.dp``). The page's form edits
B: it sends B's fields beside ``a``, and answers with the comparison at its canonical address.

The routes are plain ``def`` functions (FastAPI runs them in its thread pool); they parse, call
:func:`app.receipts.compare.compare`, and render.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any
from urllib.parse import parse_qsl, urlencode

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse, RedirectResponse, Response, StreamingResponse

from app.ledger.models.known import KNOWN_MODELS
from app.ledger.scenario import FieldError, Scenario, ScenarioError, parse_scenario
from app.ledger.scenario.fields import FIELD_BY_NAME, FIELDS
from app.ledger.scenario.links import canonical_query
from app.ledger.scenario.presets import DEVICES
from app.receipts.compare import PATH, Comparison, compare, comparison_json, csv_lines, filename
from app.receipts.schema import ComparisonOut
from app.web.http.errors import unprocessable
from app.web.http.query import form_fields, query_dict
from app.web.http.responses import ErrorBody
from app.web.http.settings import Settings, public_base_url
from app.web.http.templating import templates
from app.web.routes.downloads import in_chunks
from app.web.routes.pages import PAGE_METHODS, VARY, is_history_restore, wants_fragment
from app.web.views.charts import PARTS
from app.web.views.page import DERIVED_ORDER, derived_hint, display_value, field_groups, raw_query, title_of
from app.web.views.page import form_fields as form_view_fields

router = APIRouter()

PATHS: tuple[str, ...] = (PATH, f"{PATH}.json", f"{PATH}.csv")  # the wider query cap applies to these
MAX_SIDE_CHARS = 2048
SIDE_ALLOWED = f"up to {MAX_SIDE_CHARS:,} characters: a canonical query string such as dp=64&params=13000000000"
PEAK_LABELS: dict[str, str] = {**dict(PARTS), "subtotal": "subtotal (before contingency)", "total": "peak total"}

ERRORS: dict[int | str, dict[str, Any]] = {
    422: {"model": ErrorBody, "description": 'A bad field of a side, named in `loc` (["query", "a", "dp"]) and '
          '`field` ("a.dp"), with the allowed range; or a side longer than 2,048 characters'},
    413: {"model": ErrorBody, "description": "The request body is larger than 64 KiB"},
    414: {"model": ErrorBody, "description": f"The query string is longer than "
          f"{Settings().max_compare_query_chars:,} characters (two sides of up to 2,048, percent-encoded)"},
}  # fmt: skip


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


Side = tuple[Scenario | None, tuple[SideError, ...]]


def read_fields(side: str, raw: Mapping[str, str]) -> Side:
    try:
        return parse_scenario(raw, allow_unknown=False), ()
    except ScenarioError as exc:
        return None, tuple(SideError(side, e.field, e.message, e.allowed) for e in exc.errors)


def read_side(side: str, text: str) -> Side:
    """One side's canonical query string, bounded, read as a scenario."""
    if len(text) > MAX_SIDE_CHARS:
        return None, (SideError(side, "", f"is {len(text):,} characters long", SIDE_ALLOWED),)
    return read_fields(side, dict(parse_qsl(text)))


# --------------------------------------------------------------------------- the twins

SideQuery = Query(
    description="A side's scenario: its canonical query string (as in a lab link, sorted, defaults omitted), "
    "URL-encoded; up to 2,048 characters. Empty: the seed's scenario.",
    json_schema_extra={"maxLength": MAX_SIDE_CHARS},
    examples=["dp=8"],
)
BQuery = Query(
    description="B's scenario, like a; omitted: the same as A.",
    json_schema_extra={"maxLength": MAX_SIDE_CHARS},
    examples=["dp=64"],
)


def _both(a: str, b: str | None) -> tuple[Comparison | None, JSONResponse | None]:
    sa, ea = read_side("a", a)
    sb, eb = read_side("b", a if b is None else b)
    if sa is None or sb is None:
        return None, unprocessable(e.detail() for e in (*ea, *eb))
    return compare(sa, sb), None


@router.head("/compare.json", include_in_schema=False)
@router.get("/compare.json", response_model=ComparisonOut, responses=ERRORS,
            summary="Two scenarios compared: both receipts' stage figures and B − A")  # fmt: skip
def compare_json(request: Request, a: Annotated[str, SideQuery] = "", b: Annotated[str | None, BQuery] = None) -> Any:
    c, error = _both(a, b)
    if c is None:
        return error
    return comparison_json(c, public_base_url(request))


@router.head("/compare.csv", include_in_schema=False)
@router.get("/compare.csv", summary="Two scenarios compared, as CSV", responses={
    200: {"content": {"text/csv": {"schema": {"type": "string"}}},
          "description": "side,stage,ledger,category,bytes,value: each side's inputs and figures, then side "
                         "diff (bytes = b − a)"},
    **ERRORS})  # fmt: skip
def compare_csv(a: Annotated[str, SideQuery] = "", b: Annotated[str | None, BQuery] = None) -> Response:
    c, error = _both(a, b)
    if c is None:
        assert error is not None
        return error
    return StreamingResponse(
        in_chunks(csv_lines(c, bom=True)),
        media_type="text/csv; charset=utf-8",
        headers={"Content-Disposition": f'attachment; filename="{filename(c, "csv")}"'},
    )


# --------------------------------------------------------------------------- the page


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


def read_request(query: Mapping[str, str]) -> Sides:
    a_text = query.get("a", "")
    a, a_errors = read_side("a", a_text)
    typed = form_fields(query)
    if typed:  # the form: B's fields beside a
        b, b_errors = read_fields("b", typed)
        return Sides(a, b, (*a_errors, *b_errors), a_text, typed, True)
    b_text = query.get("b", a_text)
    b, b_errors = read_side("b", b_text)
    b_raw = dict(parse_qsl(b_text)) if len(b_text) <= MAX_SIDE_CHARS else {}
    return Sides(a, b, (*a_errors, *b_errors), a_text, b_raw, False)


def _least_fitting(c: Comparison, side: str) -> int | None:
    return next((st.stage for st in c.stages if (st.fits_a if side == "a" else st.fits_b)), None)


def _changes(c: Comparison) -> list[tuple[str, str, str]]:
    def shown(name: str, value: int | str) -> str:
        text = display_value(FIELD_BY_NAME[name], value)
        return text if isinstance(value, str) or text == str(value) else f"{text} ({value:,})"

    return [(i.name, shown(i.name, i.a), shown(i.name, i.b)) for i in c.inputs]


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


def comparison_context(sides: Sides, *, oob: bool) -> dict[str, Any]:
    """``partials/_compare_results.html``: the comparison (or the bad inputs), and for a live update
    (``oob``) B's error slots and derived hints, swapped out of band."""
    c = compare(sides.a, sides.b) if sides.a is not None and sides.b is not None else None
    b_errors = {e.name: e for e in sides.errors if e.side == "b" and e.name}
    swap = f"{PATH}?{urlencode((('a', canonical_query(c.b)), ('b', canonical_query(c.a))))}" if c else None
    a_title, b_title = (title_of(c.a), title_of(c.b)) if c else ("A", "B")
    return {
        "title": f"compare: {a_title} vs {b_title}" if c else "compare: fix the highlighted inputs",
        "comparison": c,
        "errors": sides.errors,
        "link": f"{PATH}?{sides.query}",
        "q": f"?{sides.query}",
        "swap": swap,
        "reset": f"{PATH}?{urlencode((('a', canonical_query(c.a)), ('b', canonical_query(c.a))))}" if c else None,
        "a_title": a_title,
        "b_title": b_title,
        "a_link": "/?" + canonical_query(c.a) if c else None,
        "b_link": "/?" + canonical_query(c.b) if c else None,
        "a_fits": _least_fitting(c, "a") if c else None,
        "b_fits": _least_fitting(c, "b") if c else None,
        "changes": _changes(c) if c else [],
        "moved": _moved(c) if c else [],
        "peak_labels": PEAK_LABELS,
        "oob": oob,
        "b_slots": [(f.name, b_errors.get(f.name)) for f in FIELDS],
        "derived_hints": [(name, derived_hint(sides.b, name)) for name in DERIVED_ORDER],
    }


def page_context(sides: Sides) -> dict[str, Any]:
    """``compare.html``: B's form (A pinned in a hidden field) beside the comparison."""
    b_errors = {e.name: _field_error(e) for e in sides.errors if e.side == "b" and e.name}
    b_raw = {k: v for k, v in sides.b_raw.items() if k in FIELD_BY_NAME}
    context = comparison_context(sides, oob=False)
    return {
        **context,
        "a_query": canonical_query(sides.a) if sides.a is not None else sides.a_text,
        "pinned_link": "/?" + canonical_query(sides.a) if sides.a is not None else None,
        "groups": field_groups(form_view_fields(b_raw, sides.b, b_errors)),
        "models": KNOWN_MODELS,
        "devices": DEVICES,
        "alternate": f"/compare.json?{sides.query}",
    }


@router.api_route(PATH, methods=PAGE_METHODS, include_in_schema=False)
def compare_page(request: Request) -> Response:
    sides = read_request(query_dict(request))
    valid = not sides.errors
    if wants_fragment(request):
        # 200 even with errors: htmx 2 does not swap 4xx answers. The address follows B as edited.
        context = comparison_context(sides, oob=True)
        headers = {**VARY, "HX-Push-Url": context["link"]}
        return templates.TemplateResponse(request, "partials/_compare_results.html", context, headers=headers)
    if sides.from_form and valid:  # the form without JavaScript: land on the shareable link
        return RedirectResponse(f"{PATH}?{sides.query}", status_code=303, headers=VARY)
    status = 200 if valid or is_history_restore(request) else 422
    return templates.TemplateResponse(request, "compare.html", page_context(sides), status_code=status, headers=VARY)
