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
from app.ledger.models.parallel import RankShare, rank_share
from app.ledger.models.reference import ModelRef, resolve


@dataclass(frozen=True, slots=True)
class ModelDefaults:
    model: ModelRef
    params: int  # per rank: the whole model, or with tp, pp, ep one rank's share (``share``)
    unit_params: int
    unit_name: str
    activations: ActivationLedger
    share: RankShare

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
    cp: int = 1

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
    """Raises ``ModelConfigError`` (the model), ``ActivationInputError`` or ``ParallelLayoutError``
    (naming its field)."""
    ref = resolve(q.model)
    share = rank_share(ref.architecture, q.tp, q.pp, q.pp_stage, q.ep)
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
    )
    # pp = tp = ep = 1: the share is the inventory itself (its count and its largest unit, by the same name)
    return ModelDefaults(ref, share.params, share.largest.params, share.largest.name, ledger, share)
