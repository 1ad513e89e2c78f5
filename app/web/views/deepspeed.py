"""``partials/_deepspeed.html``: the "use a DeepSpeed config" form, with the pasted config and its error or
what it was read into, key by key, and the versions whose defaults (DeepSpeed's) and "auto" sizes
(transformers' Trainer) the import follows."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.interop.deepspeed.keys import DEEPSPEED, TRANSFORMERS
from app.interop.deepspeed.reader import DeepSpeedImport
from app.ledger.scenario.links import link


def deepspeed_context(error: str | None, pasted: str, imported: Mapping[str, Any] | None) -> dict[str, Any]:
    """``partials/_deepspeed.html``: the pasted config, its error or what it was read into."""
    return {"ds_error": error, "ds_pasted": pasted, "ds_import": imported, "deepspeed": DEEPSPEED,
            "transformers": TRANSFORMERS}  # fmt: skip


def deepspeed_import(result: DeepSpeedImport) -> dict[str, Any]:
    """What a pasted config was read into: the scenario and its link, every key's line, and the "auto"
    sizes the lab could not resolve."""
    return {"scenario": result.scenario, "link": link(result.scenario), "lines": result.lines,
            "unresolved": result.unresolved}  # fmt: skip
