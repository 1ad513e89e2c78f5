"""The page's "Trace this scenario": ``POST /trace?<query>`` queues the scenario's trace (or joins it),
``GET /trace?<query>`` says how it stands, ``GET /trace.json?<query>`` gives a finished trace's report.

The query is read as the page reads it (the same scenario, the same field errors); the job's key is
the scenario's canonical query. Under htmx the answers are ``partials/_trace.html`` fragments: while a
job waits or runs, its status region polls every second, and gets 204 while nothing changed, the new
progress while it moves, and, once the job is done, the whole panel (retargeted, and 286, which stops
the polling). Without JavaScript the button posts a form and lands back on the lab's page at the
panel (``/?<query>#trace``), which shows the job as it stands.

Every web worker process has its own view of the trace jobs (:class:`app.trace.jobs.TraceQueue`), made on first
use: the jobs are on the task queue of ``Settings.trace_queue_url`` (run by ``zero3-lab worker``, one of which
``serve`` starts), their rows and ends in the SQLite file of ``Settings.trace_cache``, which the web workers share.
The page's results include the panel through the template global ``trace_panel``.
"""

from __future__ import annotations

import threading
from typing import Any

import jinja2
from fastapi import APIRouter, Request
from fastapi.responses import RedirectResponse, Response

from app.ledger.scenario import Scenario
from app.ledger.scenario.links import canonical_query
from app.trace.bounded import bounded_report
from app.trace.jobs import ClientBusy, QueueDown, QueueFull, RetryLater, TooLarge, TraceQueue
from app.trace.queue import make_huey
from app.trace.runner import TraceRunner, cache_version
from app.trace.store import StoreError, TraceStore
from app.web.http.htmx import PAGE_METHODS, is_htmx
from app.web.http.query import form_fields, query_dict, read_scenario, repeated_fields
from app.web.http.settings import Settings
from app.web.http.templating import templates
from app.web.views.detail import detail_page_context
from app.web.views.page import title_of
from app.web.views.trace_panel import trace_panel

_queues_made = threading.Lock()


router = APIRouter(include_in_schema=False)

VARY = {"Vary": "HX-Request, HX-Target"}  # the same URL answers a page, the panel or its progress
LIVE = "trace-live"  # the id of the polling status region (partials/_trace.html)


def queue_for(app: Any) -> TraceQueue:
    """This web worker's view of the trace jobs, made on first use from the app's settings (nothing is connected
    until a job is looked up)."""
    state = app.state
    queue = getattr(state, "trace_queue", None)
    if isinstance(queue, TraceQueue):
        return queue
    with _queues_made:
        queue = getattr(state, "trace_queue", None)
        if not isinstance(queue, TraceQueue):
            settings = getattr(state, "settings", None)
            settings = settings if isinstance(settings, Settings) else Settings()
            store = TraceStore(settings.trace_cache, cache_version())
            runner = TraceRunner(
                make_huey(settings.trace_queue_url), cache_version(), timeout_s=settings.trace_timeout_s
            )
            queue = TraceQueue(store, runner, max_queued=settings.trace_queue)
            state.trace_queue = queue
        return queue


@jinja2.pass_context
def _panel_global(context: jinja2.runtime.Context, query: str) -> Any:
    """``trace_panel(query)`` in a template: the panel of the request's app (none outside one), for the
    context's ``scenario`` when it has one (the results do: the query's scenario, not parsed again)."""
    request = context.get("request")
    app = getattr(request, "app", None)
    scenario = context.get("scenario")
    return trace_panel(
        query, None if app is None else queue_for(app), scenario=scenario if isinstance(scenario, Scenario) else None
    )


# The sections below the peak (partials/_lower.html) include the panel, with the canonical query and the
# scenario in their context: the panel asks for its state through this global.
templates.env.globals["trace_panel"] = _panel_global


