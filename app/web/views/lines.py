"""``partials/_lines.html``: every ledger line (width, copies, owners, elements and bytes per rank,
formula and evidence) with the stage that holds it, a detail table fetched when opened (/lines)."""

from __future__ import annotations

from typing import Any

from app.ledger.ledger import Ledger


def lines_context(ledger: Ledger) -> dict[str, Any]:
    """``partials/_lines.html``: every ledger line, with the stage that holds it."""
    return {"lines": [(st.stage, line) for st in ledger.stages for line in st.lines]}
