"""The scenario's inputs as a pydantic model: the one place bounds, defaults, units and help live.

Every field of :class:`ScenarioIn` carries its whole contract: its bounds (``ge``/``le``, a
``Literal`` of the supported widths, ``max_length`` and ``pattern`` for text), its label
(``title``), its help (``description``), ``examples``, and the form's metadata in
``json_schema_extra``: ``x-group`` (a :data:`GROUPS` id), ``x-unit``, ``x-kind`` (how a string
is read: ``count``, ``bytes``, ``int``, ``text`` or ``choice``) and ``x-default`` (the value an
absent field takes when no other input decides it; absent where one always does).
``app.ledger.scenario.fields`` derives the field table from it, and through that table the CLI flags, the
page's form and the receipts' input rows; FastAPI reads it as a query or body model.

Every field is optional: absent or ``None`` means "use the default", and some defaults follow
other inputs (``gather_bytes`` is ``param_bytes``, ``reduce_bytes`` is ``grad_bytes``; a model
fills ``params``, ``unit_params``,
``activation_bytes`` and, for a model with a short learned context, ``seq_len``).
``app.ledger.scenario.to_scenario`` turns a validated ``ScenarioIn`` into the core's frozen
``Scenario`` with every default filled in.

Strings (a URL, a form, a CLI flag) are read by the exact size parsers of ``app.ledger.scenario.sizes``
(``7B``, ``80GiB``, ``7,000,000,000``); a JSON number passes when it is an exact integer (a whole
float such as ``8.0`` or ``7e9`` becomes that int); true/false, fractions and anything else are
refused, never rounded. The rules across fields (U ≤ N, the model's own limits) run in a model
validator, after the fields, and name the field they blame.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Self

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    model_validator,
)
from pydantic.fields import FieldInfo
from pydantic_core import InitErrorDetails, PydanticCustomError

from app.ledger.bounds import (
    DEFAULT_UNIT_PARAMS_CAP,
    DP,
    MICRO_BATCH,
    MODEL_MAX_CHARS,
    NAME_MAX_CHARS,
    SEQ_LEN,
    TEN_13,
    TP,
    TWO_40,
    TWO_46,
    TWO_50,
    ActPolicy,
    ActWidth,
    LogitsWidth,
    NormsImpl,
)
from app.ledger.models.activations import ActivationInputError
from app.ledger.models.architecture import ModelConfigError
from app.ledger.models.defaults import MODEL_INPUTS, ModelQuery, model_defaults
from app.ledger.models.parallel import ParallelLayoutError
from app.ledger.models.reference import resolve
from app.ledger.scenario.sizes import SizeError, parse_bytes, parse_count, parse_plain

Kind = Literal["count", "bytes", "int", "text", "choice"]

# "Printable" for a scenario name, stated as one character class so that the parser and the
# OpenAPI schema enforce the same rule: no C0/C1 controls or DEL, no soft hyphen, no zero-width
# or bidirectional controls, no line/paragraph separators, no BOM, no surrogates, no private use,
# no noncharacters.
NAME_FORBIDDEN = (
    "\\u0000-\\u001f\\u007f-\\u009f\\u00ad\\u061c\\u180e\\u200b-\\u200f\\u2028-\\u202e\\u2060-\\u206f"
    "\\ud800-\\udfff\\ue000-\\uf8ff\\ufdd0-\\ufdef\\ufeff\\ufff0-\\uffff"
)
NAME_PATTERN = f"^[^{NAME_FORBIDDEN}]*$"

# The form's sections, in order: (id, title). Each field's ``x-group`` is one of these ids.
GROUPS: tuple[tuple[str, str], ...] = (
    ("model", "Model"),
    ("precision", "Precision and optimizer"),
    ("parallelism", "Parallelism"),
    ("schedule", "Schedule and buffers"),
    ("activation", "Activation model (with a model)"),
    ("measured", "Measured inputs"),
    ("device", "Device"),
    ("host", "Offload and host memory"),
)
PipelineStage = Literal["first", "last"]
OffloadDevice = Literal["none", "cpu", "nvme"]

# A validation context key (see ScenarioIn._across_fields): inputs that were given but invalid,
# so the rules across fields neither read them nor fall back to their defaults.
UNCHECKED = "unchecked"


# --------------------------------------------------------------------------- reading raw values


def _refuse(kind: str, reason: str) -> PydanticCustomError:
    # The reason goes in the context, not the template: it may quote user text with braces.
    return PydanticCustomError(kind, "{reason}", {"reason": reason})


def _exact_int(parse: Callable[[str], int]) -> Callable[[object], int | None]:
    """A reader for one kind of integer field: strings through ``parse``, JSON numbers exactly."""

    def read(raw: object) -> int | None:
        if raw is None or (isinstance(raw, int) and not isinstance(raw, bool)):
            return raw
        if isinstance(raw, str):
            try:
                return parse(raw)
            except SizeError as exc:
                raise _refuse("exact_integer", str(exc)) from None
        if isinstance(raw, bool):  # True == 1 in Python; a JSON true must never become dp = 1
            raise _refuse("exact_integer", "must be a number, not true/false")
        if isinstance(raw, float):
            # JSON has one number type: 7e9 and 0.0 are integers there. Only whole values pass,
            # converted exactly (every bound is below 2^53); the ledger never sees the float.
            if not raw.is_integer():
                raise _refuse("exact_integer", f"{raw!r} is not a whole number")
            return int(raw)
        raise _refuse("exact_integer", f"must be an integer or a size string, not {type(raw).__name__}")

    return read


def _read_text(raw: object) -> str | None:
    """Text, trimmed; its length and characters are checked by the field's ``max_length`` and ``pattern``."""
    if raw is None:
        return None
    if not isinstance(raw, str):
        raise _refuse("text_type", "must be text")
    return raw.strip()


