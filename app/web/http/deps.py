"""Dependencies: the scenario a request names, validated by the one input model.

``StrictScenarioIn`` (every bound, unknown keys refused) is read from the query string or the
JSON body by FastAPI itself, so ``/openapi.json`` documents each field with its bounds; a bad
field becomes a ``RequestValidationError`` that :mod:`app.web.http.errors` words per field.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Body, Depends, Query

from app.ledger.scenario import Scenario, to_scenario
from app.ledger.scenario.inputs import StrictScenarioIn


def scenario_from_query(inputs: Annotated[StrictScenarioIn, Query()]) -> Scenario:
    return to_scenario(inputs)


def scenario_from_body(
    inputs: Annotated[StrictScenarioIn, Body(description="Scenario fields; an omitted field takes its default.")],
) -> Scenario:
    return to_scenario(inputs)


QueryScenario = Annotated[Scenario, Depends(scenario_from_query)]
BodyScenario = Annotated[Scenario, Depends(scenario_from_body)]
