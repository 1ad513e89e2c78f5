"""Whole documents and the htmx response: the page, the fragment, the API docs page."""

from __future__ import annotations

from app.ledger.fields import FIELDS
from app.web.html.form import DEVICES_BLOCK, EMPTY_OOB_SLOTS, derived_slot, error_slot, paste_form, scenario_form
from app.web.html.results import results, waiting
from app.web.html.text import esc
from app.web.views import View, derived_slots, form_fields

_HTMX_CONFIG = (
    '{"historyCacheSize": 0, "refreshOnHistoryMiss": false, "allowEval": false, "includeIndicatorStyles": false,'
    ' "selfRequestsOnly": true, "defaultSwapStyle": "outerHTML"}'
)
_TOP = (
    '<body>\n<a class="skip" href="#results">Skip to the ledger</a>\n<header class="top">\n'
    '<h1><a href="/">zero3-lab</a> <span class="tagline">budget every byte of a ZeRO-3 / FSDP run, per busiest rank'
    '</span></h1>\n<nav aria-label="Elsewhere"><a href="/docs">API docs</a> &middot;'
    ' <a href="/openapi.json">OpenAPI</a></nav>\n</header>\n<main class="layout">\n'
    '<aside class="inputs" aria-label="Scenario">\n'
)


def _results(v: View) -> str:
    if v.estimate is None:
        return waiting(v.errors)
    return results(v.estimate, v.title, v.query)


def page(v: View, *, paste_error: str | None = None, pasted_config: str = "") -> str:
    """The whole page: the form with what was typed, and the results."""
    query = esc(v.query)
    alternate = f"/api/estimate?{query}" if v.query else "/api/estimate"
    return (
        '<!doctype html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>zero3-lab &mdash; {esc(v.title)}</title>\n"
        f"<meta name=\"htmx-config\" content='{_HTMX_CONFIG}'>\n"
        '<link rel="icon" href="data:,">\n<link rel="stylesheet" href="/static/app.css">\n'
        f'<link rel="alternate" type="application/json" href="{alternate}">\n'
        '<script src="/static/vendor/htmx.min.js" defer></script>\n<script src="/static/app.js" defer></script>\n'
        f"</head>\n{_TOP}"
        f"{scenario_form(form_fields(v.raw, v.scenario, v.errors))}"
        f"{paste_form(v.query, paste_error, pasted_config)}{DEVICES_BLOCK}</aside>\n"
        f"{_results(v)}</main>\n</body>\n</html>\n"
    )


def fragment(v: View) -> str:
    """The htmx response: the results section, plus every field's error slot and derived hint and
    the paste form's ``keep`` input, swapped out of band (the form itself is not re-rendered)."""
    if v.errors:
        slots = "".join(error_slot(f.name, v.errors.get(f.name), oob=True) + "\n" for f in FIELDS)
    else:
        slots = EMPTY_OOB_SLOTS
    hints = "".join(derived_slot(name, hint, oob=True) + "\n" for name, hint in derived_slots(v.scenario))
    return (
        f"{_results(v)}{slots}{hints}"
        f'<input type="hidden" id="keep" name="keep" value="{esc(v.query)}" hx-swap-oob="true">\n'
    )


def table_page(title: str, query: str, table: str) -> str:
    """A long table as a page of its own: what a reader without JavaScript gets from the link in
    a closed ``<details>`` (with JavaScript the table is fetched into the page instead)."""
    back = "/?" + esc(query) if query else "/"
    return (
        '<!doctype html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f'<title>zero3-lab &mdash; {esc(title)}</title>\n<link rel="icon" href="data:,">\n'
        '<link rel="stylesheet" href="/static/app.css">\n</head>\n<body>\n'
        f'<p><a href="{back}">&larr; back to the scenario</a></p>\n<main class="results">\n<h1>{esc(title)}</h1>\n'
        f"{table}</main>\n</body>\n</html>\n"
    )


DOCS = (
    '<!doctype html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n<title>zero3-lab API docs</title>\n'
    '<link rel="icon" href="data:,">\n<link rel="stylesheet" href="/static/vendor/swagger-ui/swagger-ui.css">\n'
    '<script src="/static/vendor/swagger-ui/swagger-ui-bundle.js" defer></script>\n'
    '<script src="/static/docs.js" defer></script>\n</head>\n<body>\n'
    '<p><a href="/">&larr; back to the lab</a> &middot; <a href="/openapi.json">openapi.json</a></p>\n'
    '<div id="swagger-ui" data-openapi="/openapi.json"></div>\n</body>\n</html>\n'
)
