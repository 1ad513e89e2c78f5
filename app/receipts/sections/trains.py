"""The trains section: how many of the parameters train and how many are frozen, and where that comes from (LoRA's
adapters, frozen modules, a typed count, or everything training), issue 33 item 2."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from app.ledger.scenario import Scenario
from app.receipts.strict import Strict

TrainsSource = Literal["all", "lora", "frozen modules", "declared"]


class LoraModuleOut(Strict):
    """One adapted tensor of a decoder layer (a linear module, or a MoE's router or 3-D experts): its matrix's two
    dimensions; rows × (a + b) adapters each."""

    name: str = Field(examples=["self_attn.q_proj", "mlp.experts.gate_up_proj"])
    a: int = Field(description="out: lora_B's rows (GPT-2's Conv1D, whose weight is [in, out], read so)")
    b: int = Field(description="in: lora_A's columns")
    rows: int = Field(description="lora_A's rows: the rank, or rank × experts (twice the rank for the fused gate_up)")
    folded: int = Field(description="elements of the weight PEFT's ParamWrapper folds the adapter into each forward, "
                        "which the layer's GEMMs keep for backward (0: a lora.Linear; deepseek_v3's router keeps an "
                        "FP32 copy of it instead)")  # fmt: skip


class LoraOut(Strict):
    """PEFT LoraConfig's adapters on the model."""

    rank: int
    modules: list[LoraModuleOut] = Field(description="per decoder layer")
    per_layer: int = Field(description="adapter parameters per decoder layer")
    dense_layers: int = Field(default=0, description="deepseek_v3's dense first layers, whose MLP PEFT never adapts")
    dense_per_layer: int = Field(default=0, description="adapter parameters in each of those (their attention's)")
    params: int = Field(description="adapter parameters in all: what trains")
    formula: str


class QuantOut(Strict):
    """QLoRA's 4-bit base (bitsandbytes NF4, stored in BF16 elements that FSDP2 shards)."""

    kind: str = Field(description="nf4, or nf4-dq (double quantisation)", examples=["nf4"])
    values: int = Field(description="values of the quantized weights (the decoder layers' linear modules)")
    stored_elements: int = Field(description="their packed codes in BF16 elements, ⌈n ÷ 4⌉ per weight: sharded")
    quant_state_bytes: int = Field(description="absmaxes and code tables, on every rank whole")
    formula: str


class TrainsSection(Strict):
    """Every parameter, those that train (gradients, master copy and optimizer states) and those frozen."""

    params: int
    trainable: int
    frozen: int
    source: TrainsSource = Field(description="all: everything trains; lora, frozen modules: from the model; "
                                 "declared: trainable_params typed")  # fmt: skip
    lora: LoraOut | None
    quant: QuantOut | None = None
    frozen_what: str | None = Field(default=None, description="the model's own modules frozen, in words "
                                    "(frozen_layers, freeze_embed, frozen_modules)",
                                    examples=["every layer's self_attn"])  # fmt: skip
    frozen_formula: str | None = Field(default=None, description="the sum that counts them",
                                       examples=["32 × 41,943,040 (their self_attn) = 1,342,177,280"])  # fmt: skip


def trains_out(s: Scenario) -> TrainsSection:
    md = s.model_defaults()
    adapters = md.lora if md is not None else None
    source: TrainsSource = "all"
    if s.frozen_params:
        from_model = s.source_of("trainable_params") == "from config"
        source = "declared" if not from_model else "lora" if adapters is not None else "frozen modules"
    lora = None
    if adapters is not None:
        modules = [LoraModuleOut(name=m.name, a=m.a, b=m.b, rows=m.rows, folded=m.folded) for m in adapters.modules]
        lora = LoraOut(rank=adapters.rank, modules=modules, per_layer=adapters.per_layer,
                       dense_layers=adapters.dense_layers, dense_per_layer=adapters.dense_per_layer,
                       params=adapters.params, formula=adapters.formula)  # fmt: skip
    quant = md.quant if md is not None else None
    base = None
    if quant is not None:
        base = QuantOut(kind=quant.kind, values=quant.values, stored_elements=quant.storage,
                        quant_state_bytes=quant.state_bytes, formula=quant.formula)  # fmt: skip
    freezes = md.freezes if md is not None and source == "frozen modules" else None
    return TrainsSection(params=s.params, trainable=s.trainable_params, frozen=s.frozen_params, source=source,
                         lora=lora, quant=base, frozen_what=freezes.what if freezes is not None else None,
                         frozen_formula=freezes.formula if freezes is not None else None)  # fmt: skip
