"""``partials/_snippets.html``: the scenario as a ds_config.json and as an FSDP2 snippet, each with what it
cannot express, a detail table fetched when "Run it" is opened (/snippets)."""

from __future__ import annotations

from typing import Any

from app.interop.deepspeed.writer import deepspeed_snippet
from app.interop.fsdp2 import fsdp2_snippet
from app.ledger.scenario import Scenario
from app.ledger.scenario.links import link


def snippets_context(s: Scenario) -> dict[str, Any]:
    """``partials/_snippets.html``: both snippets, and the scenario's query for the download links."""
    return {"deepspeed": deepspeed_snippet(s), "fsdp2": fsdp2_snippet(s), "q": link(s, "")}
