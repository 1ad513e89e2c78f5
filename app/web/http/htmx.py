"""How the pages answer htmx: which requests want a fragment rather than the whole page, the ``Vary`` headers
that keep the two apart in caches, and how a live update touches the browser's history."""

from __future__ import annotations

from urllib.parse import urlsplit

from starlette.requests import Request

PAGE_METHODS = ["GET", "HEAD"]  # HEAD answers like GET, for link checkers and monitors
VARY = {"Vary": "HX-Request"}  # the same URL answers a page or a fragment: caches must tell them apart


def is_htmx(request: Request) -> bool:
    return request.headers.get("hx-request") == "true"


def is_history_restore(request: Request) -> bool:
    return request.headers.get("hx-history-restore-request") == "true"


def wants_fragment(request: Request) -> bool:
    """htmx asks for the fragment, except when restoring history (then it needs the whole page)."""
    return is_htmx(request) and not is_history_restore(request)


# The page's script says how a live update should touch the history (static/app.js): ``replace``
# while an edit is being typed (its first update made the entry), else a settled change.
HISTORY_HEADER = "X-History"
# ... and which of the parts a live update may defer are on screen (``lower kills``, static/app.js): those
# come inline, the others are deferred until they come into view.
IN_VIEW_HEADER = "X-In-View"
# ... and which fields' error slots hold a message now (their names, or "-" for none): a live update swaps those
# and the fields with an error, not every field's empty slot again (each out-of-band swap costs the browser).
SHOWN_ERRORS_HEADER = "X-Shown-Errors"
FRAGMENT_VARY = {"Vary": f"HX-Request, HX-Current-URL, {HISTORY_HEADER}, {IN_VIEW_HEADER}, {SHOWN_ERRORS_HEADER}"}


def shown_errors(request: Request) -> frozenset[str] | None:
    """The fields whose error slot the page shows filled (``X-Shown-Errors``), or None when the request does not
    say (then every slot is swapped)."""
    said = request.headers.get(SHOWN_ERRORS_HEADER)
    return None if said is None else frozenset(said.split()) - {"-"}


def history_header(request: Request, address: str) -> str:
    """``HX-Push-Url`` for a settled change to a new address; ``HX-Replace-Url`` while typing (each
    keystroke's update replaces the entry the edit opened) and when the address is the one the page
    is already at (a blur or Enter after typing, or a change back and forth), so that typing ``128``
    leaves one entry, not four, and nothing is ever pushed twice."""
    current = urlsplit(request.headers.get("hx-current-url", ""))
    here = current.path + (f"?{current.query}" if current.query else "")
    if request.headers.get(HISTORY_HEADER) == "replace" or here == address:
        return "HX-Replace-Url"
    return "HX-Push-Url"
