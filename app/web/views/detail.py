"""``detail.html``: one detail table (ledger lines, the fit table, the kill lists, the sections below the
peak, the snippets, a trace) as a page of its own, what a reader without JavaScript gets from the link in a
closed <details>."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.web.views.page import linked


def detail_page_context(title: str, query: str, partial: str, table: Mapping[str, Any]) -> dict[str, Any]:
    """``detail.html``: one detail table as a page of its own, with a way back to the scenario."""
    return {**table, "title": title, "back": linked("/", query), "table": partial}
