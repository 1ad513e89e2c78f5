"""``layouts.html`` and ``partials/_layouts.html``: the layout search's form (the search's own fields, the model, and
the scenario's other typed inputs carried along) and its table, each row a link to that scenario in the lab."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from app.ledger.layouts import LayoutSearch, Row
from app.ledger.layouts.query import FIELDS, SEARCH_DEVICES, LayoutSearchIn
from app.ledger.layouts.search import SEARCHED
from app.ledger.models.known import KNOWN_MODELS
from app.ledger.scenario import FIELD_NAMES, FieldError, Scenario
from app.ledger.scenario.links import link
from app.ledger.scenario.presets import DEVICE_BY_ID
from app.receipts.layouts import COUNTED, LOWER_BOUND, PATH, batch, both, milliseconds, summary

SHOWN = ("model", *FIELDS)  # the form's fields: their errors are shown beside them


@dataclass(frozen=True, slots=True)
class LayoutsRequest:
    """What one request names: the search's inputs and the scenario's as typed, the scenario and search when
    valid, and every error (one per field)."""

    raw: Mapping[str, str]  # every field the request gave, search and scenario
    scenario: Scenario | None
    query: LayoutSearchIn | None
    errors: tuple[FieldError, ...]

    @property
    def address(self) -> str:
        """The search's address: canonical when valid (the scenario's and the search's fields that differ from their
        defaults, sorted), else as given."""
        if self.scenario is not None and self.query is not None:
            q = self.query  # canonical as the scenario's link is: sorted, defaults omitted
            given = {k: getattr(q, k) for k in FIELDS if getattr(q, k) != LayoutSearchIn.model_fields[k].default}
            scenario = {k: v for k, v in self.scenario.non_default_items() if k not in SEARCHED}
            return PATH + "?" + urlencode(sorted({**scenario, **given}.items()))
        return PATH + ("?" + urlencode(sorted(self.raw.items())) if self.raw else "")


def _row(i: int, row: Row) -> dict[str, Any]:
    s = row.scenario
    return {
        "rank": i, "dp": s.dp, "tp": s.tp, "pp": s.pp, "cp": s.cp, "stage": s.stage,
        "reshard": s.reshard_after_forward if s.stage == 3 else None, "policy": s.act_policy, "batch": batch(s),
        "pp_stage": s.pp_stage if s.pp > 1 else "", "peak": row.peak, "peak_text": both(row.peak),
        "headroom": row.headroom, "headroom_text": both(row.headroom), "bytes": row.traffic.bytes,
        "bytes_text": both(row.traffic.bytes), "ns": row.traffic.lower_bound_ns,
        "time": milliseconds(row.traffic.lower_bound_ns), "href": link(s, "/"),
    }  # fmt: skip


def layouts_context(req: LayoutsRequest, result: LayoutSearch | None) -> dict[str, Any]:
    errors: dict[str, FieldError | None] = dict.fromkeys(SHOWN) | {e.field: e for e in req.errors}
    q = req.query or LayoutSearchIn.model_validate({})
    device = DEVICE_BY_ID[q.device]
    # the scenario's other typed fields, carried by the form as they came (unknown names are left behind)
    carried = [(k, v) for k, v in sorted(req.raw.items()) if k in FIELD_NAMES and k != "model" and k not in SEARCHED]
    return {
        "title": "Layout search",
        "address": req.address,
        "alternate": "/api" + req.address,
        "errors": [e for e in req.errors if e.field not in SHOWN],  # the form shows the others beside their field
        "field_errors": errors,
        "values": {name: req.raw.get(name, "") for name in FIELDS},
        "model": req.raw.get("model", ""),
        "models": [m.id for m in KNOWN_MODELS],
        "devices": [(d, DEVICE_BY_ID[d].title) for d in SEARCH_DEVICES],
        "device": device,
        "defaults": {name: info.default for name, info in LayoutSearchIn.model_fields.items()},
        "carried": carried,
        # the scenario the search starts from, in the lab (its link carries the model and every carried field)
        "base_href": link(req.scenario, "/") if req.scenario is not None else "",
        "base_fields": ", ".join(f"{k}={v}" for k, v in carried),
        "ignored": sorted(k for k in req.raw if k in SEARCHED),
        "counted": COUNTED,
        "lower_bound": LOWER_BOUND,
        "result": result,
        "summary": summary(result) if result is not None else "",
        "rows": [_row(i, r) for i, r in enumerate(result.rows, 1)] if result is not None else [],
        "rank": q.rank,
    }
