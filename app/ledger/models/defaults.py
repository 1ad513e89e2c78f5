"""What a scenario's model supplies: defaults for params, the largest unit and the activation peak.

A scenario that names a model (``model=llama-2-7b``) takes its parameter count and largest
wrapped unit from the model's inventory, and its activation peak from the activation ledger for
its sequence length, micro batch, widths, policy and parallelism, unless the user typed a value:
a typed ``params`` or ``unit_params`` overrides the config, a typed ``activation_bytes`` is a
measurement.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, NamedTuple, get_type_hints

from app.ledger.models.activations import ActivationLedger, activation_ledger
from app.ledger.models.activations.frozen import LAYER_NORMS, WALKED_FAMILIES, Trains, trains_walked
from app.ledger.models.inventory import Tensor
from app.ledger.models.parallel import RankShare, rank_share
from app.ledger.models.quant import QUANT_KINDS, Quant, quantized
from app.ledger.models.reference import ModelRef, resolve
from app.ledger.models.trains import Frozen, Lora, LoraError, frozen_modules, frozen_params, lora, trained_layer


@dataclass(frozen=True, slots=True)
class ModelDefaults:
    model: ModelRef
    params: int  # per rank: the whole model, or with tp, pp, ep one rank's share (``share``)
    unit_params: int
    unit_name: str
    activations: ActivationLedger
    share: RankShare
    lora: Lora | None = None  # LoRA adapters (counted in params and, where they grow it, in the largest unit)
    frozen: int = 0  # without LoRA, the parameters of the modules frozen (frozen_layers, freeze_embed, frozen_modules)
    quant: Quant | None = None  # QLoRA: the frozen layers' linear weights in 4 bits
    freezes: Frozen | None = None  # without LoRA, what is frozen and its count's sum

    @property
    def frozen_modules(self) -> frozenset[str]:
        """The layers' modules frozen by name (empty: none)."""
        return self.freezes.modules if self.freezes is not None else frozenset()

    @property
    def trainable(self) -> int:
        """What trains: the adapters with LoRA (get_peft_model freezes the rest), else every parameter not frozen."""
        return self.params - self.frozen if self.lora is None else self.lora.params

    @property
    def expert_params(self) -> int:
        """Expert parameters per rank (ZeRO shards them over D ÷ ep)."""
        return self.share.experts


class ModelQuery(NamedTuple):
    """The inputs a model's defaults depend on, and nothing else: hashable, so the defaults are cached per
    query (a scenario, the validation across fields, the schedule and the fit finder each build one). A
    named tuple: a scenario builds one for every default it reads, dozens an answer, and a tuple is built
    and hashed in C."""

    model: str
    seq_len: int
    micro_batch: int
    act_bytes: int
    act_policy: str
    tp: int = 1
    sequence_parallel: int = 0
    logits_bytes: int = 4
    norms: str = "fused"
    pp: int = 1
    pp_stage: str = "first"
    ep: int = 1
    ac_every: int = 1
    gqa: str = "native"
    routing_imbalance_pct: int = 100
    lora_rank: int = 0
    lora_targets: str = ""
    frozen_layers: int = 0
    freeze_embed: int = 0
    frozen_modules: str = ""
    cp: int = 1
    base_quant: str = "none"

    @classmethod
    def of(cls, values: Mapping[str, int | str]) -> ModelQuery:
        """The query of ``values`` (a value for each name of :data:`MODEL_INPUTS`, others ignored)."""
        read: dict[str, Any] = {name: _QUERY_TYPES[name](values[name]) for name in cls._fields}
        return cls(**read)


MODEL_INPUTS: tuple[str, ...] = ModelQuery._fields
_QUERY_TYPES: dict[str, type] = get_type_hints(ModelQuery)  # int or str


