"""Compare two scenarios: ``/compare?a=<canonical query>&b=<canonical query>`` and its JSON and CSV
twins. Each side is a canonical query string (:func:`app.ledger.scenario.links.canonical_query`), read with
every bound and no unknown keys; a bad field is named with its side (``a.dp``). The page's form edits
B: it sends B's fields beside ``a``, and answers with the comparison at its canonical address.

The page is a plain ``def`` route (FastAPI runs it in its thread pool); it parses, calls
:func:`app.receipts.compare.compare`, and renders with the context of :mod:`app.web.views.compare`. The JSON and
CSV twins are ``async def``: they read both sides in the event loop (a few tenths of a millisecond) and make their
whole answer in one trip to the thread pool, the CSV then streamed from the loop (:mod:`app.web.http.streaming`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Annotated, Any
from urllib.parse import parse_qsl

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse, RedirectResponse, Response, StreamingResponse
from starlette.concurrency import run_in_threadpool

from app.ledger.scenario import FieldError, Scenario, ScenarioError, parse_scenario
from app.receipts.compare import PATH, Comparison, compare, comparison_json, csv_lines, filename
from app.receipts.compare_out import ComparisonOut
from app.web.http.errors import unprocessable
from app.web.http.htmx import PAGE_METHODS, VARY, is_history_restore, wants_fragment
from app.web.http.query import form_fields, query_dict, repeated_fields
from app.web.http.responses import ErrorBody
from app.web.http.settings import Settings, public_base_url
from app.web.http.streaming import chunked, sent
from app.web.http.templating import templates
from app.web.views.compare import SideError, Sides, compare_page_context, comparison_context

router = APIRouter()

PATHS: tuple[str, ...] = (PATH, f"{PATH}.json", f"{PATH}.csv")  # the wider query cap applies to these
MAX_SIDE_CHARS = 2048
SIDE_ALLOWED = f"up to {MAX_SIDE_CHARS:,} characters: a canonical query string such as dp=64&params=13000000000"

ERRORS: dict[int | str, dict[str, Any]] = {
    422: {"model": ErrorBody, "description": 'A bad field of a side, named in `loc` (["query", "a", "dp"]) and '
          '`field` ("a.dp"), with the allowed range; or a side longer than 2,048 characters'},
    413: {"model": ErrorBody, "description": "The request body is larger than 64 KiB"},
    414: {"model": ErrorBody, "description": f"The query string is longer than "
          f"{Settings().max_compare_query_chars:,} characters (two sides of up to 2,048, percent-encoded)"},
}  # fmt: skip


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
    pairs = parse_qsl(text)
    counts = Counter(name for name, _ in pairs)
    repeated = tuple(SideError(side, name, f"given {times} times in the side's query string", "one value")
                     for name, times in counts.items() if times > 1)  # fmt: skip
    return (None, repeated) if repeated else read_fields(side, dict(pairs))


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


def _sides(a: str, b: str | None) -> tuple[tuple[Scenario, Scenario] | None, JSONResponse | None]:
    """Both sides' scenarios, or the 422 naming every bad field of either."""
    sa, ea = read_side("a", a)
    sb, eb = read_side("b", a if b is None else b)
    if sa is None or sb is None:
        return None, unprocessable(e.detail() for e in (*ea, *eb))
    return (sa, sb), None


@router.head("/compare.json", include_in_schema=False)
@router.get("/compare.json", response_model=ComparisonOut, responses=ERRORS,
            summary="Two scenarios compared: both receipts' stage figures and B − A")  # fmt: skip
async def compare_json(
    request: Request, a: Annotated[str, SideQuery] = "", b: Annotated[str | None, BQuery] = None
) -> Any:
    sides, error = _sides(a, b)
    if sides is None:
        return error
    return await run_in_threadpool(_json, *sides, public_base_url(request))


def _json(a: Scenario, b: Scenario, base_url: str) -> dict[str, Any]:
    return comparison_json(compare(a, b), base_url)


@router.head("/compare.csv", include_in_schema=False)
@router.get("/compare.csv", summary="Two scenarios compared, as CSV", responses={
    200: {"content": {"text/csv": {"schema": {"type": "string"}}},
          "description": "side,stage,ledger,category,bytes,value: each side's inputs and figures, then side "
                         "diff (bytes = b − a)"},
    **ERRORS})  # fmt: skip
async def compare_csv(a: Annotated[str, SideQuery] = "", b: Annotated[str | None, BQuery] = None) -> Response:
    sides, error = _sides(a, b)
    if sides is None:
        assert error is not None
        return error
    name, chunks = await run_in_threadpool(_csv, *sides)
    return StreamingResponse(
        sent(chunks),
        media_type="text/csv; charset=utf-8",
        headers={"Content-Disposition": f'attachment; filename="{name}"'},
    )


def _csv(a: Scenario, b: Scenario) -> tuple[str, list[str]]:
    """The CSV's file name and its text in chunks."""
    c = compare(a, b)
    return filename(c, "csv"), chunked(csv_lines(c, bom=True))


# --------------------------------------------------------------------------- the page


def read_request(query: Mapping[str, str], repeated: Sequence[FieldError] = ()) -> Sides:
    """Both sides: ``a`` and ``b`` as query strings, or B's fields typed in the form beside ``a`` (``repeated``: the
    form's fields given twice, :func:`app.web.http.query.repeated_fields`)."""
    a_text = query.get("a", "")
    a, a_errors = read_side("a", a_text)
    typed = form_fields(query)
    if typed:  # the form: B's fields beside a
        b, b_errors = read_fields("b", typed)
        if repeated:
            b, b_errors = None, tuple(SideError("b", e.field, e.message, e.allowed) for e in repeated)
        return Sides(a, b, (*a_errors, *b_errors), a_text, typed, True)
    b_text = query.get("b", a_text)
    b, b_errors = read_side("b", b_text)
    b_raw = dict(parse_qsl(b_text)) if len(b_text) <= MAX_SIDE_CHARS else {}
    return Sides(a, b, (*a_errors, *b_errors), a_text, b_raw, False)


def _compared(sides: Sides) -> Comparison | None:
    """The comparison of both sides, or None while either is invalid."""
    return compare(sides.a, sides.b) if sides.a is not None and sides.b is not None else None


@router.api_route(PATH, methods=PAGE_METHODS, include_in_schema=False)
def compare_page(request: Request) -> Response:
    sides = read_request(query_dict(request), repeated_fields(request))
    valid = not sides.errors
    if wants_fragment(request):
        # 200 even with errors: htmx 2 does not swap 4xx answers. The address follows B as edited.
        context = comparison_context(sides, _compared(sides), oob=True)
        headers = {**VARY, "HX-Push-Url": context["link"]}
        return templates.TemplateResponse(request, "partials/_compare_results.html", context, headers=headers)
    if sides.from_form and valid:  # the form without JavaScript: land on the shareable link
        return RedirectResponse(f"{PATH}?{sides.query}", status_code=303, headers=VARY)
    status = 200 if valid or is_history_restore(request) else 422
    context = compare_page_context(sides, _compared(sides))
    return templates.TemplateResponse(request, "compare.html", context, status_code=status, headers=VARY)