def _read_choice(raw: object) -> object:
    """A choice, trimmed; which values are allowed is the field's ``Literal``."""
    return raw.strip() if isinstance(raw, str) else raw


read_count = _exact_int(parse_count)
read_bytes = _exact_int(parse_bytes)
read_plain = _exact_int(parse_plain)

# The reader each kind of field uses: ``app.ledger.scenario.fields`` checks every field against it.
READERS: dict[Kind, Callable[..., object]] = {
    "count": read_count,
    "bytes": read_bytes,
    "int": read_plain,
    "text": _read_text,
    "choice": _read_choice,
}


def _kind(kind: Kind) -> Any:
    return Field(json_schema_extra={"x-kind": kind})


# One alias per way of reading; the bounds are each field's own (``Field(ge=…, le=…)``).
Count = Annotated[int | None, BeforeValidator(read_count), _kind("count")]
Bytes = Annotated[int | None, BeforeValidator(read_bytes), _kind("bytes")]
Plain = Annotated[int | None, BeforeValidator(read_plain), _kind("int")]
Text = Annotated[str | None, BeforeValidator(_read_text), _kind("text")]
# Supported widths and flags: anything else (3, 16, …) is refused, never rounded.
W124 = Annotated[Literal[1, 2, 4] | None, BeforeValidator(read_plain), _kind("int")]
W24 = Annotated[Literal[2, 4] | None, BeforeValidator(read_plain), _kind("int")]
# The activation model's widths: the model layer checks the same choices (app/ledger/bounds.py).
ActW = Annotated[ActWidth | None, BeforeValidator(read_plain), _kind("int")]
LogitsW = Annotated[LogitsWidth | None, BeforeValidator(read_plain), _kind("int")]
W048 = Annotated[Literal[0, 4, 8] | None, BeforeValidator(read_plain), _kind("int")]
W1248 = Annotated[Literal[1, 2, 4, 8] | None, BeforeValidator(read_plain), _kind("int")]
Flag = Annotated[Literal[0, 1] | None, BeforeValidator(read_plain), _kind("int")]
StageRun = Annotated[Literal[0, 1, 2, 3] | None, BeforeValidator(read_plain), _kind("int")]
Policy = Annotated[ActPolicy | None, BeforeValidator(_read_choice), _kind("choice")]
Norms = Annotated[NormsImpl | None, BeforeValidator(_read_choice), _kind("choice")]
Offload = Annotated[OffloadDevice | None, BeforeValidator(_read_choice), _kind("choice")]
PpStage = Annotated[PipelineStage | None, BeforeValidator(_read_choice), _kind("choice")]


