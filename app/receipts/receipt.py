"""The JSON receipt (spec "Receipt contract"): stable names, raw integer bytes.

The receipt is built as its pydantic models, section by section (:mod:`app.receipts.sections`), so
the models that ``/openapi.json`` documents are the receipt itself, not a second description of it.
Every model forbids extra keys. :func:`receipt` is the same answer as JSON-ready data, as the
download, the CLI and ``/api/estimate`` write it.
"""

from __future__ import annotations

from typing import Any, Final, Literal, cast

from pydantic import Field

from app.ledger.estimate import Estimate
from app.ledger.scenario.links import canonical_query
from app.receipts.disclaimer import DISCLAIMER
from app.receipts.scenario_out import ScenarioOut
from app.receipts.sections.checks import CheckResult, Mutation, check_out, mutation_out
from app.receipts.sections.fit import FitSection, fit_out
from app.receipts.sections.host import HostSection, host_out
from app.receipts.sections.model import (
    DeclaredActivations,
    Fsdp2Section,
    ModelledActivations,
    ModelSection,
    activations_out,
    fsdp2_out,
    model_out,
)
from app.receipts.sections.parallelism import ParallelismSection, parallelism_out
from app.receipts.sections.stack import StackSection, stack_out
from app.receipts.sections.stages import Checkpoint, Stage, checkpoint_out, stage_out
from app.receipts.sections.trains import TrainsSection, trains_out
from app.receipts.strict import Strict
from app.receipts.url import DEFAULT_BASE_URL, page_url

# 2: with a model, `peak` is the schedule-aware peak (the worst named instant of a step) and names its
# `instant`; the seed's declared sum moved to `declared_peak` (spec "Two peaks"; issue 13).
SCHEMA_VERSION: Final = 2
# The `parallelism` key (issue 15 item 4) was added without a version bump, as `host` and `url` were: the
# contract names what a receipt holds "at least", and no existing field changed its name or meaning.

ActivationSource = Literal["modelled", "measured", "placeholder"]
ParamsSource = Literal["from config", "declared"]


class Sources(Strict):
    """Where each declared or model-filled input came from."""

    activations: ActivationSource
    params: ParamsSource
    unit_params: ParamsSource
    buckets: Literal["declared"]
    overhead: Literal["declared"]


class Receipt(Strict):
    """The whole answer for one scenario (spec "Receipt contract"): raw integer bytes per busiest rank."""

    schema_version: Literal[2] = Field(description="2: with a model, peak is the schedule-aware peak")
    scenario: ScenarioOut
    link: str = Field(description="the canonical query string (sorted, defaults omitted)")
    # Added by issue 14 (item 10) without a schema_version bump: the contract names what a receipt
    # holds "at least", so a new field is compatible; `link` keeps its meaning for the tools that read it.
    url: str = Field(
        description="the scenario's page as an absolute URL: the public base (ZERO3_LAB_PUBLIC_URL when the "
        "server sets it, else the request's own; the CLI's --base-url) + '/?' + link, or + '/' when link is empty",
        examples=["http://127.0.0.1:8000/?dp=16&params=13000000000"],
    )
    units: Literal["bytes"]
    sources: Sources
    # Added by issue 26 without a schema_version bump, as `parallelism` was.
    stack: StackSection = Field(description="the training stack; per choice it decides, the value and its source")
    # Added by issue 33 without a schema_version bump, as `stack` was.
    trains: TrainsSection = Field(description="every parameter, those that train and those frozen, and why")
    stages: list[Stage] = Field(description="exactly four entries, stage 0 to 3, in order")
    checkpoint: Checkpoint
    checks: list[CheckResult]
    mutations: list[Mutation] = Field(description="the kill list on this scenario (the scenario checks: 1–4, 6, 7, 9)")
    reference_mutations: list[Mutation] = Field(description="the kill list on the frozen references (checks 1–9)")
    model: ModelSection | None
    activations: ModelledActivations | DeclaredActivations = Field(discriminator="source")
    fsdp2: Fsdp2Section | None
    fit: FitSection
    host: HostSection
    # Added by issue 15 (item 4) without a schema_version bump, as `host` and `url` were.
    parallelism: ParallelismSection
    disclaimer: str


def receipt_out(e: Estimate, base_url: str = DEFAULT_BASE_URL) -> Receipt:
    """The whole answer for one scenario, as its model.

    ``base_url`` is where the lab is served, as :func:`app.receipts.url.check_base_url` accepts it (the
    web routes pass the public one, the CLI its ``--base-url``): ``url`` is the scenario's page there,
    while ``link`` stays the bare canonical query that other tools read.
    """
    s = e.scenario
    return Receipt(
        schema_version=SCHEMA_VERSION,
        scenario=ScenarioOut.model_validate(s.as_dict()),
        link=canonical_query(s),
        url=page_url(s, base_url),
        units="bytes",
        sources=Sources(
            activations=cast(ActivationSource, e.activation_source),
            params=cast(ParamsSource, s.source_of("params")),
            unit_params=cast(ParamsSource, s.source_of("unit_params")),
            buckets="declared",
            overhead="declared",
        ),
        stack=stack_out(s),
        trains=trains_out(s),
        stages=[stage_out(st) for st in e.ledger.stages],
        checkpoint=checkpoint_out(e),
        checks=[check_out(c) for c in e.checks],
        mutations=[mutation_out(m) for m in e.mutations],
        reference_mutations=[mutation_out(m) for m in e.reference_mutations],
        model=model_out(e),
        activations=activations_out(e),
        fsdp2=fsdp2_out(e),
        fit=fit_out(e),
        host=host_out(e),
        parallelism=parallelism_out(e),
        disclaimer=DISCLAIMER,
    )


def receipt(e: Estimate, base_url: str = DEFAULT_BASE_URL) -> dict[str, Any]:
    """The whole answer for one scenario as JSON-ready data: :func:`receipt_out`, dumped.

    The ``scenario`` section keeps the scenario's own order (:meth:`Scenario.as_dict`), as receipt files
    always have; the schema lists five late inputs last, and ``/api/estimate`` answers in its order.
    """
    data = receipt_out(e, base_url).model_dump(mode="json", by_alias=True)
    data["scenario"] = e.scenario.as_dict()
    return data
