"""The declarations of what trains: the trainable parameter count and the frozen ones' width, and LoRA's rank and
target modules (PEFT's), with their bounds, defaults and help texts. :class:`ScenarioFields`
(:mod:`app.ledger.scenario.declared`) declares each field with one of these, in its own order."""

from __future__ import annotations

from typing import Any

from app.ledger.bounds import FROZEN_LAYERS, LORA_RANK, LORA_TARGETS_MAX_CHARS, LORA_TARGETS_PATTERN, TEN_13
from app.ledger.scenario.form import form, optional

TRAINABLE_FIELD: Any = optional(
    ge=1,
    le=TEN_13,
    title="Trainable parameters",
    description="Of params, those that train: PEFT's print_trainable_parameters() 'trainable params' (params: its "
    "'all params'). Only they have gradients, master copy and optimizer states; the frozen rest is still sharded "
    "and gathered. Default: params, or what LoRA or frozen modules leave.",
    examples=[13_631_488],
    json_schema_extra=form("model", "parameters", None),
)
FROZEN_BYTES_FIELD: Any = optional(
    title="Frozen parameter width",
    description="Width of the frozen parameters' shards: Accelerate upcasts only what trains, the frozen base stays "
    "in the checkpoint's 16 bits (hf-fsdp2: 2); else the parameter width. Default: the stack's.",
    examples=[2],
    json_schema_extra=form("precision", "bytes/element", None),
)
LORA_RANK_FIELD: Any = optional(
    ge=LORA_RANK[0],
    le=LORA_RANK[1],
    title="LoRA rank",
    description="PEFT LoraConfig's r: each targeted module of weight [a, b] gains r × (a + b) adapter parameters in "
    "its layer's unit, and they alone train (a mixture of experts' stack of E: r·E × (a + b), 2·r·E for the fused gate "
    "and up). At most the narrowest target's width (a MoE router's E outputs aside); tp = pp = ep = 1. 0: no LoRA.",
    examples=[16],
    json_schema_extra=form("model", "rank", 0),
)
LORA_TARGETS_FIELD: Any = optional(
    max_length=LORA_TARGETS_MAX_CHARS,
    pattern=LORA_TARGETS_PATTERN,
    title="LoRA target modules",
    description="PEFT LoraConfig's target_modules: all-linear (every linear module but the head) or module names "
    "with commas (q_proj,v_proj; a mixture of experts' router gate, and its experts as gate_proj,up_proj,down_proj "
    "or w1,w3,w2). Empty: PEFT 0.21.0's default for the model type.",
    examples=["all-linear"],
    json_schema_extra=form("model", "modules", ""),
)
BASE_QUANT_FIELD: Any = optional(
    title="4-bit base (QLoRA)",
    description="bitsandbytes' NF4 for the frozen layers' linear weights, stored in BF16 so FSDP2 shards them: nf4, "
    "or nf4-dq (double quantisation). Needs LoRA.",
    examples=["none", "nf4"],  # none first: the examples together carry hpz 8, which a 4-bit base is refused with
    json_schema_extra=form("model", "quantisation", "none"),
)
FROZEN_LAYERS_FIELD: Any = optional(
    ge=FROZEN_LAYERS[0],
    le=FROZEN_LAYERS[1],
    title="Frozen layers",
    description="The first N decoder layers frozen (requires_grad_(False), no LoRA): sharded and gathered, no "
    "gradient or optimizer state. At most the model's layers; tp = pp = ep = 1.",
    examples=[0],  # beside lora_rank's example: LoRA freezes the whole base model already
    json_schema_extra=form("model", "layers", 0),
)
FREEZE_EMBED_FIELD: Any = optional(
    title="Freeze the embedding",
    description="1: the token embedding frozen (a tied head with it). Needs a model, no LoRA.",
    examples=[0],  # beside lora_rank's example, as frozen_layers'
    json_schema_extra=form("model", "0 or 1", 0),
)
FROZEN_MODULES_FIELD: Any = optional(
    max_length=LORA_TARGETS_MAX_CHARS,
    pattern=LORA_TARGETS_PATTERN,
    title="Frozen modules (every layer)",
    description="Module names of every decoder layer frozen (requires_grad_(False)), with commas: the family's own, "
    "self_attn (the attention), mlp, q_proj, input_layernorm … Sharded and gathered, no gradient or optimizer "
    "state; the rest of each layer trains. No LoRA; tp = pp = ep = 1.",
    examples=[""],  # beside lora_rank's example, as frozen_layers'
    json_schema_extra=form("model", "modules", ""),
)