# Cached because a scenario asks for its model's defaults many times over (each default_for and
# source_of call: the canonical link, the receipt's sources, the form), and each time they would
# build the whole activation ledger again; the model's inventory is cached per architecture. 256 entries: an
# entry is ~20 objects the garbage collector tracks, and 3,000 workshop live updates miss 4 % more than with
# 512 while a full collection traverses 4,800 fewer objects (tests/bench/inprocess.py --gc).
@lru_cache(maxsize=256)
def model_defaults(q: ModelQuery) -> ModelDefaults:
    """Raises ``ModelConfigError`` (the model), ``ActivationInputError``, ``ParallelLayoutError`` or ``LoraError``
    (naming its field)."""
    ref = resolve(q.model)
    share = rank_share(ref.architecture, q.tp, q.pp, q.pp_stage, q.ep)
    adapters = lora(ref.architecture, ref.inventory, q.lora_rank, q.lora_targets)
    if adapters is not None and (q.tp, q.pp, q.ep) != (1, 1, 1):
        raise LoraError("lora_rank", "LoRA with tensor, pipeline or expert parallelism is not modelled",
                        "0 with tp, pp or ep above 1")  # fmt: skip
    modules = frozen_modules(ref.architecture, ref.inventory, q.frozen_modules) if q.frozen_modules else frozenset()
    freezes = None
    if q.frozen_layers or q.freeze_embed or modules:
        field = "frozen_layers" if q.frozen_layers else "freeze_embed" if q.freeze_embed else "frozen_modules"
        none = "empty" if field == "frozen_modules" else "0"
        if adapters is not None:  # get_peft_model freezes every base parameter already
            raise LoraError(field, "LoRA freezes the whole base model already", f"{none} with lora_rank")
        if (q.tp, q.pp, q.ep) != (1, 1, 1):
            raise LoraError(field, "frozen modules with tensor, pipeline or expert parallelism are not modelled",
                            f"{none} with tp, pp or ep above 1")  # fmt: skip
        if modules and q.frozen_layers and ref.architecture.two_kinds:
            raise LoraError("frozen_modules", "modules frozen by name beside frozen_layers in deepseek_v3's two kinds "
                            "of layer are not modelled", "empty with frozen_layers")  # fmt: skip
        freezes = frozen_params(ref.architecture, ref.inventory, q.frozen_layers, bool(q.freeze_embed), modules)
    quant = _quant(ref, q, adapters is not None)
    trains = None
    if adapters is not None:
        trains = _adapted(adapters)
    elif q.frozen_layers or q.freeze_embed or modules:
        trains = Trains(
            frozen_layers=q.frozen_layers, freeze_embed=bool(q.freeze_embed), **_trained_modules(ref, modules)
        )
    ledger = activation_ledger(
        ref.architecture,
        seq_len=q.seq_len,
        micro_batch=q.micro_batch,
        act_bytes=q.act_bytes,
        policy=q.act_policy,
        tp=q.tp,
        sequence_parallel=bool(q.sequence_parallel),
        logits_bytes=q.logits_bytes,
        norms=q.norms,
        pp=q.pp,
        pp_stage=q.pp_stage,
        ep=q.ep,
        every=q.ac_every,
        gqa=q.gqa,
        imbalance_pct=q.routing_imbalance_pct,
        cp=q.cp,
        trains=trains,
    )
    # pp = tp = ep = 1: the share is the inventory itself (its count and its largest unit, by the same name)
    if adapters is None:
        frozen = freezes.params if freezes is not None else 0
        return ModelDefaults(ref, share.params, share.largest.params, share.largest.name, ledger, share, None, frozen,
                             freezes=freezes)  # fmt: skip
    # the adapters live in the decoder layers' units (deepseek_v3's MoE layers hold the most of them, and are larger)
    layer = ref.inventory.layer_kinds[-1][2]
    grown = layer.params + adapters.per_layer
    largest, name = (grown, layer.name) if grown > share.largest.params else (share.largest.params, share.largest.name)
    return ModelDefaults(ref, share.params + adapters.params, largest, name, ledger, share, adapters, 0, quant)


def _adapted(adapters: Lora) -> Trains:
    """:class:`Trains` of a LoRA run: the leaf names of the layer's adapted tensors, its ``lora.Linear`` count, the
    folded weights its GEMMs keep; deepseek_v3's dense first layers' as its ``dense`` (their attention's adapters)."""
    names = frozenset(m.leaf for m in adapters.modules)
    down = sum(m.folded for m in adapters.modules if m.leaf == "experts.down_proj")
    dense = None
    if adapters.dense_layers:
        dense = Trains(adapters.rank, frozenset(m.leaf for m in adapters.dense), len(adapters.dense))
    return Trains(adapters.rank, names, len(adapters.linear), folded=adapters.folded,
                  folded_shape=adapters.folded_shape, folded_down=down, dense=dense)  # fmt: skip


def _trained_modules(ref: ModelRef, modules: frozenset[str]) -> dict[str, Any]:
    """With modules frozen by name, :class:`Trains`' leaf names of the layer modules still training and how many
    norms of width h a layer has (deepseek_v3: of its MoE layers, and its dense first layers' as ``dense``)."""
    if not modules:
        return {}
    kinds = ref.inventory.layer_kinds
    found = [_still_training(unit.tensors, modules) for _, _, unit in kinds]
    dense = Trains(**found[0]) if len(kinds) == 2 else None
    return {**found[-1], "dense": dense}


def _still_training(tensors: tuple[Tensor, ...], modules: frozenset[str]) -> dict[str, Any]:
    trained = frozenset(t.name.split(".")[-2] for t in trained_layer(tensors, modules) if "." in t.name)
    norms = {t.name.split(".")[-2] for t in tensors if "." in t.name} & LAYER_NORMS
    return {"trained_modules": trained, "layer_norms": len(norms)}


def _quant(ref: ModelRef, q: ModelQuery, adapters: bool) -> Quant | None:
    """QLoRA's 4-bit base, or None. Raises :class:`LoraError` naming ``base_quant``."""
    if q.base_quant == "none":
        return None
    if q.base_quant not in QUANT_KINDS:
        raise LoraError("base_quant", f"{q.base_quant!r} is not a 4-bit base", ", ".join(QUANT_KINDS))
    if not adapters:
        raise LoraError("base_quant", "QLoRA quantizes the frozen base of a LoRA run", "none without lora_rank")
    arch = ref.architecture
    if not trains_walked(arch):
        raise LoraError("base_quant", f"a 4-bit base is modelled for {', '.join(WALKED_FAMILIES)}, not {arch.family}",
                        "none for this model")  # fmt: skip
    if arch.experts:  # bitsandbytes quantizes nn.Linear modules: not the router nor the fused 3-D experts
        raise LoraError("base_quant", f"a 4-bit base of {arch.family}'s mixture of experts is not modelled",
                        "none for this model")  # fmt: skip
    return quantized(ref.inventory, arch.layers, q.base_quant)
