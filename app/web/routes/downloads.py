"""The receipts as files: the same scenario as ``/api/estimate``, streamed as a download.

The receipts' routes are ``async def``: each makes its whole file in one trip to the thread pool (the estimate
shared through :func:`app.receipts.answers.whole_estimate`) and streams it from the event loop
(:mod:`app.web.http.streaming` says why). The snippets are a few hundred bytes: plain ``def`` routes, one answer.
"""

from __future__ import annotations

import json

from fastapi import APIRouter, Request
from fastapi.responses import Response, StreamingResponse
from starlette.concurrency import run_in_threadpool

from app.interop.deepspeed.writer import deepspeed_snippet
from app.interop.fsdp2 import fsdp2_snippet
from app.interop.writers import WRITERS
from app.ledger.scenario import Scenario
from app.ledger.scenario.links import slug
from app.receipts.answers import whole_estimate
from app.receipts.csv_rows import csv_lines
from app.receipts.receipt import receipt
from app.receipts.summary_csv import summary_lines
from app.web.http.deps import QueryScenario
from app.web.http.responses import ERRORS
from app.web.http.settings import public_base_url
from app.web.http.streaming import chunked, sent

router = APIRouter()


def _attachment(s: Scenario, suffix: str) -> dict[str, str]:
    return {"Content-Disposition": f'attachment; filename="zero3-lab-{slug(s)}.{suffix}"'}


@router.head("/receipt.json", include_in_schema=False)
@router.get("/receipt.json", summary="Download the JSON receipt", responses={
    200: {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/Receipt"}}},
          "description": "The receipt, as /api/estimate answers it, indented, as a file"}, **ERRORS})  # fmt: skip
async def receipt_json(scenario: QueryScenario, request: Request) -> StreamingResponse:
    chunks = await run_in_threadpool(_json_chunks, scenario, public_base_url(request))
    return StreamingResponse(sent(chunks), media_type="application/json", headers=_attachment(scenario, "json"))


def _json_chunks(s: Scenario, base_url: str) -> list[str]:
    data = receipt(whole_estimate(s), base_url)
    return chunked(json.JSONEncoder(indent=2, ensure_ascii=False).iterencode(data))


@router.head("/receipt.csv", include_in_schema=False)
@router.get("/receipt.csv", summary="Download the CSV receipt", responses={
    200: {"content": {"text/csv": {"schema": {"type": "string"}}},
          "description": "The CSV receipt: one row per (stage, ledger, category), the inputs as rows too; UTF-8 "
                         "with a byte order mark, so that a spreadsheet reads × ÷ ⌈ ⌉ right"},
    **ERRORS})  # fmt: skip
async def receipt_csv(scenario: QueryScenario) -> StreamingResponse:
    chunks = await run_in_threadpool(_csv_chunks, scenario)
    return StreamingResponse(sent(chunks), media_type="text/csv; charset=utf-8", headers=_attachment(scenario, "csv"))


def _csv_chunks(s: Scenario) -> list[str]:
    # The BOM: Excel opens a CSV without one in the system's code page and garbles the formulas.
    return chunked(csv_lines(whole_estimate(s), bom=True))


@router.head("/summary.csv", include_in_schema=False)
@router.get("/summary.csv", summary="Download the summary CSV", responses={
    200: {"content": {"text/csv": {"schema": {"type": "string"}}},
          "description": "One row per stage: persistent state, peak and the instant that sets it, what the verdict "
                         "compares it with, fits, headroom; each in bytes, GB and GiB (UTF-8 with a byte order mark)"},
    **ERRORS})  # fmt: skip
async def summary_csv(scenario: QueryScenario) -> StreamingResponse:
    chunks = await run_in_threadpool(_summary_chunks, scenario)
    return StreamingResponse(sent(chunks), media_type="text/csv; charset=utf-8",
                             headers=_attachment(scenario, "summary.csv"))  # fmt: skip


def _summary_chunks(s: Scenario) -> list[str]:
    return chunked(summary_lines(whole_estimate(s), bom=True))


@router.head("/ds_config.json", include_in_schema=False)
@router.get("/ds_config.json", summary="Download the scenario as a DeepSpeed config", responses={
    200: {"content": {"application/json": {"schema": {"type": "object"}}},
          "description": "A ds_config.json that reproduces the scenario (what it cannot express: /api/snippets)"},
    **ERRORS})  # fmt: skip
def ds_config_json(scenario: QueryScenario) -> Response:
    # A few hundred bytes: one plain response (the receipts stream; a snippet has nothing to stream)
    return Response(deepspeed_snippet(scenario).text, media_type="application/json",
                    headers=_attachment(scenario, "ds_config.json"))  # fmt: skip


@router.head("/torchtitan.sh", include_in_schema=False)
@router.get("/torchtitan.sh", summary="Download the scenario as torchtitan's command line", responses={
    200: {"content": {"text/x-shellscript": {"schema": {"type": "string"}}},
          "description": "torchtitan 0.3.0's trainer with the scenario's flags (what it cannot say: /api/snippets)"},
    **ERRORS})  # fmt: skip
def torchtitan_sh(scenario: QueryScenario) -> Response:
    return _written(scenario, "torchtitan")


@router.head("/hf_trainer.py", include_in_schema=False)
@router.get("/hf_trainer.py", summary="Download the scenario as the HF Trainer's arguments", responses={
    200: {"content": {"text/x-python": {"schema": {"type": "string"}}},
          "description": "Python: TrainingArguments with its FSDP2 fsdp_config (what it cannot say: /api/snippets)"},
    **ERRORS})  # fmt: skip
def hf_trainer_py(scenario: QueryScenario) -> Response:
    return _written(scenario, "hf-trainer")


def _written(scenario: Scenario, name: str) -> Response:
    """The scenario in one framework's words, as a file (a few hundred bytes: one plain response)."""
    writer = WRITERS[name]
    return Response(writer.write(scenario).text, media_type=writer.media_type,
                    headers=_attachment(scenario, writer.filename))  # fmt: skip


@router.head("/fsdp2.py", include_in_schema=False)
@router.get("/fsdp2.py", summary="Download the scenario as an FSDP2 snippet", responses={
    200: {"content": {"text/x-python": {"schema": {"type": "string"}}},
          "description": "Python: fully_shard per decoder layer and on the root (what it cannot say: /api/snippets)"},
    **ERRORS})  # fmt: skip
def fsdp2_py(scenario: QueryScenario) -> Response:
    return Response(fsdp2_snippet(scenario).text, media_type="text/x-python; charset=utf-8",
                    headers=_attachment(scenario, "fsdp2.py"))  # fmt: skip
