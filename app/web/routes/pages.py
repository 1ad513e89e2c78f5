"""The page routes: the lab for a scenario (or, for htmx, its results partial), the paste form, the
detail tables and the API docs. Each parses its input, builds a view, and renders a template.

The routes are plain ``def`` functions: FastAPI runs them in its thread pool, so computing an
estimate never holds up the event loop that answers everyone else. The one exception is the live
update (``page`` for htmx), a few milliseconds of computation with its costliest parts deferred: it
runs in the event loop, where it costs less than the hop to a thread and back would, and only the
whole page goes to the pool.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any
from urllib.parse import parse_qs, parse_qsl, urlencode

from fastapi import APIRouter, Request
from fastapi.responses import RedirectResponse, Response
from starlette.concurrency import run_in_threadpool

from app.interop.deepspeed.reader import import_deepspeed
from app.interop.deepspeed.report import DeepSpeedConfigError
from app.interop.torchtitan_reader import TorchtitanCommandError, read_torchtitan_command
from app.ledger.estimate import estimate
from app.ledger.json_text import loads_strict
from app.ledger.ledger import compute_ledger
from app.ledger.models.architecture import ModelConfigError
from app.ledger.models.reference import compact
from app.ledger.peak.fit import find_fit
from app.ledger.scenario import DEFAULT_SCENARIO, FIELD_NAMES, Scenario, ScenarioError, parse_scenario
from app.ledger.scenario.links import canonical_query, link
from app.ledger.scenario.presets import PRESET_BY_ID
from app.web.http.htmx import (
    FRAGMENT_VARY,
    IN_VIEW_HEADER,
    PAGE_METHODS,
    VARY,
    history_header,
    is_history_restore,
    is_htmx,
    shown_errors,
    wants_fragment,
)
from app.web.http.pasted import MOVED, moved_names, paste_model
from app.web.http.query import DERIVED, form_fields, query_dict, read_scenario, repeated_fields, unknown_names
from app.web.http.templating import templates
from app.web.views.deepspeed import deepspeed_import
from app.web.views.detail import detail_page_context
from app.web.views.fit import fit_table_context
from app.web.views.kills import kills_context
from app.web.views.lines import lines_context
from app.web.views.lower import lower_context
from app.web.views.page import address_of, page_context, presenting, results_context, title_of, view, with_present
from app.web.views.results import DEFERRABLE
from app.web.views.run import run_change
from app.web.views.snippets import snippets_context
from app.web.views.torchtitan import torchtitan_import

router = APIRouter(include_in_schema=False)


def deferred_parts(request: Request, present: bool) -> frozenset[str]:
    """What a live update leaves for later: every deferrable part (the sections below the peak, the kill
    lists) the page does not have on screen. Checking the mutants and searching D and the micro batch
    are most of an answer's work, and most edits are made with those parts off screen (docs/performance.md).
    Presenter mode defers nothing: the stepper shows the kill lists, and the room sees the page as it is."""
    if present:
        return frozenset()
    return DEFERRABLE - frozenset(request.headers.get(IN_VIEW_HEADER, "").split())


@router.api_route("/", methods=PAGE_METHODS)
async def page(request: Request) -> Response:
    """The lab. ``?preset=<id>`` alone redirects to ``/?preset=<id>&<canonical query>``: the preset's
    id stays in the address (and its title is the heading) while the scenario is still the preset's;
    the first edit that changes the scenario drops it."""
    # A live update is ~2 ms of pure computation (the fit finder's sections and the kill lists deferred
    # unless on screen, then up to ~20 ms): answered here, in the event loop, it skips the thread hop and
    # the GIL hand-offs, which cost a busy worker as much again (docs/performance.md). A whole page (the
    # kill lists and the fit finder for a scenario not seen yet) is answered in the thread pool, as the
    # plain ``def`` routes are, so that it never holds the loop up.
    if wants_fragment(request):
        return _page(request)
    return await run_in_threadpool(_page, request)


def _page(request: Request) -> Response:
    query = query_dict(request)
    preset_id = query.get("preset")
    raw = form_fields(query)
    preset = PRESET_BY_ID.get(preset_id or "")
    if preset_id is not None and not raw and (preset is None or preset.scenario != DEFAULT_SCENARIO):
        target = address_of(canonical_query(preset.scenario), preset) if preset else "/"
        target = with_present(target, presenting(query))
        if is_htmx(request):  # the whole page moves: the form's every field changes
            return Response(status_code=204, headers={"HX-Redirect": target})
        return RedirectResponse(target, status_code=303)
    scenario, error = read_scenario(raw, strict=False, repeated=repeated_fields(request))
    fragment, present = wants_fragment(request), presenting(query)
    deferred = deferred_parts(request, present) if fragment else frozenset()
    v = replace(
        view(raw, scenario, error, preset, deferred=deferred),
        present=present,
        ignored=unknown_names(query),
        moved=moved_names(query),
    )
    if fragment:
        # Fragments answer 200 even with field errors: htmx 2 does not swap 4xx responses.
        headers = {**FRAGMENT_VARY, history_header(request, v.page_address): v.page_address}
        return templates.TemplateResponse(
            request,
            "partials/_results.html",
            results_context(v, oob=True, shown=shown_errors(request)),
            headers=headers,
        )
    # A history restore must be 200 or htmx will not swap it in (it would keep the newer page).
    status = 200 if error is None or is_history_restore(request) else 422
    return templates.TemplateResponse(request, "index.html", page_context(v), status_code=status, headers=VARY)


async def _posted(request: Request, *, derived: bool = False) -> tuple[dict[str, str], dict[str, str]]:
    """A paste form's fields (the last of a repeated one winning) and the scenario it was pasted on (``keep``: its
    canonical query, which holds only what differs from the defaults; with ``derived`` false, the inputs whose
    default follows others are left out, for a DeepSpeed config or torchtitan command that describes them anew)."""
    body = await request.body()
    form = {k: v[-1] for k, v in parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True).items()}
    keep = {k: v for k, v in parse_qsl(form.get("keep", "")) if k in FIELD_NAMES and (derived or k not in DERIVED)}
    return form, keep


@router.post("/model")
async def use_model_config(request: Request) -> Response:
    """The page's "use a config.json" form: the config becomes the scenario's ``model`` (compact),
    keeping the other inputs of the scenario the form was on; a bad config is shown inline."""
    form, keep = await _posted(request, derived=True)
    text = form.get("config", "")
    try:
        config = loads_strict(text)
        if not isinstance(config, dict):
            raise ModelConfigError("must be a JSON object, like a config.json file")
        reference = compact(config)
    except (ValueError, RecursionError) as exc:
        message = str(exc) if isinstance(exc, ModelConfigError) else f"not valid JSON ({exc})"
        return _paste_refused(request, keep, text, message)
    scenario, error, moved = paste_model(keep, reference)
    if scenario is None:  # a valid architecture the scenario cannot hold (e.g. more than 10^13 parameters)
        assert error is not None
        return _paste_refused(request, keep, text, str(error))
    target = link(scenario)
    if moved:  # named in a notice on the page it lands on
        target += ("&" if "?" in target else "?") + urlencode({MOVED: ",".join(moved)})
    if is_htmx(request):  # the whole page moves to the new scenario
        return Response(status_code=204, headers={"HX-Redirect": target})
    return RedirectResponse(target, status_code=303)


@router.post("/deepspeed")
async def use_deepspeed_config(request: Request) -> Response:
    """The page's "use a DeepSpeed config" form: the config read beside the scenario the form was on (the
    config's keys replace that scenario's fields; its model reads the "auto" sizes), answered with every
    key and a link to the scenario it describes; a config DeepSpeed would refuse is shown inline."""
    form, keep = await _posted(request)
    text = form.get("ds_config", "")
    message: str | None = None
    imported: dict[str, Any] | None = None
    try:
        config = loads_strict(text)
        if not isinstance(config, dict):
            raise DeepSpeedConfigError("config", "must be a JSON object, like a ds_config.json file")
        # A new run: the config's keys replace the kept fields (typed=∅), and the old scenario's name goes
        result = import_deepspeed(config, {k: v for k, v in keep.items() if k != "name"}, typed=frozenset())
        imported = deepspeed_import(result)
    except DeepSpeedConfigError as exc:
        message = f"{exc.key}: {exc.message}" if exc.key != "config" else exc.message
    except ScenarioError as exc:  # the kept scenario itself is bad (a hand-edited form)
        message = str(exc)
    except (ValueError, RecursionError) as exc:
        message = f"not valid JSON ({exc})"
    scenario, error = read_scenario(keep, strict=False)
    context = page_context(view(keep, scenario, error), ds_error=message, ds_pasted=text, ds_import=imported)
    if is_htmx(request):  # 200 either way: htmx 2 does not swap a 4xx
        return templates.TemplateResponse(request, "partials/_deepspeed.html", context, headers=VARY)
    return templates.TemplateResponse(request, "index.html", context, status_code=422 if message else 200)


@router.post("/torchtitan")
async def use_torchtitan_command(request: Request) -> Response:
    """The page's "use a torchtitan command line" form: the command's flags replace the fields of the scenario the
    form was on, answered with every flag and a link to the scenario it describes; a flag torchtitan would refuse
    is shown inline."""
    form, keep = await _posted(request)
    text = form.get("command", "")
    message: str | None = None
    imported: dict[str, Any] | None = None
    try:
        fields, lines = read_torchtitan_command(text)
        described = parse_scenario({**{k: v for k, v in keep.items() if k != "name"}, **fields})
        imported = torchtitan_import(described, lines)
    except TorchtitanCommandError as exc:
        message = f"{exc.flag}: {exc.message}" if exc.flag != "command" else exc.message
    except ScenarioError as exc:
        message = str(exc)
    scenario, error = read_scenario(keep, strict=False)
    context = page_context(view(keep, scenario, error), tt_error=message, tt_pasted=text, tt_import=imported)
    if is_htmx(request):  # 200 either way: htmx 2 does not swap a 4xx
        return templates.TemplateResponse(request, "partials/_torchtitan.html", context, headers=VARY)
    return templates.TemplateResponse(request, "index.html", context, status_code=422 if message else 200)


def _paste_refused(request: Request, keep: dict[str, str], pasted: str, message: str) -> Response:
    """The page on the scenario the paste was made from, the paste kept and its error beside it,
    the paste box focused (``autofocus``). Under htmx, the paste form alone, swapped in place (200:
    htmx 2 does not swap a 4xx), so the page neither moves nor loses what else was typed."""
    scenario, error = read_scenario(keep, strict=False)
    context = page_context(view(keep, scenario, error), paste_error=message, pasted_config=pasted)
    if is_htmx(request):
        return templates.TemplateResponse(request, "partials/_paste.html", context, headers=VARY)
    return templates.TemplateResponse(request, "index.html", context, status_code=422)


def _detail_table(
    request: Request, name: str, partial: str, table: Callable[[Scenario], Mapping[str, Any]]
) -> Response:
    """A table that a closed <details> fetches when opened (htmx), or, followed as a link without
    JavaScript, the same table as a page of its own; for the scenario in the query."""
    scenario, error = read_scenario(form_fields(query_dict(request)), strict=False, repeated=repeated_fields(request))
    if scenario is None:
        assert error is not None
        return templates.TemplateResponse(request, "partials/_invalid.html", {"error": str(error)}, status_code=422)
    context = table(scenario)
    if is_htmx(request):
        return templates.TemplateResponse(request, partial, dict(context), headers=VARY)
    title = f"{name}: {title_of(scenario)}"
    page_ctx = detail_page_context(title, canonical_query(scenario), partial, context)
    return templates.TemplateResponse(request, "detail.html", page_ctx, headers=VARY)


@router.api_route("/lines", methods=PAGE_METHODS)
def lines(request: Request) -> Response:
    """The ledger-lines table (formula and evidence of every stage and class)."""
    return _detail_table(request, "Ledger lines", "partials/_lines.html", lambda s: lines_context(compute_ledger(s)))


@router.api_route("/fit-table", methods=PAGE_METHODS)
def fit_table(request: Request) -> Response:
    """The fit chart's table twin: the peak of every stage at each D."""
    # The curve needs the fit finder only: no checks, kill lists or micro-batch search.
    return _detail_table(
        request, "Peak per stage at each D", "partials/_fit_table.html", lambda s: fit_table_context(find_fit(s))
    )


