"""Model-parallel traffic per rank per optimizer step: tensor parallelism's activation all-reduces and the
pipeline's boundary sends, beside the ZeRO / FSDP collectives of :mod:`app.ledger.state.communication`.

The ZeRO ledger counts only what the data-parallel ranks exchange about parameters and gradients. A layout
with t > 1 or pp > 1 also moves activations, every micro batch (Megatron-LM's layout):

- **Tensor parallelism** (Shoeybi et al. 2019, §3; Korthikanti et al. 2022, §4.2): each decoder layer
  all-reduces a b·s·h activation twice in forward (after attention, after the MLP) and twice in backward;
  with sequence parallelism each all-reduce is an all-gather plus a reduce-scatter of the same volume. A
  ring all-reduce sends 2 × (t − 1) ÷ t of its buffer per rank. Full recomputation runs each layer's
  forward again in backward, its two all-reduces with it (Korthikanti et al. 2022, §5); every N-th layer
  with ``ac_every``. Selective recomputation (the attention core) runs no collective again. torchtitan's per-op
  policy saves the reduce-scatters' outputs (its save list); any collective it does run again is not counted,
  which keeps the figure a lower bound.
- **Pipeline parallelism** (Narayanan et al. 2021, §2.2): per micro batch a stage sends its boundary
  activation (b·s·h) to the next stage and the gradient of its input back to the previous. The ledger budgets
  an end of the pipeline (``pp_stage``), which sends one of them: the first stage its activation forward, the
  last its input's gradient back. (A middle stage sends both, but holds neither the embedding nor the head: like
  its memory, its traffic is not budgeted, so the figure stays a lower bound on the busiest rank's.) With
  sequence parallelism each tensor-parallel rank sends its 1 ÷ t slice (Megatron's scatter/gather of the
  boundary), else the whole tensor.

- **Context parallelism** (torch 2.13.0 ring attention, ``_context_parallel/_attention.py``, the default
  ``_RotateMethod.ALL_GATHER`` torchtitan 0.3.0 keeps): each attention call all-gathers the concatenated local K and
  V (2·(s ÷ cp)·b·kv·d in the activation width) over the cp ranks, once in forward and once in backward (its
  ``kv_rotater``), each sending (cp − 1) × the local buffer per rank; the backward also passes the FP32 dK and dV
  (``convert_to_f32``) to the next rank with ``_AllToAllRotater`` on every one of its cp ring steps. Full
  recomputation runs the forward's all-gather again. The tensor-parallel and pipeline volumes above are the local
  sequence's (s ÷ cp).

Counted: the decoder layers' collectives and the boundary sends. Not counted (small beside them, and a
lower bound stays one): the vocabulary-parallel embedding's and loss's all-reduces.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.ledger.arithmetic import ceil_div
from app.ledger.models.reference import resolve
from app.ledger.scenario import Scenario

# Activation all-reduces per decoder layer per micro batch: two in forward, two in backward (and with full
# recomputation the forward's two again).
_FORWARD_ALL_REDUCES = 2
_BACKWARD_ALL_REDUCES = 2


@dataclass(frozen=True, slots=True)
class Traffic:
    """One kind of model-parallel traffic: bytes sent per rank per step and over how many ranks it runs."""

    what: str
    bytes: int
    group: int  # ranks in the collective (2 for a point-to-point send)
    # consecutive ranks its members lie among, in Megatron's order (tensor-parallel ranks adjacent, then data
    # parallel, then pipeline stages): tp for the all-reduces; the whole world for the stages' neighbours
    span: int


def _boundary(s: Scenario) -> int:
    """One micro batch's b·s·h activation at a stage boundary, in the activation width (s: the rank's s ÷ cp)."""
    return s.micro_batch * (s.seq_len // s.cp) * resolve(s.model).architecture.hidden * s.act_bytes


def tensor_parallel(s: Scenario) -> Traffic | None:
    """The decoder layers' activation all-reduces on one tensor-parallel rank (None: tp = 1 or no model)."""
    if s.tp == 1 or not s.model:
        return None
    layers = resolve(s.model).architecture.layers // s.pp  # the budgeted stage's
    recomputed = ceil_div(layers, s.ac_every) if s.act_policy == "full" else 0  # checkpointed layers redo forward
    all_reduces = layers * (_FORWARD_ALL_REDUCES + _BACKWARD_ALL_REDUCES) + recomputed * _FORWARD_ALL_REDUCES
    sent = ceil_div(all_reduces * 2 * _boundary(s) * (s.tp - 1), s.tp)
    return Traffic("tensor-parallel all-reduces of activations", s.grad_accum * sent, s.tp, s.tp)


def pipeline(s: Scenario) -> Traffic | None:
    """The budgeted end's boundary sends, one b·s·h a micro batch (None: pp = 1 or no model)."""
    if s.pp == 1 or not s.model:
        return None
    each = ceil_div(_boundary(s), s.tp) if s.sequence_parallel else _boundary(s)
    what = "pipeline sends of boundary " + ("activations" if s.pp_stage == "first" else "gradients")
    return Traffic(what, s.grad_accum * each, 2, s.world)


def context_parallel(s: Scenario) -> Traffic | None:
    """Ring attention's K/V all-gathers (forward, backward, and forward again where recomputed) and the backward's FP32
    dK/dV passes, on one context-parallel rank (None: cp = 1 or no model)."""
    if s.cp == 1 or not s.model:
        return None
    arch = resolve(s.model).architecture
    layers = arch.layers // s.pp
    # K and V of the rank's s ÷ cp tokens, its key/value heads on this tensor-parallel rank
    kv = 2 * s.micro_batch * (s.seq_len // s.cp) * ceil_div(arch.kv_heads, s.tp) * arch.head_dim
    recomputed = ceil_div(layers, s.ac_every) if s.act_policy == "full" else 0
    gathers = (2 * layers + recomputed) * (s.cp - 1) * kv * s.act_bytes  # all-gather: (cp − 1) × its input sent
    gradients = layers * s.cp * kv * 4  # _AllToAllRotater: the FP32 dK and dV every ring step (convert_to_f32)
    return Traffic("context-parallel ring K/V all-gathers and dK/dV passes", s.grad_accum * (gathers + gradients),
                   s.cp, s.tp * s.cp)  # fmt: skip


def model_parallel_traffic(s: Scenario) -> tuple[Traffic, ...]:
    """Every model-parallel traffic of ``s`` (empty with tp = pp = cp = 1)."""
    return tuple(t for t in (tensor_parallel(s), pipeline(s), context_parallel(s)) if t is not None)
