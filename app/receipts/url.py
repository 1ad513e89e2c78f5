"""Where the lab is served: the base URL a receipt's ``url`` starts with, checked, and a scenario's page there."""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from app.ledger.scenario import Scenario
from app.ledger.scenario.links import link

# Where ``zero3-lab serve`` listens by default: the base of ``url`` when no other is given.
DEFAULT_BASE_URL = "http://127.0.0.1:8000"

# host[:port]: a DNS name or IPv4 address (labels may hold "_", as container names do), or an IPv6
# address in brackets; nothing else.
_NETLOC = re.compile(
    r"(?:[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?(?:\.[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?)*"
    r"|\[[0-9A-Fa-f:.]{2,45}\])(?::(?P<port>[0-9]{1,5}))?"
)
_PATH = re.compile(r"(?:/[A-Za-z0-9._~%-]*)*")


def check_base_url(text: str) -> str:
    """``text`` checked as the base of an absolute URL, normalised without a trailing ``/``.

    An ``http`` or ``https`` URL with a plain host (a name, IPv4, or IPv6 in brackets), an optional
    port and an optional path prefix (``https://example.org/lab``): no user, query, fragment, blank
    or control character. Raises :class:`ValueError` saying what is wrong.
    """
    if not text.isprintable() or any(c.isspace() for c in text):
        raise ValueError(f"{text!r} must not contain blanks or control characters")
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https"):
        raise ValueError(f"{text!r} must start with http:// or https://")
    netloc = _NETLOC.fullmatch(parts.netloc)
    if netloc is None:
        raise ValueError(f"{text!r} must name a host and optionally a port, nothing else")
    if netloc["port"] is not None and not 0 < int(netloc["port"]) < 65536:
        raise ValueError(f"{text!r} has a port outside 1 … 65,535")
    if "?" in text or "#" in text:
        raise ValueError(f"{text!r} must not carry a query or a fragment")
    segments = parts.path.split("/")[1:]
    if not _PATH.fullmatch(parts.path) or "." in segments or ".." in segments:
        raise ValueError(f"{text!r} has a path that is not a plain prefix such as /lab")
    return f"{parts.scheme}://{parts.netloc.lower()}{parts.path.rstrip('/')}"


def page_url(s: Scenario, base_url: str = DEFAULT_BASE_URL) -> str:
    """The scenario's page as an absolute URL: ``base_url`` + ``/?`` + the canonical query."""
    return base_url.rstrip("/") + link(s, "/")
