"""The receipt's ``scenario`` section: every input, canonical, as the scenario's declared fields give it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import Field, create_model

from app.ledger.scenario.out import scenario_out_fields
from app.receipts.strict import Bytes, Count
from app.receipts.strict import Strict as _Strict

# Every input of the scenario, derived from its declared fields (app/ledger/scenario/declared.py) in the
# receipt's order; the model id's description is the receipt's own.
_SCENARIO_FIELDS = scenario_out_fields(count=Count, size=Bytes) | {
    "model": (str, Field(description="a known model id, a compact config (cfg:…), or empty")),
}
if TYPE_CHECKING:  # a model to the type checker; the fields exist at run time
    ScenarioOut = _Strict
else:
    ScenarioOut = create_model(
        "ScenarioOut",
        __base__=_Strict,
        __module__=__name__,
        __doc__="Every input of the scenario, canonical: sizes as integers, defaults filled in.",
        **_SCENARIO_FIELDS,
    )
