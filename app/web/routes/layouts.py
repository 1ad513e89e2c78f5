"""The layout search: ``/layouts`` (the page, or for htmx its table) and ``/api/layouts`` (JSON), both on the query
string: the scenario's fields, as the lab's own links carry them, and the search's (gpus, global_batch, device,
rows, rank). A bad field is named with its allowed range: inline on the page (a 422 for the whole page, 200 for
the fragment, which htmx 2 would not swap otherwise), a 422 from the API.

The search is pure computation (a 70B model on 512 GPUs: ~0.2 s); the routes are plain ``def`` functions, so
FastAPI runs them in its thread pool and the event loop keeps answering everyone else.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response

from app.ledger.bounds import MODEL_MAX_CHARS
from app.ledger.layouts import LayoutSearch, read_search, search_layouts
from app.ledger.layouts.query import ALLOWED, FIELDS, LayoutSearchIn
from app.ledger.scenario import FieldError, ScenarioError, parse_scenario
from app.receipts.layouts import PATH, LayoutsOut, layouts_out
from app.web.http.errors import field_detail, unprocessable
from app.web.http.htmx import PAGE_METHODS, VARY, is_history_restore, wants_fragment
from app.web.http.query import query_dict, repeated_fields
from app.web.http.responses import ERRORS
from app.web.http.settings import public_base_url
from app.web.http.templating import templates
from app.web.views.layouts import LayoutsRequest, layouts_context

router = APIRouter()


def read_request(request: Request, *, strict: bool) -> LayoutsRequest:
    """The search's inputs and the scenario's from the query string, with every error; the page ignores unknown
    names (``strict`` false), as the lab's page does, the API refuses them."""
    raw = query_dict(request)
    given = Counter(k for k, _ in request.query_params.multi_items() if k in FIELDS)
    errors: list[FieldError] = [
        *repeated_fields(request),
        *(FieldError(k, f"given {n} times in the query string", "one value") for k, n in given.items() if n > 1),
    ]
    query = scenario = None
    try:
        query = read_search(raw)
    except ScenarioError as exc:
        errors.extend(exc.errors)
    # an empty field is its default, as the lab's form sends it
    fields = {k: v for k, v in raw.items() if k not in FIELDS and v.strip()}
    try:
        scenario = parse_scenario(fields, allow_unknown=not strict)
    except ScenarioError as exc:
        errors.extend(exc.errors)
    if errors:
        return LayoutsRequest(raw, None, query, tuple(errors))
    return LayoutsRequest(raw, scenario, query, ())


def _searched(req: LayoutsRequest) -> tuple[LayoutsRequest, LayoutSearch | None]:
    """The search, or the request with the scenario's refusal to start one (no model, params typed, …)."""
    if req.scenario is None or req.query is None:
        return req, None
    try:
        return req, search_layouts(req.scenario, req.query)
    except ScenarioError as exc:
        return LayoutsRequest(req.raw, None, req.query, exc.errors), None


@router.api_route(PATH, methods=PAGE_METHODS, include_in_schema=False)
def layouts_page(request: Request) -> Response:
    """The search, once the form names a model; before that (``/layouts`` as linked) the form alone, a 200."""
    req = read_request(request, strict=False)
    req, result = _searched(req) if req.raw.get("model", "").strip() else (req, None)
    context = layouts_context(req, result)
    if wants_fragment(request):
        headers = {**VARY, "HX-Push-Url": req.address}
        return templates.TemplateResponse(request, "partials/_layouts.html", context, headers=headers)
    status = 200 if not req.errors or is_history_restore(request) else 422
    return templates.TemplateResponse(request, "layouts.html", context, status_code=status, headers=VARY)


def _parameter(name: str) -> dict[str, Any]:
    """A search field as an OpenAPI query parameter: its schema from the search's own model (bounds, choices)."""
    info = LayoutSearchIn.model_fields[name]
    schema = LayoutSearchIn.model_json_schema()["properties"][name]
    description = f"{info.description} Allowed: {ALLOWED[name]}."
    return {"name": name, "in": "query", "required": False, "schema": schema, "description": description}


# The route reads the query string itself (the scenario's fields and the search's, one 422 naming every bad field in
# the lab's words), so its parameters are documented here rather than declared in its signature.
_PARAMETERS = [
    {"name": "model", "in": "query", "required": True, "schema": {"type": "string", "maxLength": MODEL_MAX_CHARS},
     "description": "The model: a known id or a compact config (cfg:…); every other scenario field of "
     "/api/estimate is read too, except params, unit_params and activation_bytes, which each layout counts."},
    *(_parameter(name) for name in FIELDS),
]  # fmt: skip


@router.get("/api/layouts", response_model=LayoutsOut, responses=ERRORS, openapi_extra={"parameters": _PARAMETERS},
            summary="The layouts of a model on a GPU count that fit, ranked by their communication")  # fmt: skip
def layouts_api(request: Request) -> Any:
    """Takes every scenario field of ``/api/estimate`` in the query string too (a model is needed; params,
    unit_params and activation_bytes are counted for each layout, so they must not be typed). A bad field is a
    422 naming it and its allowed range; more GPUs than the bound is one."""
    req, result = _searched(read_request(request, strict=True))
    if result is None:
        return unprocessable(field_detail(e, "query") for e in req.errors)
    assert req.scenario is not None
    return layouts_out(req.scenario, result, public_base_url(request))
