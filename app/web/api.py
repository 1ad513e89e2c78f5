"""The JSON API and the downloads: one receipt, several encodings."""

from __future__ import annotations

import json
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from app.ledger.estimate import estimate
from app.ledger.scenario import Scenario, ScenarioError
from app.receipts.csv_rows import csv_lines
from app.receipts.links import slug
from app.receipts.receipt import _mutation, receipt
from app.web.openapi import BODY_SCHEMA, MUTATIONS_RESPONSES, QUERY_PARAMETERS, RECEIPT_RESPONSES
from app.web.query import error_body, read_scenario, scenario_fields

router = APIRouter()


class BadInput(Exception):
    """A request whose scenario is invalid; rendered as a 422 naming each bad field."""

    def __init__(self, error: ScenarioError, location: str) -> None:
        self.error = error
        self.location = location


def _from_query(request: Request) -> Scenario:
    unknown = sorted(k for k in request.query_params if k not in scenario_fields(request.query_params))
    raw: dict[str, object] = dict(scenario_fields(request.query_params))
    raw.update({k: request.query_params[k] for k in unknown})
    scenario, error = read_scenario(raw, strict=True)
    if error is not None:
        raise BadInput(error, "query")
    assert scenario is not None
    return scenario


def _json(data: Any, **headers: str) -> JSONResponse:
    return JSONResponse(data, headers=headers or None)


@router.get(
    "/api/estimate",
    openapi_extra={"parameters": QUERY_PARAMETERS},
    responses=RECEIPT_RESPONSES,
    summary="The receipt for the scenario in the query string",
)
def estimate_get(request: Request) -> JSONResponse:
    return _json(receipt(estimate(_from_query(request))))


@router.post(
    "/api/estimate",
    openapi_extra={"requestBody": BODY_SCHEMA},
    responses=RECEIPT_RESPONSES,
    summary="The receipt for the scenario in a JSON body",
)
async def estimate_post(request: Request) -> JSONResponse:
    body = await request.body()
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        return JSONResponse(
            {"detail": [{"loc": ["body"], "msg": "the body is not valid JSON", "type": "json_invalid"}]},
            status_code=422,
        )
    if not isinstance(data, dict):
        return JSONResponse(
            {
                "detail": [
                    {
                        "loc": ["body"],
                        "msg": "the body must be a JSON object of scenario fields",
                        "type": "model_attributes_type",
                    }
                ]
            },
            status_code=422,
        )
    scenario, error = read_scenario(data, strict=True)
    if error is not None:
        raise BadInput(error, "body")
    assert scenario is not None
    return _json(receipt(estimate(scenario)))


@router.get(
    "/api/mutations",
    openapi_extra={"parameters": QUERY_PARAMETERS},
    responses=MUTATIONS_RESPONSES,
    summary="The mutation kill lists for the scenario in the query string",
)
def mutations(request: Request) -> JSONResponse:
    result = estimate(_from_query(request))
    return _json(
        {
            "mutations": [_mutation(m) for m in result.mutations],
            "reference_mutations": [_mutation(m) for m in result.reference_mutations],
        }
    )


@router.get(
    "/receipt.json",
    openapi_extra={"parameters": QUERY_PARAMETERS},
    responses=RECEIPT_RESPONSES,
    summary="Download the JSON receipt",
)
def receipt_json(request: Request) -> Response:
    scenario = _from_query(request)
    body = json.dumps(receipt(estimate(scenario)), indent=2, ensure_ascii=False)
    return Response(
        body,
        media_type="application/json",
        headers={"Content-Disposition": f'attachment; filename="zero3-lab-{slug(scenario)}.json"'},
    )


@router.get(
    "/receipt.csv",
    openapi_extra={"parameters": QUERY_PARAMETERS},
    responses={
        200: {
            "content": {"text/csv": {"schema": {"type": "string"}}},
            "description": "The CSV receipt, streamed row by row",
        },
        422: RECEIPT_RESPONSES[422],
        414: RECEIPT_RESPONSES[414],
    },
    summary="Download the CSV receipt",
)
def receipt_csv(request: Request) -> StreamingResponse:
    scenario = _from_query(request)
    return StreamingResponse(
        csv_lines(estimate(scenario)),
        media_type="text/csv; charset=utf-8",
        headers={"Content-Disposition": f'attachment; filename="zero3-lab-{slug(scenario)}.csv"'},
    )


@router.get("/healthz", summary="Liveness", responses={414: RECEIPT_RESPONSES[414]})
def healthz() -> dict[str, str]:
    return {"status": "ok"}


def bad_input_response(error: BadInput) -> JSONResponse:
    return JSONResponse(error_body(error.error, error.location), status_code=422)
