"""The pieces every traced family shares: RMSNorm, rotary tables, dropout as CUDA runs it, the two
attention kernels, and the layer list built with progress."""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from app.ledger.models.architecture import Architecture

RMS_EPS = 1e-6
LN_EPS = 1e-5
ROPE_THETA = 10_000.0

Progress = Callable[[int, int], None]  # (layers built, layers)


class RMSNorm(nn.Module):
    """``LlamaRMSNorm``: FP32 variance and scaling, cast back, then the weight."""

    def __init__(self, hidden: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden))

    def forward(self, x: Tensor) -> Tensor:
        dtype = x.dtype
        h = x.to(torch.float32)
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + RMS_EPS)
        return self.weight * h.to(dtype)


class Rotary(nn.Module):
    """The rotary tables, once per forward: an FP32 ``inv_freq`` buffer (not a parameter, as in
    transformers), cos and sin computed in FP32 and cast to the activations' dtype."""

    inv_freq: Tensor

    def __init__(self, dim: int) -> None:
        super().__init__()
        inv = 1.0 / (ROPE_THETA ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))
        self.register_buffer("inv_freq", inv, persistent=False)

    def forward(self, x: Tensor, seq_len: int) -> tuple[Tensor, Tensor]:
        positions = torch.arange(seq_len, dtype=torch.float32)
        freqs = torch.outer(positions, self.inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)


def _rotate_half(x: Tensor) -> Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def apply_rotary(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    return x * cos + _rotate_half(x) * sin


def cuda_dropout(x: Tensor, p: float, training: bool) -> Tensor:
    """Dropout as CUDA runs it: ``F.dropout`` on a CUDA tensor dispatches to the fused ``native_dropout``,
    which saves a 1-byte ``bool`` mask for backward. On CPU, ``F.dropout`` multiplies by a noise tensor in
    the input's dtype and saves that (2 B per element in BF16), so a CPU trace calling it would not be
    the run the lab budgets; ``native_dropout`` has a CPU kernel with the CUDA path's saved tensors."""
    if not training or p == 0:
        return x
    out, _mask = torch.native_dropout(x, p, True)
    return out


def eager_attention(q: Tensor, k: Tensor, v: Tensor, dropout: float = 0.0) -> Tensor:
    """[b, heads, s, d] in, [b, s, heads × d] out, causal: transformers' ``eager`` attention for GPT-2
    and GPT-NeoX, the kernel the lab's GPT-family activation ledger counts (Korthikanti et al. 2022).
    The s × s scores are materialised: the softmax output is saved, and with dropout its mask (1 B per
    element, :func:`cuda_dropout`) and its output (saved by ``× V``); an additive causal mask saves nothing."""
    b, heads, s, d = q.shape
    scores = torch.matmul(q * d**-0.5, k.transpose(-1, -2))
    causal = torch.full((s, s), float("-inf"), dtype=scores.dtype).triu(1)  # a temporary, not saved by add
    probs = torch.softmax(scores + causal, dim=-1)
    if dropout > 0:
        probs = cuda_dropout(probs, dropout, training=True)
    out = torch.matmul(probs, v)
    return out.transpose(1, 2).contiguous().reshape(b, s, heads * d)


def sdpa(q: Tensor, k: Tensor, v: Tensor, dropout: float = 0.0) -> Tensor:
    """[b, heads, s, d] in, [b, s, heads × d] out, causal; K/V heads are grouped, never repeated."""
    gqa = k.shape[1] != q.shape[1]
    out = F.scaled_dot_product_attention(q, k, v, dropout_p=dropout, is_causal=True, enable_gqa=gqa)
    b, heads, s, d = out.shape
    return out.transpose(1, 2).contiguous().reshape(b, s, heads * d)


def build_layers(arch: Architecture, layer: Callable[[Architecture], nn.Module], progress: Progress) -> list[nn.Module]:
    """``arch.layers`` decoder layers, ``progress`` told after each."""
    out: list[nn.Module] = []
    for k in range(arch.layers):
        out.append(layer(arch))
        progress(k + 1, arch.layers)
    return out
