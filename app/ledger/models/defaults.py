"""What a scenario's model supplies: defaults for params, the largest unit and the activation peak.

A scenario that names a model (``model=llama-2-7b``) takes its parameter count and largest
wrapped unit from the model's inventory, and its activation peak from the activation ledger for
its sequence length, micro batch, widths, policy and parallelism, unless the user typed a value:
a typed ``params`` or ``unit_params`` overrides the config, a typed ``activation_bytes`` is a
measurement.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

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


# Cached because a scenario asks for its model's defaults many times over (each default_for and
# source_of call: the canonical link, the receipt's sources, the form), and each time they would
# build the whole activation ledger again; the model's inventory is cached per architecture.
@lru_cache(maxsize=512)
def model_defaults(
    model: str,
    seq_len: int,
    micro_batch: int,
    act_bytes: int,
    act_policy: str,
    tp: int,
    sequence_parallel: int,
    logits_bytes: int,
    norms: str = "fused",
    pp: int = 1,
    pp_stage: str = "first",
    ep: int = 1,
) -> ModelDefaults:
    """Raises ``ModelConfigError`` (the model), ``ActivationInputError`` or ``ParallelLayoutError``
    (naming its field)."""
    ref = resolve(model)
    share = rank_share(ref.architecture, tp, pp, pp_stage, ep)
    ledger = activation_ledger(
        ref.architecture,
        seq_len=seq_len,
        micro_batch=micro_batch,
        act_bytes=act_bytes,
        policy=act_policy,
        tp=tp,
        sequence_parallel=bool(sequence_parallel),
        logits_bytes=logits_bytes,
        norms=norms,
        pp=pp,
        pp_stage=pp_stage,
        ep=ep,
    )
    # pp = tp = ep = 1: the share is the inventory itself (its count and its largest unit, by the same name)
    return ModelDefaults(ref, share.params, share.largest.params, share.largest.name, ledger, share)


def modelled_activation_total(
    model: str,
    seq_len: int,
    micro_batch: int,
    act_bytes: int,
    act_policy: str,
    tp: int,
    sequence_parallel: int,
    logits_bytes: int,
    norms: str = "fused",
    pp: int = 1,
    pp_stage: str = "first",
    ep: int = 1,
) -> int:
    """The modelled activation peak for these inputs (the fit finder probes micro batches with it)."""
    md = model_defaults(model, seq_len, micro_batch, act_bytes, act_policy, tp, sequence_parallel, logits_bytes,
                        norms, pp, pp_stage, ep)  # fmt: skip
    return md.activations.total_bytes