def _form(group: str, unit: str, default: int | str | None) -> dict[str, Any]:
    """The form's metadata; no ``x-default`` where the default always follows other inputs."""
    return {"x-group": group, "x-unit": unit} | ({} if default is None else {"x-default": default})


# --------------------------------------------------------------------------- the model


class ScenarioIn(BaseModel):
    """A scenario as typed: every field optional, bounded, and documented; unknown keys ignored.

    The page, its links and the CLI read with this model; the JSON API with
    :class:`StrictScenarioIn`, which refuses unknown keys. Field order is the form's order.
    """

    # python-re: NAME_PATTERN excludes the surrogate range, which pydantic's default (Rust) regex
    # engine cannot compile.
    model_config = ConfigDict(extra="ignore", frozen=True, regex_engine="python-re")

    model: Text = Field(
        default=None,
        max_length=MODEL_MAX_CHARS,
        pattern=NAME_PATTERN,
        title="Model",
        description="A known model (llama-2-7b, mistral-7b-v0.1, …) or a pasted config.json in compact form "
        "(cfg:…). It fills params, the largest unit and, with the activation inputs, the activation peak.",
        examples=["llama-2-7b"],
        json_schema_extra=_form("model", "known id or cfg:…", ""),
    )
    params: Count = Field(
        default=None,
        ge=1,
        le=TEN_13,
        title="Parameters (N)",
        description="Parameters held by this data-parallel group (one model-parallel shard with TP/PP). "
        "Default: the model's exact count, else 7B.",
        examples=[7_000_000_000],
        json_schema_extra=_form("model", "parameters", 7_000_000_000),
    )
    unit_params: Count = Field(
        default=None,
        ge=0,
        le=TEN_13,
        title="Largest wrapped unit (U)",
        description="Parameters in the biggest module all-gathered at once; at most N. Default: the model's "
        "largest wrapped unit, else min(400M, N).",
        examples=[400_000_000],
        json_schema_extra=_form("model", "parameters", None),
    )
    param_bytes: W124 = Field(
        default=None,
        title="Parameter width",
        description="Width of the compute / low-precision parameter copy (BF16 = 2).",
        examples=[2],
        json_schema_extra=_form("precision", "bytes/element", 2),
    )
    grad_bytes: W24 = Field(
        default=None,
        title="Gradient width",
        description="Width of stored gradients.",
        examples=[2],
        json_schema_extra=_form("precision", "bytes/element", 2),
    )
    master_bytes: W048 = Field(
        default=None,
        title="Master-copy width",
        description="Width of the high-precision master copy; 0 = no separate master (FSDP2).",
        examples=[4],
        json_schema_extra=_form("precision", "bytes/element", 4),
    )
    opt_states: Plain = Field(
        default=None,
        ge=0,
        le=4,
        title="Optimizer states",
        description="Optimizer state tensors per parameter: Adam 2, SGD+momentum 1, plain SGD 0.",
        examples=[2],
        json_schema_extra=_form("precision", "tensors/parameter", 2),
    )
    opt_bytes: W1248 = Field(
        default=None,
        title="Optimizer-state width",
        description="Width of each optimizer state element.",
        examples=[4],
        json_schema_extra=_form("precision", "bytes/element", 4),
    )
    gather_bytes: W124 = Field(
        default=None,
        title="All-gather width",
        description="Width in which parameters are all-gathered for compute (FSDP2 param_dtype). Default: "
        "the parameter width.",
        examples=[2],
        json_schema_extra=_form("precision", "bytes/element", None),
    )
    reduce_bytes: W24 = Field(
        default=None,
        title="Reduce-scatter width",
        description="Width in which gradients are reduce-scattered (FSDP2 reduce_dtype); the reduce-scatter "
        "input holds one whole unit in it. Default: the gradient width.",
        examples=[4],
        json_schema_extra=_form("precision", "bytes/element", None),
    )
    dp: Plain = Field(
        default=None,
        ge=DP[0],
        le=DP[1],
        title="Sharding degree (D)",
        description="Ranks across which ZeRO / FSDP shards state; not the GPU count under TP/PP.",
        examples=[8],
        json_schema_extra=_form("parallelism", "ranks", 8),
    )
    stage: StageRun = Field(
        default=None,
        title="ZeRO stage run",
        description="The stage the run uses: the answer marks it, and the DeepSpeed config and FSDP2 snippet "
        "write it (FSDP2: 3 is full sharding, 2 keeps parameters unsharded after forward, 1 is not expressible). "
        "The comparison shows all four stages either way.",
        examples=[3],
        json_schema_extra=_form("parallelism", "stage", 3),
    )
    shard_group: Plain = Field(
        default=None,
        ge=1,
        le=131_072,
        title="Shard group (HSDP / MiCS)",
        description="Ranks of one shard group: state is sharded within it and replicated across the D ÷ group "
        "groups (FSDP2's HSDP mesh (replicate, shard), DeepSpeed mics_shard_size); gradients are reduce-scattered "
        "within the group, then all-reduced across groups. Must divide D. Default: D (one group, plain ZeRO).",
        examples=[8],
        json_schema_extra=_form("parallelism", "ranks", None),
    )
    hpz: Plain = Field(
        default=None,
        ge=1,
        le=131_072,
        title="Secondary partition (ZeRO++ hpZ)",
        description="DeepSpeed zero_hpz_partition_size at stage 3: besides its 1 ÷ D shard, each rank keeps a "
        "secondary 1 ÷ hpz shard of the parameters (usually hpz = GPUs per node), so backward all-gathers "
        "within the hpz group only. Must divide D; 1 is off.",
        examples=[8],
        json_schema_extra=_form("parallelism", "ranks", 1),
    )
    pp: Plain = Field(
        default=None,
        ge=1,
        le=1_024,
        title="Pipeline parallel (pp)",
        description="Pipeline stages: with a model, each holds L ÷ pp layers (pp must divide L), the first also "
        "the embedding, the last the head; under 1F1B the first stage keeps pp micro batches of activations. "
        "The GPU count is D × tp × pp.",
        examples=[1],
        json_schema_extra=_form("parallelism", "stages", 1),
    )
    pp_stage: PpStage = Field(
        default=None,
        title="Pipeline stage budgeted",
        description="Which end of the pipeline this ledger is for (with pp > 1): first (the embedding and pp "
        "micro batches in flight) or last (the head, the logits, one micro batch). The answer shows both ends' "
        "peaks and which is the busier.",
        examples=["first"],
        json_schema_extra=_form("parallelism", "stage", "first"),
    )
    ep: Plain = Field(
        default=None,
        ge=1,
        le=1_024,
        title="Expert parallel (ep)",
        description="A mixture-of-experts model's experts split over ep ranks of the D (ep divides D and the "
        "experts): each rank holds E ÷ ep experts per layer, ZeRO shards them over D ÷ ep, and each MoE layer "
        "all-to-alls its tokens.",
        examples=[1],
        json_schema_extra=_form("parallelism", "ranks", 1),
    )
    prefetch: Plain = Field(
        default=None,
        ge=0,
        le=8,
        title="Prefetched units (P)",
        description="Extra units all-gathered ahead while one executes (declared cap: 8).",
        examples=[1],
        json_schema_extra=_form("schedule", "units", 0),
    )
    reshard_after_forward: Flag = Field(
        default=None,
        title="Reshard after forward",
        description="FSDP2's reshard_after_forward for the decoder layers: 1 frees each layer's gathered "
        "parameters after its forward and gathers them again in backward; 0 keeps every layer unsharded from "
        "its forward to its backward. With a model, the schedule-aware peak reads it.",
        examples=[1],
        json_schema_extra=_form("schedule", "0 or 1", 1),
    )
    bucket_bytes: Bytes = Field(
        default=None,
        ge=0,
        le=TWO_40,
        title="Communication buckets",
        description="Reduce-scatter / all-reduce / all-gather buckets resident during the step.",
        examples=[0],
        json_schema_extra=_form("schedule", "bytes", 0),
    )
    activation_bytes: Bytes = Field(
        default=None,
        ge=0,
        le=TWO_46,
        title="Activation peak",
        description="Activation peak per rank; a typed value is a measurement. Default: modelled from the "
        "model, else the seed's 20 GB placeholder. Never divided by D.",
        examples=[20_000_000_000],
        json_schema_extra=_form("measured", "bytes", 20_000_000_000),
    )
    overhead_bytes: Bytes = Field(
        default=None,
        ge=0,
        le=TWO_46,
        title="Runtime overhead",
        description="Measured context, workspaces and allocator slack.",
        examples=[0],
        json_schema_extra=_form("measured", "bytes", 0),
    )
    contingency_pct: Plain = Field(
        default=None,
        ge=0,
        le=100,
        title="Contingency",
        description="Explicit contingency on top of everything else.",
        examples=[5],
        json_schema_extra=_form("measured", "%", 0),
    )
    seq_len: Count = Field(
        default=None,
        ge=SEQ_LEN[0],
        le=SEQ_LEN[1],
        title="Sequence length (s)",
        description="Tokens per sequence, for the activation model.",
        examples=[4096],
        json_schema_extra=_form("activation", "tokens", 4096),
    )
    micro_batch: Plain = Field(
        default=None,
        ge=MICRO_BATCH[0],
        le=MICRO_BATCH[1],
        title="Micro-batch (b)",
        description="Sequences per micro batch on one rank, for the activation model.",
        examples=[1],
        json_schema_extra=_form("activation", "sequences", 1),
    )
    act_bytes: ActW = Field(
        default=None,
        title="Activation width",
        description="Width of saved activations (BF16 = 2).",
        examples=[2],
        json_schema_extra=_form("activation", "bytes/element", 2),
    )
    act_policy: Policy = Field(
        default=None,
        title="Recomputation",
        description="Activation checkpointing: none, selective (the attention core) or full (each layer).",
        examples=["selective"],
        json_schema_extra=_form("activation", "policy", "none"),
    )
    tp: Plain = Field(
        default=None,
        ge=TP[0],
        le=TP[1],
        title="Tensor parallel (t)",
        description="Tensor-parallel degree; must divide the attention heads.",
        examples=[1],
        json_schema_extra=_form("activation", "ranks", 1),
    )
    sequence_parallel: Flag = Field(
        default=None,
        title="Sequence parallel",
        description="1 shards the residual stream across the tensor-parallel ranks (Megatron SP).",
        examples=[0],
        json_schema_extra=_form("activation", "0 or 1", 0),
    )
    logits_bytes: LogitsW = Field(
        default=None,
        title="Loss dtype width",
        description="Width of the s × b × V logits the loss reads (FP32 = 4).",
        examples=[4],
        json_schema_extra=_form("activation", "bytes/element", 4),
    )
    norms: Norms = Field(
        default=None,
        title="RMSNorm kernel",
        description="What an RMSNorm keeps for backward (Llama-style models): unfused, the default (transformers' "
        "LlamaRMSNorm in eager PyTorch keeps an FP32 upcast and the normalised input besides its input: what a "
        "trace of a transformers-style model allocates) or fused (a fused kernel such as Liger's or Apex's keeps "
        "its input and the FP32 1/rms: 4·s·b·h B less per norm). LayerNorm models: no effect.",
        examples=["unfused"],
        json_schema_extra=_form("activation", "kernel", "unfused"),
    )
    capacity_bytes: Bytes = Field(
        default=None,
        ge=1,
        le=TWO_46,
        title="Device capacity",
        description="Usable device memory per rank.",
        examples=[80_000_000_000],
        json_schema_extra=_form("device", "bytes", 80_000_000_000),
    )
    offload_optimizer: Offload = Field(
        default=None,
        title="Optimizer offload",
        description="Where the FP32 master copy, the optimizer states and the FP32 gradient partition the CPU "
        "optimizer steps live, at stages 1–3 (DeepSpeed offload_optimizer; FSDP2's CPUOffloadPolicy): none "
        "(the device), cpu (host memory, pinned) or nvme (ZeRO-Infinity). Off the device, they join the host "
        "ledger.",
        examples=["cpu"],
        json_schema_extra=_form("host", "device", "none"),
    )
    offload_param: Offload = Field(
        default=None,
        title="Parameter offload",
        description="Where stage 3's parameter shards live between uses (DeepSpeed offload_param): none, cpu or "
        "nvme. Each unit is still gathered on the device to compute.",
        examples=["none"],
        json_schema_extra=_form("host", "device", "none"),
    )
    ranks_per_node: Plain = Field(
        default=None,
        ge=1,
        le=1_024,
        title="Ranks per node",
        description="GPUs (ranks) sharing one host's memory: the host ledger is per node.",
        examples=[8],
        json_schema_extra=_form("host", "ranks", 8),
    )
    host_bytes: Bytes = Field(
        default=None,
        ge=1,
        le=TWO_50,
        title="Host memory",
        description="Usable host RAM per node, for the host fit verdict (a DGX H100 has 2 TB).",
        examples=[2_000_000_000_000],
        json_schema_extra=_form("host", "bytes", 2_000_000_000_000),
    )
    zero_init: Flag = Field(
        default=None,
        title="Partitioned construction",
        description="1: the model is built already partitioned (DeepSpeed zero.Init, FSDP2 on the meta device), "
        "so loading holds one unit per rank on the host; 0: every rank builds the whole model in FP32 first.",
        examples=[1],
        json_schema_extra=_form("host", "0 or 1", 1),
    )
    name: Text = Field(
        default=None,
        max_length=NAME_MAX_CHARS,
        pattern=NAME_PATTERN,
        title="Scenario name",
        description="A free-text label shown on the page and in receipts (up to 80 printable characters).",
        examples=["Llama-2-7B, 8 x H100"],
        json_schema_extra=_form("model", "text", ""),
    )

    @model_validator(mode="after")
    def _across_fields(self, info: ValidationInfo) -> Self:
        """U ≤ N and the model's own limits, each problem an error on the field it blames."""
        context = info.context if isinstance(info.context, Mapping) else {}
        problems = across_fields(self, frozenset(context.get(UNCHECKED, ()))).problems
        if problems:
            raise ValidationError.from_exception_data(
                type(self).__name__,
                [InitErrorDetails(type=p.error(), loc=(p.field,), input=getattr(self, p.field)) for p in problems],
            )
        return self


