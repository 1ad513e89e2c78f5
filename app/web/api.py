"""The JSON API and the downloads: one receipt, several encodings."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

import orjson
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from app.ledger.estimate import estimate
from app.ledger.models.architecture import ModelConfigError
from app.ledger.models.inventory import inventory
from app.ledger.models.known import KNOWN_MODELS
from app.ledger.models.reference import compact, ignored_keys, resolve
from app.ledger.scenario import Scenario, ScenarioError
from app.receipts.csv_rows import csv_lines
from app.receipts.inventory import inventory_json
from app.receipts.links import slug
from app.receipts.receipt import mutation_json, receipt
from app.web.openapi import (
    BODY_SCHEMA,
    CONFIG_BODY,
    INVENTORY_RESPONSES,
    MODELS_RESPONSES,
    MUTATIONS_RESPONSES,
    QUERY_PARAMETERS,
    RECEIPT_RESPONSES,
)
from app.web.query import error_body, query_dict, read_scenario
from app.web.routing import DirectRoute

router = APIRouter(route_class=DirectRoute)


class BadInput(Exception):
    """A request whose scenario is invalid; rendered as a 422 naming each bad field."""

    def __init__(self, error: ScenarioError, location: str) -> None:
        self.error = error
        self.location = location


def _scenario(raw: Mapping[str, object], location: str) -> Scenario:
    scenario, error = read_scenario(raw, strict=True)
    if error is not None:
        raise BadInput(error, location)
    assert scenario is not None
    return scenario


def _from_query(request: Request) -> Scenario:
    return _scenario(query_dict(request), "query")


class FastJSON(Response):
    """JSON rendered by orjson: exact integers, several times faster than the standard library."""

    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return orjson.dumps(content)


def _body_error(message: str, kind: str, *loc: str) -> JSONResponse:
    """A 422 about the request body, in the shape of every other 422 (``field`` when one is named)."""
    detail: dict[str, Any] = {"loc": ["body", *loc], "msg": message, "type": kind}
    if loc:
        detail["field"] = loc[-1]
    return JSONResponse({"detail": [detail]}, status_code=422)


async def _json_object(request: Request, what: str) -> dict[str, object] | Response:
    """The body as a JSON object, or the 422 that says why it is not one."""
    try:
        data = json.loads(await request.body())
    except (ValueError, RecursionError):
        return _body_error("the body is not valid JSON", "json_invalid")
    if not isinstance(data, dict):
        return _body_error(f"the body must be a JSON object of {what}", "model_attributes_type")
    return data


@router.get(
    "/api/estimate",
    openapi_extra={"parameters": QUERY_PARAMETERS},
    responses=RECEIPT_RESPONSES,
    summary="The receipt for the scenario in the query string",
)
async def estimate_get(request: Request) -> Response:
    return FastJSON(receipt(estimate(_from_query(request))))


@router.post(
    "/api/estimate",
    openapi_extra={"requestBody": BODY_SCHEMA},
    responses=RECEIPT_RESPONSES,
    summary="The receipt for the scenario in a JSON body",
)
async def estimate_post(request: Request) -> Response:
    data = await _json_object(request, "scenario fields")
    if isinstance(data, Response):
        return data
    return FastJSON(receipt(estimate(_scenario(data, "body"))))


@router.get(
    "/api/mutations",
    openapi_extra={"parameters": QUERY_PARAMETERS},
    responses=MUTATIONS_RESPONSES,
    summary="The mutation kill lists for the scenario in the query string",
)
async def mutations(request: Request) -> Response:
    result = estimate(_from_query(request))
    return FastJSON(
        {
            "mutations": [mutation_json(m) for m in result.mutations],
            "reference_mutations": [mutation_json(m) for m in result.reference_mutations],
        }
    )


@router.get(
    "/receipt.json",
    openapi_extra={"parameters": QUERY_PARAMETERS},
    responses=RECEIPT_RESPONSES,
    summary="Download the JSON receipt",
)
async def receipt_json(request: Request) -> Response:
    scenario = _from_query(request)
    body = json.dumps(receipt(estimate(scenario)), indent=2, ensure_ascii=False)
    return Response(
        body,
        media_type="application/json",
        headers={"Content-Disposition": f'attachment; filename="zero3-lab-{slug(scenario)}.json"'},
    )


def _in_chunks(lines: Iterator[str], rows: int = 64) -> Iterator[str]:
    """``rows`` lines at a time. Starlette iterates a plain iterator in the thread pool, one hop per
    item: row by row, a download of ~130 rows queued behind every other request (15 ms each, and
    seconds under load), where two or three chunks cost what one does."""
    batch: list[str] = []
    for line in lines:
        batch.append(line)
        if len(batch) == rows:
            yield "".join(batch)
            batch.clear()
    if batch:
        yield "".join(batch)


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
async def receipt_csv(request: Request) -> StreamingResponse:
    scenario = _from_query(request)
    return StreamingResponse(
        _in_chunks(csv_lines(estimate(scenario))),
        media_type="text/csv; charset=utf-8",
        headers={"Content-Disposition": f'attachment; filename="zero3-lab-{slug(scenario)}.csv"'},
    )


@router.post("/api/model-inventory", openapi_extra={"requestBody": CONFIG_BODY}, responses=INVENTORY_RESPONSES,
             summary="The exact parameter inventory of a Hugging Face config.json")  # fmt: skip
async def model_inventory(request: Request) -> Response:
    config = await _json_object(request, "config.json keys")
    if isinstance(config, Response):
        return config
    try:
        ref = resolve(compact(config))
        ignored, ignored_count = ignored_keys(config)
    except ModelConfigError as exc:
        key = exc.key or "config"
        return _body_error(str(exc), "value_error", key)
    return FastJSON(inventory_json(ref, ignored, ignored_count))


@router.get("/api/models", responses=MODELS_RESPONSES, summary="The built-in models and where their facts come from")
async def models(_: Request) -> Response:
    return FastJSON([{"id": m.id, "title": m.title, "source": m.source, "params": inventory(m.architecture()).params}
                     for m in KNOWN_MODELS])  # fmt: skip


HEALTH_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {"description": "The server is up", "content": {"application/json": {"schema": {
        "type": "object", "required": ["status"], "properties": {"status": {"type": "string", "enum": ["ok"]}}}}}},
    414: RECEIPT_RESPONSES[414],
}  # fmt: skip


@router.get("/healthz", summary="Liveness", responses=HEALTH_RESPONSES)
async def healthz(_: Request) -> Response:
    return FastJSON({"status": "ok"})


def bad_input_response(error: BadInput) -> JSONResponse:
    return JSONResponse(error_body(error.error, error.location), status_code=422)
