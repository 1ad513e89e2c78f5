"""The page: the full HTML for a scenario, or only its results fragment for htmx."""

from __future__ import annotations

import json
from collections.abc import Callable
from urllib.parse import parse_qs, parse_qsl

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from app.ledger.fit import find_fit
from app.ledger.ledger import compute_ledger
from app.ledger.models.architecture import ModelConfigError
from app.ledger.models.reference import compact
from app.ledger.presets import PRESET_BY_ID
from app.ledger.scenario import FIELD_NAMES, Scenario
from app.receipts.links import canonical_query, link
from app.web.html import shell, tables
from app.web.html.text import ascii_html, esc
from app.web.query import DERIVED, form_fields, query_dict, read_scenario
from app.web.routing import DirectRoute
from app.web.views import title_of, view

router = APIRouter(include_in_schema=False, route_class=DirectRoute)


def wants_fragment(request: Request) -> bool:
    """htmx asks for the fragment, except when restoring history (then it needs the whole page)."""
    headers = request.headers
    return headers.get("hx-request") == "true" and headers.get("hx-history-restore-request") != "true"


@router.get("/")
async def page(request: Request) -> Response:
    query = query_dict(request)
    preset_id = query.get("preset")
    if preset_id is not None:
        preset = PRESET_BY_ID.get(preset_id)
        target = link(preset.scenario) if preset else "/"
        if request.headers.get("hx-request") == "true":
            return Response(status_code=204, headers={"HX-Redirect": target})
        return RedirectResponse(target, status_code=303)
    raw = form_fields(query)
    scenario, error = read_scenario(raw, strict=False)
    fragment = wants_fragment(request)
    v = view(raw, scenario, error)
    if fragment:
        # Fragments answer 200 even with field errors: htmx 2 does not swap 4xx responses.
        address = "/?" + v.query if v.query else "/"
        return HTMLResponse(shell.fragment(v), headers={"Vary": "HX-Request", "HX-Push-Url": address})
    # A history restore must be 200 or htmx will not swap it in (it would keep the newer page).
    restoring = request.headers.get("hx-history-restore-request") == "true"
    status = 200 if error is None or restoring else 422
    return HTMLResponse(shell.page(v), status_code=status, headers={"Vary": "HX-Request"})


@router.post("/model")
async def use_model_config(request: Request) -> Response:
    """The page's "use a config.json" form: the config becomes the scenario's ``model`` (compact),
    keeping the other inputs of the scenario the form was on; a bad config is shown inline."""
    body = await request.body()
    form = {k: v[-1] for k, v in parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True).items()}
    keep = {k: v for k, v in parse_qsl(form.get("keep", "")) if k in FIELD_NAMES and k not in DERIVED}
    text = form.get("config", "")
    try:
        config = json.loads(text)
        if not isinstance(config, dict):
            raise ModelConfigError("must be a JSON object, like a config.json file")
        reference = compact(config)
    except (ValueError, RecursionError) as exc:
        message = str(exc) if isinstance(exc, ModelConfigError) else f"not valid JSON ({exc})"
        return _paste_refused(keep, text, message)
    scenario, error = read_scenario({**keep, "model": reference}, strict=False)
    if scenario is None:  # the kept inputs do not suit this model (e.g. tp): start from its defaults
        scenario, error = read_scenario({"model": reference}, strict=False)
    if scenario is None:  # a valid architecture the scenario cannot hold (e.g. more than 10^13 parameters)
        assert error is not None
        return _paste_refused(keep, text, str(error))
    return RedirectResponse(link(scenario), status_code=303)


def _paste_refused(keep: dict[str, str], pasted: str, message: str) -> HTMLResponse:
    """The page on the scenario the paste was made from, the paste kept and its error beside it."""
    scenario, error = read_scenario(keep, strict=False)
    page = shell.page(view(keep, scenario, error), paste_error=message, pasted_config=pasted)
    return HTMLResponse(page, status_code=422)


def _detail_table(request: Request, name: str, render: Callable[[Scenario], str]) -> Response:
    """A table that a closed <details> fetches when opened (htmx), or, followed as a link without
    JavaScript, the same table as a page of its own; for the scenario in the query."""
    scenario, error = read_scenario(form_fields(query_dict(request)), strict=False)
    if scenario is None:
        assert error is not None
        return HTMLResponse(f'<p class="hint">{ascii_html(esc(str(error)))}</p>', status_code=422)
    table = render(scenario)
    if request.headers.get("hx-request") != "true":
        table = shell.table_page(f"{name}: {title_of(scenario)}", canonical_query(scenario), table)
    return HTMLResponse(table, headers={"Vary": "HX-Request"})


@router.get("/lines")
async def lines(request: Request) -> Response:
    """The ledger-lines table (formula and evidence of every stage and class)."""
    return _detail_table(request, "Ledger lines", lambda s: tables.lines_table(compute_ledger(s)))


@router.get("/fit-table")
async def fit_table(request: Request) -> Response:
    """The fit chart's table twin: the peak of every stage at each D."""
    # The curve needs the fit finder only: no checks, kill lists or micro-batch search.
    return _detail_table(request, "Peak per stage at each D", lambda s: tables.fit_table(find_fit(s).curve))


@router.get("/docs")
async def docs(request: Request) -> HTMLResponse:
    return HTMLResponse(shell.DOCS)
