"""Every scenario input: its bounds, default, unit and meaning (spec: "Scenario inputs").

This table is the single source the parser, the CLI flags, the page's form and the OpenAPI
schema are built from, so a bound cannot drift between them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Kind = Literal["count", "bytes", "int", "text", "choice"]

TEN_13 = 10**13
TWO_40 = 2**40
TWO_46 = 2**46
NAME_MAX_CHARS = 80
# "Printable" for a scenario name, stated as one character class so that the parser and the
# OpenAPI schema enforce the same rule: no C0/C1 controls or DEL, no soft hyphen, no zero-width
# or bidirectional controls, no line/paragraph separators, no BOM, no surrogates, no private use,
# no noncharacters.
NAME_FORBIDDEN = (
    "\\u0000-\\u001f\\u007f-\\u009f\\u00ad\\u061c\\u180e\\u200b-\\u200f\\u2028-\\u202e\\u2060-\\u206f"
    "\\ud800-\\udfff\\ue000-\\uf8ff\\ufdd0-\\ufdef\\ufeff\\ufff0-\\uffff"
)
NAME_PATTERN = f"^[^{NAME_FORBIDDEN}]*$"


@dataclass(frozen=True, slots=True)
class Field:
    """One bounded scenario input.

    ``kind`` says how a string is read: ``count`` accepts decimal suffixes (``7B``, ``400M``),
    ``bytes`` accepts decimal and binary byte units (``80GB``, ``80GiB``), ``int`` a plain
    integer, ``text`` printable text, ``choice`` one of ``options``.
    """

    name: str
    label: str
    unit: str
    kind: Kind
    minimum: int
    maximum: int
    group: str
    help: str
    choices: tuple[int, ...] | None = None
    options: tuple[str, ...] | None = None  # for kind "choice"

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")


GROUPS: tuple[tuple[str, str], ...] = (
    ("model", "Model"),
    ("precision", "Precision and optimizer"),
    ("parallelism", "Parallelism"),
    ("schedule", "Schedule and buffers"),
    ("activation", "Activation model (with a model)"),
    ("measured", "Measured inputs"),
    ("device", "Device"),
)
ACT_POLICIES: tuple[str, ...] = ("none", "selective", "full")
MODEL_MAX_CHARS = 600

# fmt: off
FIELDS: tuple[Field, ...] = (
    Field("model", "Model", "known id or cfg:…", "text", 0, MODEL_MAX_CHARS, "model",
          "A known model (llama-2-7b, mistral-7b-v0.1, …) or a pasted config.json in compact form (cfg:…). "
          "It fills params, the largest unit and, with the activation inputs, the activation peak."),
    Field("params", "Parameters (N)", "parameters", "count", 1, TEN_13, "model",
          "Parameters held by this data-parallel group (one model-parallel shard with TP/PP). Default: "
          "the model's exact count, else 7B."),
    Field("unit_params", "Largest wrapped unit (U)", "parameters", "count", 0, TEN_13, "model",
          "Parameters in the biggest module all-gathered at once; at most N. Default: the model's largest "
          "wrapped unit, else min(400M, N)."),
    Field("param_bytes", "Parameter width", "bytes/element", "int", 1, 4, "precision",
          "Width of the compute / low-precision parameter copy (BF16 = 2).", choices=(1, 2, 4)),
    Field("grad_bytes", "Gradient width", "bytes/element", "int", 2, 4, "precision",
          "Width of stored gradients.", choices=(2, 4)),
    Field("master_bytes", "Master-copy width", "bytes/element", "int", 0, 8, "precision",
          "Width of the high-precision master copy; 0 = no separate master (FSDP2).", choices=(0, 4, 8)),
    Field("opt_states", "Optimizer states", "tensors/parameter", "int", 0, 4, "precision",
          "Optimizer state tensors per parameter: Adam 2, SGD+momentum 1, plain SGD 0."),
    Field("opt_bytes", "Optimizer-state width", "bytes/element", "int", 1, 8, "precision",
          "Width of each optimizer state element.", choices=(1, 2, 4, 8)),
    Field("gather_bytes", "All-gather width", "bytes/element", "int", 1, 4, "precision",
          "Width in which parameters are all-gathered for compute (FSDP2 param_dtype). Default: the "
          "parameter width.", choices=(1, 2, 4)),
    Field("dp", "Sharding degree (D)", "ranks", "int", 1, 131_072, "parallelism",
          "Ranks across which ZeRO / FSDP shards state; not the GPU count under TP/PP."),
    Field("prefetch", "Prefetched units (P)", "units", "int", 0, 8, "schedule",
          "Extra units all-gathered ahead while one executes (declared cap: 8)."),
    Field("bucket_bytes", "Communication buckets", "bytes", "bytes", 0, TWO_40, "schedule",
          "Reduce-scatter / all-reduce / all-gather buckets resident during the step."),
    Field("activation_bytes", "Activation peak", "bytes", "bytes", 0, TWO_46, "measured",
          "Activation peak per rank; a typed value is a measurement. Default: modelled from the model, "
          "else the seed's 20 GB placeholder. Never divided by D."),
    Field("overhead_bytes", "Runtime overhead", "bytes", "bytes", 0, TWO_46, "measured",
          "Measured context, workspaces and allocator slack."),
    Field("contingency_pct", "Contingency", "%", "int", 0, 100, "measured",
          "Explicit contingency on top of everything else."),
    Field("seq_len", "Sequence length (s)", "tokens", "count", 1, 1_048_576, "activation",
          "Tokens per sequence, for the activation model."),
    Field("micro_batch", "Micro-batch (b)", "sequences", "int", 1, 4_096, "activation",
          "Sequences per micro batch on one rank, for the activation model."),
    Field("act_bytes", "Activation width", "bytes/element", "int", 1, 4, "activation",
          "Width of saved activations (BF16 = 2).", choices=(1, 2, 4)),
    Field("act_policy", "Recomputation", "policy", "choice", 0, 0, "activation",
          "Activation checkpointing: none, selective (the attention core) or full (each layer).", options=ACT_POLICIES),
    Field("tp", "Tensor parallel (t)", "ranks", "int", 1, 1_024, "activation",
          "Tensor-parallel degree; must divide the attention heads."),
    Field("sequence_parallel", "Sequence parallel", "0 or 1", "int", 0, 1, "activation",
          "1 shards the residual stream across the tensor-parallel ranks (Megatron SP).", choices=(0, 1)),
    Field("logits_bytes", "Loss dtype width", "bytes/element", "int", 2, 4, "activation",
          "Width of the s × b × V logits the loss reads (FP32 = 4).", choices=(2, 4)),
    Field("capacity_bytes", "Device capacity", "bytes", "bytes", 1, TWO_46, "device",
          "Usable device memory per rank."),
    Field("name", "Scenario name", "text", "text", 0, NAME_MAX_CHARS, "model",
          "A free-text label shown on the page and in receipts (up to 80 printable characters)."),
)
# fmt: on

FIELD_BY_NAME: dict[str, Field] = {f.name: f for f in FIELDS}

# Defaults that do not depend on other inputs: the seed's example.
STATIC_DEFAULTS: dict[str, int | str] = {
    "model": "",
    "seq_len": 4096,
    "micro_batch": 1,
    "act_bytes": 2,
    "act_policy": "none",
    "tp": 1,
    "sequence_parallel": 0,
    "logits_bytes": 4,
    "params": 7_000_000_000,
    "dp": 8,
    "param_bytes": 2,
    "grad_bytes": 2,
    "master_bytes": 4,
    "opt_states": 2,
    "opt_bytes": 4,
    "prefetch": 0,
    "bucket_bytes": 0,
    "activation_bytes": 20_000_000_000,
    "overhead_bytes": 0,
    "contingency_pct": 0,
    "capacity_bytes": 80_000_000_000,
    "name": "",
}
DEFAULT_UNIT_PARAMS_CAP = 400_000_000


def default_unit_params(params: int) -> int:
    """Spec default for U: min(400,000,000, N)."""
    return min(DEFAULT_UNIT_PARAMS_CAP, params)


def allowed_text(field: Field) -> str:
    """The allowed range in words, as every error message states it."""
    if field.kind == "text":
        return f"up to {field.maximum} printable characters"
    if field.options is not None:
        return "one of " + ", ".join(field.options)
    if field.choices is not None:
        return "one of " + ", ".join(str(c) for c in field.choices)
    if field.name == "unit_params":
        return "0 … params"
    human = _HUMAN_MAXIMUM.get(field.maximum) if field.kind in ("count", "bytes") else None
    return f"{field.minimum:,} … {field.maximum:,}" + (f" ({human})" if human else "")


# The large bounds, as a person reads them (B = bytes for byte fields, 10T = 10^13 parameters).
_HUMAN_MAXIMUM: dict[int, str] = {TEN_13: "10T", TWO_40: "1 TiB", TWO_46: "64 TiB"}
