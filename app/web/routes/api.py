"""The JSON API: the receipt, the kill lists, a config's inventory, the built-in models, liveness.

Routes parse (through the dependencies in :mod:`app.web.http.deps`), call the core, and return data
that FastAPI checks against the response models of :mod:`app.receipts.schema`. They are plain
``def`` functions, so FastAPI runs them in its thread pool: a slow estimate never blocks the
event loop that answers everyone else.

The receipt and the kill lists, the API's costliest answers, are ``async def`` routes that compute in exactly
one trip to the thread pool (``run_in_threadpool``), the estimate shared through
:func:`app.receipts.answers.whole_estimate`; FastAPI then checks and writes the answer in the event loop. As plain
``def`` routes they took three trips (the dependency, the route, FastAPI's check of the returned data), each
waiting in the pool's queue behind every request before it: under a mixed load, seconds (docs/performance.md).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Body, Depends, Request
from pydantic import BaseModel, ConfigDict, Field
from starlette.concurrency import run_in_threadpool

from app.interop.deepspeed.keys import DEEPSPEED, TRANSFORMERS
from app.interop.deepspeed.reader import import_deepspeed
from app.interop.deepspeed.report import DeepSpeedConfigError
from app.interop.deepspeed.writer import deepspeed_config
from app.interop.fsdp2 import fsdp2_snippet
from app.interop.hf_trainer import hf_trainer_snippet
from app.interop.torchtitan import torchtitan_snippet
from app.interop.torchtitan_reader import MAX_COMMAND_CHARS, TorchtitanCommandError, read_torchtitan_command
from app.ledger.models.architecture import ModelConfigError
from app.ledger.models.inventory import inventory
from app.ledger.models.known import KNOWN_MODELS
from app.ledger.models.readers import SUPPORTED
from app.ledger.models.reference import compact, ignored_keys, resolve
from app.ledger.scenario import Scenario, ScenarioError, parse_scenario
from app.ledger.scenario.inputs import StrictScenarioIn
from app.ledger.scenario.links import link
from app.receipts.answers import whole_estimate
from app.receipts.interop_out import DeepSpeedImportOut, SnippetsOut, TorchtitanImportOut
from app.receipts.inventory import InventoryOut, KnownModelOut, inventory_json
from app.receipts.receipt import Receipt, receipt_out
from app.receipts.sections.checks import KillLists, mutation_json
from app.web.http.deps import BodyScenario, QueryScenario
from app.web.http.errors import body_error, unprocessable
from app.web.http.responses import BODY_ERRORS, ERRORS, LIMITS
from app.web.http.settings import public_base_url
from app.web.http.strict_json import strict_json_body

router = APIRouter(dependencies=[Depends(strict_json_body)])


@router.get("/api/estimate", response_model=Receipt, responses=ERRORS,
            summary="The receipt for the scenario in the query string")  # fmt: skip
async def estimate_get(scenario: QueryScenario, request: Request) -> Receipt:
    return await run_in_threadpool(_receipt, scenario, public_base_url(request))


@router.post("/api/estimate", response_model=Receipt, responses=BODY_ERRORS,
             summary="The receipt for the scenario in a JSON body")  # fmt: skip
async def estimate_post(scenario: BodyScenario, request: Request) -> Receipt:
    return await run_in_threadpool(_receipt, scenario, public_base_url(request))


def _receipt(s: Scenario, base_url: str) -> Receipt:
    """The receipt as its model: FastAPI writes it as it is (validated when built), not dumped and read back."""
    return receipt_out(whole_estimate(s), base_url)


@router.get("/api/mutations", response_model=KillLists, responses=ERRORS,
            summary="The mutation kill lists for the scenario in the query string")  # fmt: skip
async def mutations(scenario: QueryScenario) -> dict[str, Any]:
    return await run_in_threadpool(_kill_lists, scenario)


def _kill_lists(s: Scenario) -> dict[str, Any]:
    result = whole_estimate(s)
    return {
        "mutations": [mutation_json(m) for m in result.mutations],
        "reference_mutations": [mutation_json(m) for m in result.reference_mutations],
    }


ConfigBody = Body(
    description=f"A Hugging Face config.json of a supported family ({SUPPORTED}).",
    examples=[{"model_type": "llama", "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32,
               "intermediate_size": 11008, "vocab_size": 32000}],
)  # fmt: skip


@router.post("/api/model-inventory", response_model=InventoryOut, responses=BODY_ERRORS,
             summary="The exact parameter inventory of a Hugging Face config.json")  # fmt: skip
def model_inventory(config: dict[str, Any] = ConfigBody) -> Any:
    try:
        ref = resolve(compact(config))
        ignored, ignored_count = ignored_keys(config)
    except ModelConfigError as exc:
        return body_error(str(exc), "value_error", exc.key or "config")
    return inventory_json(ref, ignored, ignored_count)


def _scenario_beside(exc: ScenarioError) -> Any:
    """The 422 for the scenario fields given beside an imported config or command: each under body.scenario."""
    return unprocessable(
        {"loc": ["body", "scenario", e.field], "field": e.field, "msg": str(e), "allowed": e.allowed,
         "type": "value_error"}
        for e in exc.errors
    )  # fmt: skip


class DeepSpeedIn(BaseModel):
    """A DeepSpeed config and the scenario inputs it is read beside (a model for its "auto" sizes, D …)."""

    model_config = ConfigDict(extra="forbid")

    config: dict[str, Any] = Field(
        description="A DeepSpeed config (ds_config.json) as a JSON object.",
        examples=[{"zero_optimization": {"stage": 3, "reduce_bucket_size": "auto"}, "bf16": {"enabled": True}}],
    )
    scenario: StrictScenarioIn = Field(
        default_factory=StrictScenarioIn,
        description="Scenario fields; each one given wins over the config, the others take the config's value "
        "or their default.",
        examples=[{"model": "llama-2-7b", "dp": 8}],
    )


@router.post("/api/deepspeed", response_model=DeepSpeedImportOut, responses=BODY_ERRORS,
             summary="A DeepSpeed config read into a scenario, every key accounted for")  # fmt: skip
def deepspeed_import(body: DeepSpeedIn) -> Any:
    """Sizes in a DeepSpeed config are elements: each line shows its conversion with the width it applies
    to. A key DeepSpeed would refuse is a 422 whose ``loc`` is the key's path under ``config``."""
    inputs = body.scenario.model_dump(exclude_none=True)
    try:
        result = import_deepspeed(body.config, inputs)
    except DeepSpeedConfigError as exc:
        return body_error(f"{exc.key}: {exc.message}", "value_error", "config", *exc.key.split("."))
    except ScenarioError as exc:
        return _scenario_beside(exc)
    s = result.scenario
    return {
        "link": link(s),
        "scenario": s.as_dict(),
        "lines": [{"key": x.key, "written": x.written, "effect": x.effect, "status": x.status} for x in result.lines],
        "unresolved": list(result.unresolved),
        "deepspeed": DEEPSPEED,
        "transformers": TRANSFORMERS,
    }