@router.api_route("/run-change", methods=PAGE_METHODS)
def run_change_part(request: Request) -> Response:
    """The smallest change that fits the run's stage: what a live update's first lines load at once when the fit
    finder was deferred with the sections below the peak, or, followed as a link, a page of its own."""
    return _detail_table(
        request, "The smallest change that fits", "partials/_run_change.html",
        lambda s: {"change": run_change(estimate(s, with_kill_lists=False)), "scenario": s},
    )  # fmt: skip


@router.api_route("/kills", methods=PAGE_METHODS)
def kill_lists(request: Request) -> Response:
    """The kill lists: what a live update's results load when the section comes into view (htmx), or,
    followed as a link without JavaScript, the kill lists as a page of their own."""
    return _detail_table(request, "Mutation kill list", "partials/_kills.html", kills_context)


@router.api_route("/lower", methods=PAGE_METHODS)
def lower_sections(request: Request) -> Response:
    """The sections below the peak (the trace, the fit finder, communication, checkpoint, host, "Run it"): what
    a live update's results load when they come into view (htmx), or, followed as a link without JavaScript,
    those sections as a page of their own."""
    title = "Trace, fit finder, communication, checkpoint and host"
    return _detail_table(request, title, "partials/_lower.html", lower_context)


@router.api_route("/snippets", methods=PAGE_METHODS)
def snippets(request: Request) -> Response:
    """The scenario in each framework's own words, each with what it cannot express."""
    title = "Run it with DeepSpeed, FSDP2, torchtitan or the HF Trainer"
    return _detail_table(request, title, "partials/_snippets.html", snippets_context)


@router.api_route("/docs", methods=PAGE_METHODS)
def docs(request: Request) -> Response:
    """The API's interactive docs (Swagger UI, served from static/vendor)."""
    return templates.TemplateResponse(request, "docs.html", {})