class StrictScenarioIn(ScenarioIn):
    """The same inputs, with unknown keys refused (the JSON API: a typo must not pass silently)."""

    model_config = ConfigDict(extra="forbid")


def form_metadata(info: FieldInfo) -> dict[str, Any]:
    """A field's ``json_schema_extra``: x-group, x-unit, x-kind and (where it is static) x-default."""
    extra = info.json_schema_extra
    if not isinstance(extra, dict):
        raise TypeError("a scenario field's json_schema_extra is a dict of form metadata")
    return extra


# The defaults that hold without other inputs deciding them (the seed's example); U and the
# all-gather and reduce-scatter widths have none (min(400M, N), the parameter width and the
# gradient width), and a model overrides some.
STATIC_DEFAULTS: dict[str, int | str] = {
    name: meta["x-default"]
    for name, info in ScenarioIn.model_fields.items()
    if "x-default" in (meta := form_metadata(info))
}


# --------------------------------------------------------------------------- across fields


def default_unit_params(params: int) -> int:
    """Spec default for U: min(400,000,000, N)."""
    return min(DEFAULT_UNIT_PARAMS_CAP, params)


def default_seq_len(model: str) -> int:
    """4,096 tokens, or the model's context when it has learned positions and a shorter one (GPT-2)."""
    arch = resolve(model).architecture
    base = int(STATIC_DEFAULTS["seq_len"])
    return min(base, arch.max_positions) if arch.learned_positions else base


