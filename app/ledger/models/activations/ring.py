"""Context parallelism's share of the activations: the local sequence, and ring attention's K/V buffers.

torchtitan 0.3.0 shards each batch's sequence over the cp ranks before the model runs
(``torchtitan/distributed/context_parallel/api.py`` ``prepare_context_parallel_input``: inputs *and labels*
through ``_context_parallel_shard``), with the head-tail load balancer by default
(``context_parallel_load_balancer = "headtail"``, ``config/configs.py``). Every per-token activation, the logits
and the loss of a rank are therefore those of s ÷ cp tokens: the activation ledger is the one of the local
sequence, taken at one point (:func:`local_seq_len`).

torch 2.13.0's ``_HeadTailLoadBalancer._generate_indices`` (``torch/distributed/tensor/experimental/
_context_parallel/_load_balancer.py``) raises unless ``seq_length % (world_size * 2) == 0``: it cuts the sequence
into 2·cp chunks and gives rank r chunks r and 2·cp − 1 − r. So 2·cp must divide s.

Attention is torch's ring attention (``_context_parallel/_attention.py`` ``_templated_ring_attention``), the
SDPA path torchtitan enables with ``_enable_context_parallel_dispatcher``. Its K/V rotation defaults to
``_RotateMethod.ALL_GATHER`` (``_ContextParallelOptions.rotate_method``; torchtitan 0.3.0 never calls
``set_rotate_method``): ``_AllGatherRotater.exchange_buffers`` all-gathers ``torch.cat([key.flatten(),
value.flatten()])`` once per attention call, so the layer in flight holds the whole sequence's K and V
(cp × its own) plus the concatenated local send buffer; the backward (``_scaled_dot_product_ring_flash_attention
_backward``) builds the same rotater again. That is :func:`ring_kv_bytes`: (cp + 1) × 2·(s ÷ cp)·b·kv·d ×
the activation width, kv the key/value heads on this tensor-parallel rank. Not counted (so the term stays a lower
bound): the backward's FP32 gradient accumulators of q, k and v (``convert_to_f32``) and its all-to-all of dK/dV.

Ring attention with the load balancer requires ``is_causal=True`` (``_templated_ring_attention`` raises "Load
balancing requires `is_causal=True`" otherwise): a model whose attention needs a mask (a sliding window, GPT-2's
eager attention, transformers' expanded-GQA path with its mask) or deepseek's latent attention is refused with cp.
"""

from __future__ import annotations

from app.ledger.arithmetic import ceil_div
from app.ledger.models.activations.figures import ActivationInputError
from app.ledger.models.architecture import GPT_FAMILIES, Architecture

RING_EVIDENCE = (
    "torch 2.13.0 _context_parallel/_attention.py: _AllGatherRotater (the default rotate_method, ALL_GATHER) "
    "all-gathers the concatenated local K and V once per attention call, forward and backward; torchtitan 0.3.0 "
    "prepare_context_parallel_input shards inputs and labels over the cp ranks (head-tail load balancer)"
)


def local_seq_len(arch: Architecture, s: int, cp: int, gqa: str) -> int:
    """The tokens of each sequence one rank holds: s ÷ cp. Raises :class:`ActivationInputError` on ``cp`` where
    2·cp does not divide s, or the model's attention is not the causal SDPA ring attention runs."""
    if type(cp) is not int or cp < 1:
        raise ActivationInputError("cp", "must be an integer ≥ 1")
    if cp == 1:
        return s
    if s % (2 * cp):
        raise ActivationInputError(
            "cp",
            f"{cp:,}: 2 × cp = {2 * cp:,} does not divide seq_len ({s:,}); torch's head-tail load balancer cuts the "
            "sequence into 2 × cp equal chunks",
        )
    why = ""
    if arch.family in GPT_FAMILIES or arch.eager_attention:
        why = f"{arch.family}'s attention runs with a mask (eager scores)"
    elif arch.mla:
        why = "deepseek's latent attention is not modelled under ring attention"
    elif arch.sliding_window or arch.global_every:
        why = f"{arch.family}'s sliding window needs a mask"
    elif gqa == "expand":
        why = "gqa expand is transformers' SDPA path with an explicit mask"
    if why:
        raise ActivationInputError(
            "cp", f"{cp:,}: {why}; torch's ring attention with load balancing requires is_causal=True"
        )
    return s // cp


def ring_kv_bytes(arch: Architecture, s_local: int, b: int, w: int, cp: int, tp: int) -> int:
    """Ring attention's K/V buffers of the layer in flight: the all-gathered whole sequence (cp × the local K and V)
    and the local concatenated send buffer, (cp + 1) × 2·s_local·b·kv·d × w; 0 with cp = 1. ``kv``: the key/value
    heads on this tensor-parallel rank (⌈kv_heads ÷ tp⌉, fewer than tp: one each)."""
    if cp == 1:
        return 0
    kv = ceil_div(arch.kv_heads, tp)
    return (cp + 1) * 2 * s_local * b * kv * arch.head_dim * w
