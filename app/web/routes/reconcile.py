"""``/reconcile``: paste (or pick) the probe's JSON lines, see them beside the scenario's stage-3 schedule.

The scenario is the query string, as on every page (the form posts back to the same address, so the
scenario stays in it). The form's body is URL-encoded and read here, bounded, without a multipart
parser: a picked file is read into the textarea by ``static/reconcile.js``, so a file and a paste
arrive the same way. Errors are shown inline (``role="alert"``), each naming its line and field.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs

from fastapi import APIRouter, Request
from fastapi.responses import Response, StreamingResponse
from starlette.concurrency import run_in_threadpool

from app.ledger.scenario import Scenario
from app.ledger.scenario.links import canonical_query, link
from app.observed.probe import MARKS
from app.observed.reconcile import ENTRY_LABELS, Reconciliation, reconcile
from app.observed.records import MAX_STEP, ObservedError, read_observed
from app.observed.render import csv_rows
from app.web.http.htmx import PAGE_METHODS
from app.web.http.query import form_fields, query_dict, read_scenario, repeated_fields
from app.web.http.settings import Settings
from app.web.http.templating import templates
from app.web.views.page import title_of

router = APIRouter(include_in_schema=False)

PATH = "/reconcile"
CSV_PATH = "/reconcile.csv"
# The page shows each comparison's ranks with the highest observed figure, and every figure's min, mean and max
# across all ranks: its size does not follow the number of ranks. Every rank is in the CSV download.
WORST_RANKS = 8
# The request body is capped at 64 KiB (app/web/http/limits.py); URL-encoding inflates JSON (each quote is
# three characters), so the text itself is held to less. The CLI reads files of up to 4 MiB.
MAX_PASTE_BYTES = 40 * 1024
MAX_BODY_BYTES = Settings().max_body_bytes


def _scenario(request: Request) -> tuple[Scenario | None, str]:
    scenario, error = read_scenario(form_fields(query_dict(request)), strict=False, repeated=repeated_fields(request))
    return scenario, "" if error is None else str(error)


def _context(
    request: Request, scenario: Scenario | None, scenario_error: str, *, observed: str = "", step: str = "",
    errors: list[str] | None = None, result: Reconciliation | None = None,
) -> dict[str, Any]:  # fmt: skip
    query = "" if scenario is None else canonical_query(scenario)
    return {
        "title": "Reconcile an observed run",
        "scenario_title": "" if scenario is None else title_of(scenario),
        "scenario_error": scenario_error,
        "q": f"?{query}" if query else "",
        "back": link(scenario) if scenario is not None else "/",
        "observed": observed,
        "step": step,
        "errors": errors or [],
        "result": result,
        "entry_labels": ENTRY_LABELS,
        "marks": MARKS,
        "max_paste_bytes": MAX_PASTE_BYTES,
        "max_body_bytes": MAX_BODY_BYTES,
        "worst_ranks": WORST_RANKS,
        "csv_path": CSV_PATH,
    }


@router.api_route(PATH, methods=PAGE_METHODS)
def reconcile_page(request: Request) -> Response:
    """The form, on the scenario in the query string."""
    scenario, scenario_error = _scenario(request)
    context = _context(request, scenario, scenario_error)
    return templates.TemplateResponse(request, "reconcile.html", context, status_code=422 if scenario_error else 200)


def _step(text: str) -> tuple[int | None, str]:
    text = text.strip().replace(",", "").replace("_", "")
    if not text:
        return None, ""
    if not (text.isascii() and text.isdigit()) or len(text) > 10 or int(text) > MAX_STEP:  # "²".isdigit()
        return None, f"step: {text[:20]!r} is not a step number (allowed: 0 … {MAX_STEP:,}, or empty for the last)"
    return int(text), ""


def _reconciled(scenario: Scenario, observed: str, step_text: str) -> tuple[Reconciliation | None, list[str]]:
    step, step_error = _step(step_text)
    if step_error:
        return None, [step_error]
    data = observed.encode("utf-8")
    try:
        return reconcile(scenario, read_observed(data, max_bytes=MAX_PASTE_BYTES), step), []
    except ObservedError as exc:
        return None, [str(p) for p in exc.problems]


async def _form(request: Request) -> tuple[str, str]:
    body = await request.body()  # the request limits have already capped it
    form = {k: v[-1] for k, v in parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True).items()}
    return form.get("observed", ""), form.get("step", "")


@router.post(CSV_PATH)
async def reconcile_csv(request: Request) -> Response:
    """Every rank of every comparison as CSV (the form's "Download every rank"), streamed row by row; the form's
    errors as the page shows them."""
    scenario, scenario_error = _scenario(request)
    observed, step = await _form(request)
    if scenario is None:
        context = _context(request, None, scenario_error, observed=observed, step=step)
        return templates.TemplateResponse(request, "reconcile.html", context, status_code=422)
    result, errors = await run_in_threadpool(_reconciled, scenario, observed, step)
    if result is None:
        context = _context(request, scenario, "", observed=observed, step=step, errors=errors)
        return templates.TemplateResponse(request, "reconcile.html", context, status_code=422)
    headers = {"Content-Disposition": f'attachment; filename="reconcile-step-{result.step}.csv"'}
    return StreamingResponse(_csv_lines(result), media_type="text/csv; charset=utf-8", headers=headers)


def _csv_lines(result: Reconciliation) -> Iterator[str]:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    for row in csv_rows(result):
        writer.writerow(row)
        yield out.getvalue()
        out.seek(0)
        out.truncate()


@router.post(PATH)
async def reconcile_post(request: Request) -> Response:
    """The probe's records (``observed``) and an optional ``step``, against the query's scenario."""
    scenario, scenario_error = _scenario(request)
    observed, step = await _form(request)
    if scenario is None:
        context = _context(request, None, scenario_error, observed=observed, step=step)
        return templates.TemplateResponse(request, "reconcile.html", context, status_code=422)
    result, errors = await run_in_threadpool(_reconciled, scenario, observed, step)  # the ledger is CPU work
    context = _context(request, scenario, "", observed=observed, step=step, errors=errors, result=result)
    return templates.TemplateResponse(request, "reconcile.html", context, status_code=422 if errors else 200)