MODEL_ALLOWED = "a known model id or a compact config (cfg:…)"


@dataclass(frozen=True, slots=True)
class ModelFill:
    """What a named model supplies for the inputs left empty."""

    params: int
    unit_params: int
    activation_bytes: int
    seq_len: int


@dataclass(frozen=True, slots=True)
class Problem:
    """A rule across fields that the inputs break: the field it blames, why, and what is allowed."""

    field: str
    kind: str  # the pydantic error type
    message: str
    allowed: str | None = None  # None: the field's own allowed range

    def error(self) -> PydanticCustomError:
        context = {"reason": self.message} | ({"allowed": self.allowed} if self.allowed else {})
        return PydanticCustomError(self.kind, "{reason}", context)


@dataclass(frozen=True, slots=True)
class Across:
    fill: ModelFill | None
    problems: tuple[Problem, ...]


def _value(inp: ScenarioIn, name: str) -> int | str:
    """The input as typed, or its static default."""
    value: int | str | None = getattr(inp, name)
    return STATIC_DEFAULTS[name] if value is None else value


def _int(inp: ScenarioIn, name: str) -> int:
    return int(_value(inp, name))


def _model_fill(inp: ScenarioIn) -> ModelFill | Problem:
    """params, U, the activation peak and s as the named model gives them, or the problem that stops it.

    A bad model, or an activation input the model cannot take (``tp`` not dividing the heads,
    ``seq_len`` beyond learned positions), is a problem on that field; so is a modelled activation
    peak beyond the ``activation_bytes`` bound (blamed on ``micro_batch``).
    """
    model = str(inp.model)
    try:
        seq_len = inp.seq_len if inp.seq_len is not None else default_seq_len(model)
        given = {name: _value(inp, name) for name in MODEL_INPUTS if name not in ("model", "seq_len")}
        md = model_defaults(ModelQuery.of({**given, "model": model, "seq_len": seq_len}))
    except ModelConfigError as exc:
        return Problem("model", "model_config", str(exc), MODEL_ALLOWED)
    except ParallelLayoutError as exc:
        return Problem(exc.field, "parallel_layout", str(exc), exc.allowed)
    except ActivationInputError as exc:
        message = str(exc).removeprefix(f"{exc.field}: ")
        return Problem(exc.field, "activation_input", message)
    activation = md.activations.total_bytes
    top = TWO_46  # the activation_bytes field's bound
    # A typed activation_bytes replaces the modelled total, but where the schedule-aware peak is walked
    # (the model's own params and U, tp = 1) its loss and backward temporaries stay modelled: they too
    # must stay in bounds, or a receipt's integers could pass 2^53.
    walked = inp.params is None and inp.unit_params is None and all(_int(inp, k) == 1 for k in ("tp", "pp", "ep"))
    if activation > top and (inp.activation_bytes is None or walked):
        typed = inp.activation_bytes is not None
        why = " (the schedule-aware peak models its temporaries even with activation_bytes typed)" if typed else ""
        fix = "a smaller micro_batch or seq_len" + ("" if typed else ", or a typed activation_bytes")
        message = f"the modelled activation peak, {activation:,} B, is beyond the {top:,} B bound{why}"
        return Problem("micro_batch", "activation_bound", message, fix)
    return ModelFill(md.params, md.unit_params, activation, seq_len)


