"""What the API answers, as pydantic models: the receipt, the kill lists, a model's inventory, the
built-in models.

The receipt is built as plain data by :mod:`app.receipts.receipt` (its field names are the
stable contract of ``../shared/spec/ledger.md``); these models *describe* that data, so that
``/openapi.json`` documents every field and FastAPI checks each answer against it. Every model
forbids extra keys: a field added to the receipt without being described here fails the tests
(``tests/web/test_response_models.py``) instead of silently leaving the schema behind.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

Bytes = Annotated[int, Field(ge=0, description="bytes, an exact integer")]
SignedBytes = Annotated[int, Field(description="bytes, an exact integer; negative when over capacity")]
Count = Annotated[int, Field(ge=0)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


# ---------------------------------------------------------------------------------------------
# The receipt
# ---------------------------------------------------------------------------------------------


class ScenarioOut(_Strict):
    """Every input of the scenario, canonical: sizes as integers, defaults filled in."""

    model: str = Field(description="a known model id, a compact config (cfg:…), or empty")
    params: Count
    dp: Count
    param_bytes: Count
    grad_bytes: Count
    master_bytes: Count
    opt_states: Count
    opt_bytes: Count
    unit_params: Count
    gather_bytes: Count
    prefetch: Count
    stage: Count
    bucket_bytes: Bytes
    activation_bytes: Bytes
    overhead_bytes: Bytes
    contingency_pct: Count
    capacity_bytes: Bytes
    name: str
    seq_len: Count
    micro_batch: Count
    act_bytes: Count
    act_policy: Literal["none", "selective", "full"]
    tp: Count
    sequence_parallel: Count
    logits_bytes: Count
    reduce_bytes: Count
    reshard_after_forward: Count
    norms: Literal["fused", "unfused"]
    offload_optimizer: Literal["none", "cpu", "nvme"]
    offload_param: Literal["none", "cpu", "nvme"]
    ranks_per_node: Count
    host_bytes: Bytes
    zero_init: Count
    shard_group: Count
    hpz: Count
    pp: Count
    pp_stage: Literal["first", "last"]
    ep: Count


class ByClass(_Strict):
    """Bytes per rank of each tensor class of model state, and their sum."""

    parameters: Bytes
    gradients: Bytes
    master_weights: Bytes
    optimizer_states: Bytes
    total: Bytes


class PeakFormulas(_Strict):
    gather: str
    activations: str
    contingency: str


class DeclaredPeak(_Strict):
    """The seed's declared peak: persistent state plus the declared transients and the contingency
    (schema 1's ``peak``), with its own verdict."""

    persistent: Bytes = Field(description="the stage's persistent total")
    gather: Bytes = Field(description="the stage-3 all-gather of the largest unit(s) beyond the own shard")
    buckets: Bytes
    activations: Bytes = Field(description="never divided by D")
    overhead: Bytes
    contingency: Bytes
    total: Bytes = Field(description="subtotal + contingency")
    subtotal: Bytes
    formulas: PeakFormulas
    fits: bool
    headroom_bytes: SignedBytes = Field(description="capacity − the declared peak")
    peak_minus_declared: Annotated[int, Field(description="the stage's peak − the declared peak, bytes")]


class InstantEntry(_Strict):
    """One thing resident at an instant."""

    category: Literal[
        "state",
        "gradients",
        "unsharded_params",
        "all_gather",
        "unsharded_grads",
        "reduce_scatter",
        "buckets",
        "activations",
        "temporaries",
        "overhead",
    ]
    what: str
    bytes: Bytes
    formula: str


class InstantParts(_Strict):
    persistent: Bytes
    gather: Bytes
    buckets: Bytes
    activations: Bytes
    overhead: Bytes


class InstantOut(_Strict):
    """A named instant of one training step and what is resident then."""

    key: str = Field(
        description="end-of-forward, loss-backward, backward-layer-<k>, root-post-backward or optimizer-step"
    )
    name: str
    phase: Literal["forward", "loss", "backward", "optimizer"]
    total: Bytes = Field(description="the sum of the entries (before contingency)")
    parts: InstantParts
    entries: list[InstantEntry]


class Peak(_Strict):
    """The training peak the verdict, headroom, fit finder and charts use.

    With a model (``kind`` schedule) it is the schedule-aware peak: the worst of the named instants
    of one step, its parts the categories resident at that ``instant``. Without one (``kind``
    declared) it is the seed's declared peak, and ``declared_peak`` holds the same figures."""

    persistent: Bytes = Field(description="declared: the persistent total; schedule: model state held then")
    gather: Bytes = Field(description="declared: the largest unit's remote shards; schedule: unsharded parameters")
    buckets: Bytes = Field(description="schedule: reduce-scatter input, unsharded gradients and declared buckets")
    activations: Bytes = Field(description="never divided by D; schedule: saved activations and temporaries")
    overhead: Bytes
    contingency: Bytes
    total: Bytes = Field(description="subtotal + contingency: what the fit verdict compares with capacity")
    subtotal: Bytes
    formulas: PeakFormulas
    kind: Literal["schedule", "declared"]
    instant: str | None = Field(description="the worst instant's name (schedule); null for the declared peak")
    instant_key: str | None
    note: str = Field(description="what the schedule assumes and where it approximates, or why none applies")
    instants: list[InstantOut] = Field(description="every instant walked (empty for the declared peak)")


class Communication(_Strict):
    collectives: str
    volume_bytes: Bytes = Field(description="ring-algorithm volume before the (D − 1) ÷ D factor")
    formula: str
    evidence: str


class LedgerLine(_Strict):
    """One tensor class at one stage: how many ranks share one copy, and what this rank holds."""

    tensor_class: Literal["parameters", "gradients", "master_weights", "optimizer_states"] = Field(alias="class")
    width: Count = Field(description="bytes per element")
    copies: Count
    owners: Count = Field(description="ranks sharing one copy (1 = replicated, D = sharded)")
    elements: Count = Field(description="elements per rank: ⌈N ÷ owners⌉")
    bytes: Bytes
    share_bp: Count = Field(description="share of the stage's persistent total, in basis points")
    formula: str
    evidence: str
    note: str


class Stage(_Strict):
    stage: Literal[0, 1, 2, 3]
    persistent: ByClass
    peak: Peak
    declared_peak: DeclaredPeak
    fits: bool
    headroom_bytes: SignedBytes = Field(description="capacity − peak")
    communication_bytes: Bytes = Field(description="sent per rank per optimizer step")
    communication: Communication
    lines: list[LedgerLine]


class Sources(_Strict):
    """Where each declared or model-filled input came from."""

    activations: Literal["modelled", "measured", "placeholder"]
    params: Literal["from config", "declared"]
    unit_params: Literal["from config", "declared"]
    buckets: Literal["declared"]
    overhead: Literal["declared"]


class CheckpointPolicy(_Strict):
    description: str
    device_bytes: Bytes = Field(description="extra device bytes on rank 0 while saving")
    host_bytes: Bytes = Field(description="host bytes on rank 0 while saving")
    save_peak_bytes: list[Bytes] = Field(description="per stage 0–3: the device peak while saving")
    device_formula: str
    host_formula: str
    flagged: bool
    flag: str


class Checkpoint(_Strict):
    sharded: CheckpointPolicy
    full_params: CheckpointPolicy
    full_state: CheckpointPolicy


class CheckResult(_Strict):
    check: str
    title: str
    passed: bool
    message: str


class Mutation(_Strict):
    """One mutant (one ownership or peak rule broken) and whether a named check killed it."""

    id: str
    rule: str
    killed: bool
    check: str = Field(description="the first named check that failed; empty for a survivor")
    message: str = Field(description="the failing check's message, or why the mutant survived")
    failed_checks: list[str]


class UnitSize(_Strict):
    name: str
    params: Count


class ModelSection(_Strict):
    reference: str
    title: str
    source: str
    family: str
    params: Count
    layers: Count
    largest_unit: UnitSize
    units: list[UnitSize]
    params_source: str
    unit_params_source: str


class Fraction(_Strict):
    numerator: Count
    denominator: Count


class ActivationInputs(_Strict):
    seq_len: Count
    micro_batch: Count
    act_bytes: Count
    tp: Count
    sequence_parallel: bool
    logits_bytes: Count


class DeclaredActivations(_Strict):
    """The activation entry when no model is named or the figure was typed."""

    source: Literal["measured", "placeholder"]
    total_bytes: Bytes


class ModelledActivations(_Strict):
    """The activation ledger of the named model."""

    source: Literal["modelled"]
    policy: Literal["none", "selective", "full"]
    per_layer_bytes: Bytes
    layers: Count
    working_set_bytes: Bytes
    embedding_bytes: Bytes
    head_bytes: Bytes
    logits_bytes: Bytes
    total_bytes: Bytes
    recompute_flops_fraction: str
    recompute_flops: Fraction
    formula: str
    assumptions: str
    inputs: ActivationInputs


class Fsdp2Section(_Strict):
    """FSDP2's stage-3 shard with each tensor padded on dim 0, beside the ⌈N ÷ D⌉ bound."""

    padded_elements: Count
    lower_bound_elements: Count
    padding_elements: Count
    stage3_padded_bytes: ByClass
    stage3_lower_bound_bytes: Bytes
    padding_bytes: Bytes
    largest_gather_unit: str
    note: str


class FitStage(_Strict):
    stage: Literal[0, 1, 2, 3]
    smallest_dp: int | None = Field(description="the smallest D that fits; null when none within bounds does")
    largest_micro_batch: int | None = Field(description="null when not modelled or not one sequence fits")


class FitPoint(_Strict):
    dp: Count
    peaks: list[Bytes] = Field(description="the peak of stages 0–3 at this D")


class CheapestOffload(_Strict):
    """The least offload (none, the optimizer to the CPU, both to the CPU, both to NVMe) on which the run's
    stage fits the device and the host memory per node, at the scenario's D."""

    stage: Count
    offload_optimizer: Literal["none", "cpu", "nvme"]
    offload_param: Literal["none", "cpu", "nvme"]
    device_peak: Bytes
    host_peak: Bytes


class FitSection(_Strict):
    capacity_bytes: Bytes
    stages: list[FitStage]
    micro_batch_modelled: bool
    curve: list[FitPoint]
    cheapest_offload: CheapestOffload | None = Field(description="null: no offload makes the run's stage fit")


class HostLine(_Strict):
    what: str
    where: Literal["host", "nvme"]
    pinned: bool
    bytes: Bytes = Field(description="per rank")
    formula: str
    evidence: str


class HostStage(_Strict):
    stage: Count
    per_rank: Bytes = Field(description="host RAM per rank during training")
    per_node: Bytes = Field(description="per_rank × ranks_per_node")
    nvme_per_node: Bytes
    load_peak: Bytes = Field(description="host RAM of the node while the model is built")
    load_formula: str = Field(description="arithmetic only; empty when nothing is built on the host")
    load_note: str
    peak: Bytes = Field(description="the larger of per_node and load_peak")
    headroom: SignedBytes
    fits: bool
    lines: list[HostLine]


class DeepSpeedEstimate(_Strict):
    """DeepSpeed's estimate_zero{2,3}_model_states_mem_needs row for the scenario, beside the lab's figures."""

    stage: Count
    options: str
    gpu_bytes: Bytes
    cpu_bytes: Bytes
    printed: str = Field(description="the row as DeepSpeed prints it (bytes ÷ 2^30, labelled GB)")
    lab_gpu_bytes: Bytes
    lab_cpu_bytes: Bytes
    differences: list[str]


class HostSection(_Strict):
    """The host ledger per node: what offload moves off the device, its pinned buffers, the load peak."""

    ranks_per_node: Count
    capacity: Bytes
    stages: list[HostStage]
    deepspeed_estimator: DeepSpeedEstimate | None
    deepspeed_estimator_note: str = Field(description="why DeepSpeed's estimator does not apply; empty when it does")


class RankShareOut(_Strict):
    """The parameters one rank holds under tp, pp and ep before ZeRO shards them, and how they were counted."""

    stage: Literal["only", "first", "last"] = Field(description="the pipeline stage counted; only: pp = 1")
    layers: Count = Field(description="decoder layers on this pipeline stage")
    dense: Count = Field(description="parameters ZeRO shards over the shard group")
    experts: Count = Field(description="expert parameters on this rank (E ÷ ep of each MoE layer's experts)")
    whole_model: Count = Field(description="the whole model's parameter count")
    largest_unit: UnitSize = Field(description="the largest wrapped unit on this rank: the stage-3 gather's U")
    lines: list[str] = Field(description="the counting, one human-readable line each")


class ParallelActivations(_Strict):
    """What pipeline and expert parallelism change in the modelled activation ledger."""

    stage: Literal["only", "first", "last"]
    in_flight: Count = Field(description="micro batches whose activations the stage holds at once under 1F1B")
    all_to_all_bytes: Bytes = Field(description="one MoE layer's all-to-all dispatch send and receive buffers")


class PipelineEndOut(_Strict):
    """One end of the pipeline at the run's stage."""

    pp_stage: Literal["first", "last"]
    params: Count = Field(description="parameters per rank on this end before ZeRO shards them")
    unit_params: Count
    activation_bytes: Bytes
    peak: Bytes = Field(description="the training peak of the run's stage on this end")
    fits: bool


class PipelineOut(_Strict):
    """Both ends of the pipeline: the ledger budgets pp_stage; the busier end is the busiest rank."""

    budgeted: Literal["first", "last"] = Field(description="the scenario's pp_stage")
    busier: Literal["first", "last"] = Field(description="the end with the larger peak (first on a tie)")
    budgeted_is_busier: bool
    other_problem: str = Field(description="why the other end could not be budgeted; empty when it was")
    ends: list[PipelineEndOut] = Field(description="first, then last; only the budgeted end when other_problem")


class ParallelismSection(_Strict):
    """The model-parallel layout: world size, this rank's share of the model, and both pipeline ends."""

    world: Count = Field(description="GPUs in the run: dp × tp × pp")
    dp: Count
    tp: Count
    pp: Count
    ep: Count
    shard_group: Count = Field(description="ranks ZeRO shards state over (dp unless HSDP / MiCS)")
    replicas: Count = Field(description="dp ÷ shard_group: copies of the sharded state")
    hpz: Count = Field(description="ZeRO++ secondary parameter partition size (1: none)")
    params_per_rank: Count = Field(description="the scenario's N: parameters on this rank before ZeRO shards them")
    expert_params_per_rank: Count = Field(
        description="of them, expert parameters sharded over dp ÷ ep (0 unless ep > 1)"
    )
    share: RankShareOut | None = Field(description="null without a model")
    activations: ParallelActivations | None = Field(description="null when activations are not modelled")
    pipeline: PipelineOut | None = Field(description="null when pp = 1")


class Receipt(_Strict):
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


class KillLists(_Strict):
    mutations: list[Mutation]
    reference_mutations: list[Mutation]


# ---------------------------------------------------------------------------------------------
# Models and their inventories
# ---------------------------------------------------------------------------------------------


class TensorGroup(_Strict):
    name: str = Field(description="checkpoint name; {k} is the layer index, {e} the expert index")
    shape: list[Count]
    count: Count = Field(description="identical tensors of this kind in one unit (experts)")


class UnitGroup(_Strict):
    name: str
    count: Count = Field(description="identical units (the decoder layers)")
    params: Count = Field(description="parameters in one of these units")
    tensors: list[TensorGroup]


class InventoryOut(_Strict):
    """A config's exact inventory: one entry per kind of unit and tensor, with counts."""

    model: str = Field(description="the scenario's model input for this config (cfg:…)")
    title: str
    family: str
    params: Count
    layers: Count
    tensor_count: Count = Field(description="tensors in the checkpoint")
    largest_unit: UnitSize
    units: list[UnitGroup] = Field(description="the embedding unit, all decoder layers as one entry, the final unit")
    ignored_keys: list[str] = Field(description="config keys this family does not read (the first 20)")
    ignored_key_count: Count


class KnownModelOut(_Strict):
    id: str
    title: str
    source: str
    params: Count


# ---------------------------------------------------------------------------------------------
# Two scenarios compared (GET /compare.json)
# ---------------------------------------------------------------------------------------------

Difference = Annotated[int, Field(description="bytes, an exact integer: B − A (negative when B needs less)")]


class PeakParts(_Strict):
    """The training peak's parts, as the receipt's ``peak`` holds them (without the formulas)."""

    persistent: Bytes
    gather: Bytes
    buckets: Bytes
    activations: Bytes
    overhead: Bytes
    contingency: Bytes
    subtotal: Bytes
    total: Bytes


class ComparedStage(_Strict):
    """One stage of one side: the figures of that side's receipt."""

    stage: Literal[0, 1, 2, 3]
    persistent: ByClass
    peak: PeakParts
    fits: bool
    headroom_bytes: SignedBytes = Field(description="capacity − peak")
    communication_bytes: Bytes = Field(description="sent per rank per optimizer step")


class ComparedSide(_Strict):
    link: str = Field(description="the side's canonical query string (sorted, defaults omitted)")
    scenario: ScenarioOut
    stages: list[ComparedStage] = Field(description="exactly four entries, stage 0 to 3, in order")


class ByClassDifference(_Strict):
    parameters: Difference
    gradients: Difference
    master_weights: Difference
    optimizer_states: Difference
    total: Difference


class PeakDifference(_Strict):
    persistent: Difference
    gather: Difference
    buckets: Difference
    activations: Difference
    overhead: Difference
    contingency: Difference
    subtotal: Difference
    total: Difference


class StageDifference(_Strict):
    """B − A for one stage, and which categories moved."""

    stage: Literal[0, 1, 2, 3]
    persistent: ByClassDifference
    peak: PeakDifference
    verdict: Literal["unchanged", "now fits", "no longer fits"] = Field(description="B's verdict against A's")
    headroom_bytes: Difference
    communication_bytes: Difference
    moved: list[str] = Field(
        description="the categories whose bytes differ, as ledger.category: persistent.gradients, peak.total, "
        "fit.headroom, communication.total"
    )


class InputChange(_Strict):
    """An input that differs between A and B (defaults filled in)."""

    name: str
    a: int | str
    b: int | str


class ComparisonDiff(_Strict):
    inputs: list[InputChange] = Field(description="the inputs that differ, in form order")
    stages: list[StageDifference] = Field(description="exactly four entries, stage 0 to 3, in order")


class ComparisonOut(_Strict):
    """Two scenarios side by side: both receipts' stage figures and their differences (B − A)."""

    schema_version: Literal[2]
    units: Literal["bytes"]
    link: str = Field(description="the comparison's shareable address, /compare?a=…&b=…, absolute")
    a: ComparedSide
    b: ComparedSide
    diff: ComparisonDiff


# ---------------------------------------------------------------------------------------------
# DeepSpeed configs in and the frameworks' snippets out
# ---------------------------------------------------------------------------------------------


class DeepSpeedLine(_Strict):
    """One key of the config and what the lab made of it."""

    key: str = Field(description="its dotted path in the config, e.g. zero_optimization.reduce_bucket_size")
    written: str = Field(description="what the config says; absent when DeepSpeed's default applies")
    effect: str = Field(description="what the lab does with it, with the numbers (elements × width = bytes)")
    status: Literal["sets", "checked", "no memory effect", "not modelled", "ignored", "unresolved"]


class DeepSpeedImportOut(_Strict):
    """A DeepSpeed config read into a scenario: the scenario (an ordinary canonical link), one line per key."""

    link: str = Field(description="the imported scenario's canonical link, e.g. /?bucket_bytes=52428800&model=…")
    scenario: ScenarioOut
    lines: list[DeepSpeedLine]
    unresolved: list[str] = Field(description='"auto" keys the lab could not resolve, each with what it used')
    deepspeed: str = Field(description="whose documented defaults a missing key takes")
    transformers: str = Field(description='whose Trainer resolves "auto"')


class DeepSpeedSnippet(_Strict):
    config: dict[str, object] = Field(description="a ds_config.json that reproduces the scenario")
    notes: list[str] = Field(description="what DeepSpeed cannot express, and what the launcher and script decide")


class Fsdp2Snippet(_Strict):
    text: str = Field(description="Python: fully_shard per decoder layer and on the root, with the scenario's policy")
    notes: list[str]


class SnippetsOut(_Strict):
    deepspeed: DeepSpeedSnippet
    fsdp2: Fsdp2Snippet
