"""``partials/_torchtitan.html``: the "use a torchtitan command line" form, with the pasted command and its error or
what it was read into, flag by flag."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.interop.torchtitan_reader import TitanFlag
from app.ledger.scenario import Scenario
from app.ledger.scenario.links import link


def torchtitan_context(error: str | None, pasted: str, imported: Mapping[str, Any] | None) -> dict[str, Any]:
    """``partials/_torchtitan.html``: the pasted command, its error or what it was read into."""
    return {"tt_error": error, "tt_pasted": pasted, "tt_import": imported}


def torchtitan_import(scenario: Scenario, lines: tuple[TitanFlag, ...]) -> dict[str, Any]:
    """What a pasted command was read into: the scenario and its link, and every flag's line."""
    return {"scenario": scenario, "link": link(scenario), "lines": lines}