def across_fields(inp: ScenarioIn, unchecked: frozenset[str] = frozenset()) -> Across:
    """The rules no single field can check, on fields that each passed their own.

    ``unchecked`` names inputs that were given but invalid: a rule that reads one of them is
    skipped (its verdict would be about a value nobody typed).
    """
    problems: list[Problem] = []
    fill: ModelFill | None = None
    model_failed = False
    if inp.model and not unchecked.intersection(MODEL_INPUTS):
        found = _model_fill(inp)
        if isinstance(found, Problem):
            problems.append(found)
            model_failed = True
        else:
            fill = found
    elif inp.model:
        model_failed = True  # a model input is bad: what the model would fill is unknown
    if inp.unit_params is not None and "params" not in unchecked:
        params = inp.params if inp.params is not None else fill.params if fill else None
        if params is None and not model_failed:
            params = int(STATIC_DEFAULTS["params"])
        if params is not None and inp.unit_params > params:
            problems.append(Problem("unit_params", "unit_above_params",
                                    f"{inp.unit_params:,} is larger than params ({params:,})",
                                    f"0 … params ({params:,})"))  # fmt: skip
    blamed = {p.field for p in problems}
    problems.extend(p for p in _sharding_problems(inp, unchecked) if p.field not in blamed)
    return Across(fill, tuple(problems))


