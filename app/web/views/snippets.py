"""``partials/_snippets.html``: the scenario in each framework's own words (a ds_config.json, an FSDP2 snippet,
torchtitan's command line, the HF Trainer's arguments), each with what it cannot express, fetched when "Run it" is
opened (/snippets)."""

from __future__ import annotations

from typing import Any

from app.interop.writers import WRITERS
from app.ledger.scenario import Scenario
from app.ledger.scenario.links import link


def snippets_context(s: Scenario) -> dict[str, Any]:
    """``partials/_snippets.html``: every writer with its snippet, and the scenario's query for the download links."""
    return {"snippets": [(w, w.write(s)) for w in WRITERS.values()], "q": link(s, "")}
