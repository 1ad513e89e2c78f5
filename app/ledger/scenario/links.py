"""The one URL builder: canonical query strings (sorted, defaults omitted).

The page, the htmx fragment's pushed URL, the downloads and the CLI's ``--link`` all call
:func:`canonical_query`, so a scenario has exactly one address.
"""

from __future__ import annotations

from urllib.parse import urlencode

from app.ledger.scenario.scenario import Scenario


def canonical_query(s: Scenario) -> str:
    """``dp=16&params=13000000000``: inputs that differ from their defaults, sorted by name."""
    return urlencode(s.non_default_items())


def link(s: Scenario, path: str = "/") -> str:
    query = canonical_query(s)
    return f"{path}?{query}" if query else path


def slug(s: Scenario) -> str:
    """A filename-safe label for downloads: the name if any, else the shape of the run."""
    label = s.name or f"{s.params}p-dp{s.dp}"
    cleaned = "".join(c if c.isascii() and (c.isalnum() or c in "-_.") else "-" for c in label)
    return "-".join(part for part in cleaned.split("-") if part)[:60] or "scenario"