def _sharding_problems(inp: ScenarioIn, unchecked: frozenset[str]) -> list[Problem]:
    """The shard group, the secondary partition and expert parallelism against D and each other."""
    if "dp" in unchecked:
        return []
    dp = _int(inp, "dp")
    problems: list[Problem] = []
    divisor = f"a divisor of dp ({dp:,})"
    group = inp.shard_group if "shard_group" not in unchecked else None
    hpz = _int(inp, "hpz") if "hpz" not in unchecked else 1
    ep = _int(inp, "ep") if "ep" not in unchecked else 1
    if group is not None and dp % group:
        problems.append(Problem("shard_group", "shard_group_divides", f"{group:,} does not divide dp ({dp:,})",
                                divisor))  # fmt: skip
    if hpz > 1 and dp % hpz:
        problems.append(Problem("hpz", "hpz_divides", f"{hpz:,} does not divide dp ({dp:,})", f"1 or {divisor}"))
    elif hpz > 1 and group is not None and group < dp:
        why = "ZeRO++'s secondary partition with a shard group smaller than D is not modelled (DeepSpeed mixes them)"
        problems.append(Problem("hpz", "hpz_with_hsdp", why, "1 with a shard group"))
    if ep > 1:
        why = ""
        if dp % ep:
            why = f"{ep:,} does not divide dp ({dp:,}): the experts' data-parallel group is D ÷ ep ranks"
        elif not inp.model and "model" not in unchecked:
            why = f"{ep:,} needs a mixture-of-experts model (which of the parameters are experts)"
        elif inp.params is not None or inp.unit_params is not None:
            why = "needs the model's own parameter counts (params and unit_params not typed): which are experts"
        elif (group is not None and group < dp) or hpz > 1:
            why = "expert parallelism with a shard group or hpZ is not modelled"
        if why:
            problems.append(Problem("ep", "expert_parallel", why, f"1, or a divisor of dp ({dp:,}) and the experts"))
    return problems
