"""Dependencies: the scenario a request names, validated by the one input model.

``StrictScenarioIn`` (every bound, unknown keys refused) is read from the query string or the
JSON body by FastAPI itself, so ``/openapi.json`` documents each field with its bounds; a bad
field becomes a ``RequestValidationError`` that :mod:`app.web.http.errors` words per field.

Both are ``async def``: turning validated inputs into a :class:`Scenario` is ~0.1 ms of pure
computation, and FastAPI runs a plain ``def`` dependency in the thread pool, one more trip through its queue
for every download and API request (under a mixed load, each trip waits behind every request queued before it).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Body, Depends, HTTPException, Query, Request

from app.ledger.scenario import Scenario, to_scenario
from app.ledger.scenario.inputs import StrictScenarioIn
from app.web.http.errors import field_detail
from app.web.http.query import repeated_fields


async def scenario_from_query(inputs: Annotated[StrictScenarioIn, Query()], request: Request) -> Scenario:
    """The query's scenario; a field given twice is refused (FastAPI's query model keeps the last value)."""
    repeated = repeated_fields(request)
    if repeated:
        raise HTTPException(status_code=422, detail=[field_detail(e, "query") for e in repeated])
    return to_scenario(inputs)


async def scenario_from_body(
    inputs: Annotated[StrictScenarioIn, Body(description="Scenario fields; an omitted field takes its default.")],
) -> Scenario:
    return to_scenario(inputs)


QueryScenario = Annotated[Scenario, Depends(scenario_from_query)]
BodyScenario = Annotated[Scenario, Depends(scenario_from_body)]