def _read(request: Request) -> tuple[Scenario, str] | Response:
    """The request's scenario and its canonical query, or the answer naming its bad fields (422)."""
    scenario, error = read_scenario(form_fields(query_dict(request)), strict=False, repeated=repeated_fields(request))
    if scenario is None:
        assert error is not None
        context = {"error": str(error)}
        return templates.TemplateResponse(request, "partials/_invalid.html", context, status_code=422)
    return scenario, canonical_query(scenario)


def _panel_response(
    request: Request, scenario: Scenario, query: str, *, status_code: int = 200, **panel: Any
) -> Response:
    """The panel, as a fragment (htmx) or, followed without JavaScript, as a page of its own."""
    context = {"query": query, "trace_state": trace_panel(query, queue_for(request.app), look=True, **panel)}
    if is_htmx(request):
        return templates.TemplateResponse(
            request, "partials/_trace.html", context, status_code=status_code, headers=VARY
        )
    page = detail_page_context(f"Trace: {title_of(scenario)}", query, "partials/_trace.html", context)
    return templates.TemplateResponse(request, "detail.html", page, status_code=status_code, headers=VARY)


@router.post("/trace")
def start_trace(request: Request) -> Response:
    """Queue the scenario's trace, or join the one queued, running or finished."""
    read = _read(request)
    if isinstance(read, Response):
        return read
    scenario, query = read
    panel = trace_panel(query, None)
    if not panel.available or panel.problems:  # the panel says why; nothing is queued
        return _panel_response(request, scenario, query, status_code=200 if is_htmx(request) else 422)
    try:
        queue_for(request.app).submit(query, client=request.client.host if request.client else "")
    except (QueueFull, ClientBusy, RetryLater, TooLarge, QueueDown, StoreError) as exc:
        # htmx 2 swaps 2xx only: the refusal is said in the panel; without JavaScript, a 429 (this client's) or
        # 503 (the server's) page
        status = 200 if is_htmx(request) else 429 if isinstance(exc, (ClientBusy, RetryLater)) else 503
        status = 422 if isinstance(exc, TooLarge) and status != 200 else status
        return _panel_response(request, scenario, query, status_code=status, notice=str(exc), focus=True)
    if not is_htmx(request):
        target = f"/?{query}#trace" if query else "/#trace"
        return RedirectResponse(target, status_code=303)
    return _panel_response(request, scenario, query, focus=True)


@router.api_route("/trace", methods=PAGE_METHODS)
def trace_status(request: Request) -> Response:
    """How the scenario's trace stands; no work is started here."""
    read = _read(request)
    if isinstance(read, Response):
        return read
    scenario, query = read
    if not (is_htmx(request) and request.headers.get("hx-target") == LIVE):
        return _panel_response(request, scenario, query)
    panel = trace_panel(query, queue_for(request.app), look=True)
    if panel.status is not None and panel.status.active:
        if request.query_params.get("seen") == panel.seen:
            return Response(status_code=204, headers=VARY)  # nothing new: htmx keeps what it shows
        return templates.TemplateResponse(request, "partials/_trace_progress.html", {"t": panel}, headers=VARY)
    # Done (or gone): the whole panel replaces the polling region's section, and 286 stops the polling.
    context = {"query": query, "trace_state": panel}
    headers = {**VARY, "HX-Retarget": "#trace", "HX-Reswap": "outerHTML"}
    return templates.TemplateResponse(request, "partials/_trace.html", context, status_code=286, headers=headers)


@router.api_route("/trace.json", methods=PAGE_METHODS)
def trace_report(request: Request) -> Response:
    """A finished trace's JSON report (``zero3-lab trace --format json``), or 404."""
    read = _read(request)
    if isinstance(read, Response):
        return read
    report = queue_for(request.app).report(read[1])
    if report is None:
        return Response("404: no finished trace of this scenario\n", status_code=404, media_type="text/plain")
    return Response(bounded_report(report), media_type="application/json")  # a row older than its bound, too