class TorchtitanIn(BaseModel):
    """A torchtitan 0.3.0 command line and the scenario inputs it is read beside (the model, …)."""

    model_config = ConfigDict(extra="forbid")

    command: str = Field(
        max_length=MAX_COMMAND_CHARS,
        description="python -m torchtitan.train --module llama3 … activation-checkpoint:… (or just its flags)",
        examples=["python -m torchtitan.train --module llama3 --config llama3_8b "
                  "--parallelism.data-parallel-shard-degree 8 --training.local-batch-size 2 "
                  "--training.seq-len 8192 activation-checkpoint:selective"],
    )  # fmt: skip
    scenario: StrictScenarioIn = Field(
        default_factory=StrictScenarioIn,
        description="Scenario fields; each one given wins over the command's.",
        examples=[{"model": "llama-2-7b"}],
    )


@router.post("/api/torchtitan", response_model=TorchtitanImportOut, responses=BODY_ERRORS,
             summary="A torchtitan command line read into a scenario, every flag named back")  # fmt: skip
def torchtitan_import(body: TorchtitanIn) -> Any:
    """A flag torchtitan would refuse is a 422 whose ``loc`` ends with the flag, under ``command``."""
    try:
        fields, lines = read_torchtitan_command(body.command)
        s = parse_scenario({**fields, **body.scenario.model_dump(exclude_none=True)})
    except TorchtitanCommandError as exc:
        return body_error(f"{exc.flag}: {exc.message}", "value_error", "command", exc.flag)
    except ScenarioError as exc:
        return _scenario_beside(exc)
    return {
        "link": link(s),
        "scenario": s.as_dict(),
        "lines": [{"flag": x.flag, "written": x.written, "effect": x.effect, "status": x.status} for x in lines],
        "torchtitan": "0.3.0",
    }


@router.get("/api/snippets", response_model=SnippetsOut, responses=ERRORS,
            summary="The scenario as a ds_config.json, an FSDP2 snippet, torchtitan's command line and the HF "
                    "Trainer's arguments")  # fmt: skip
def snippets(scenario: QueryScenario) -> dict[str, Any]:
    config, notes = deepspeed_config(scenario)
    fsdp2 = fsdp2_snippet(scenario)
    titan, hf = torchtitan_snippet(scenario), hf_trainer_snippet(scenario)
    return {
        "deepspeed": {"config": config, "notes": list(notes)},
        "fsdp2": {"text": fsdp2.text, "notes": list(fsdp2.notes)},
        "torchtitan": {"text": titan.text, "notes": list(titan.notes)},
        "hf_trainer": {"text": hf.text, "notes": list(hf.notes)},
    }


@router.get("/api/models", response_model=list[KnownModelOut], responses=LIMITS,
            summary="The built-in models and where their facts come from")  # fmt: skip
def models() -> list[dict[str, Any]]:
    return [
        {"id": m.id, "title": m.title, "source": m.source, "params": inventory(m.architecture()).params}
        for m in KNOWN_MODELS
    ]


@router.head("/healthz", include_in_schema=False)
@router.get("/healthz", responses=LIMITS, summary="Liveness")
def healthz() -> dict[str, str]:
    return {"status": "ok"}
