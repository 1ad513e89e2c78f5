"""The activation ledger (never divided by D) and its recompute cost; the names every caller imports.

- :mod:`~app.ledger.models.activations.saved`: what one decoder layer and the model's ends keep for
  backward, tensor by tensor, per family; the per-rank sum over tp (and sequence parallelism).
- :mod:`~app.ledger.models.activations.recompute`: forward FLOPs and the recompute fraction of a policy.
- :mod:`~app.ledger.models.activations.figures`: :class:`ActivationLedger`, the per-rank figures.
- :mod:`~app.ledger.models.activations.explain`: the formula with its numbers and the assumptions text.
- :mod:`~app.ledger.models.activations.ledger`: :func:`activation_ledger`, the inputs checked and the
  figures of one pipeline stage.
"""

from __future__ import annotations

from app.ledger.models.activations.entries import FP32, INDEX, MASK, Saved, has_dropout
from app.ledger.models.activations.explain import POLICY_DESCRIPTIONS
from app.ledger.models.activations.figures import ActivationInputError, ActivationLedger
from app.ledger.models.activations.ledger import (
    MICRO_BATCH_BOUNDS,
    POLICIES,
    SEQ_LEN_BOUNDS,
    TP_BOUNDS,
    activation_ledger,
)
from app.ledger.models.activations.recompute import forward_flops, recompute_fraction
from app.ledger.models.activations.saved import layer_saved

__all__ = [
    "FP32",
    "INDEX",
    "MASK",
    "MICRO_BATCH_BOUNDS",
    "POLICIES",
    "POLICY_DESCRIPTIONS",
    "SEQ_LEN_BOUNDS",
    "TP_BOUNDS",
    "ActivationInputError",
    "ActivationLedger",
    "Saved",
    "activation_ledger",
    "forward_flops",
    "has_dropout",
    "layer_saved",
    "recompute_fraction",
]
