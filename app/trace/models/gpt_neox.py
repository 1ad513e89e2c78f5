"""gpt_neox, after transformers' ``GPTNeoXForCausalLM``.

LayerNorm, fused ``query_key_value``, rotary on the first quarter of each head (``rotary_pct`` = 0.25,
the config default), eager attention, exact GELU, attention and MLP in parallel when
``use_parallel_residual``, no dropout (the config defaults are 0).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from app.ledger.models.architecture import Architecture
from app.trace.models.blocks import LN_EPS, Progress, Rotary, apply_rotary, build_layers, eager_attention

NEOX_ROTARY_PCT = 0.25


def neox_rotary_dims(arch: Architecture) -> int:
    """The rotated part of each head: ``int(head_dim × rotary_pct)``, rounded down to an even width."""
    return int(arch.head_dim * NEOX_ROTARY_PCT) // 2 * 2


class NeoXAttention(nn.Module):
    def __init__(self, arch: Architecture) -> None:
        super().__init__()
        self.heads, self.head_dim = arch.heads, arch.head_dim
        self.rotary_dims = neox_rotary_dims(arch)
        self.query_key_value = nn.Linear(arch.hidden, 3 * arch.hidden, bias=arch.qkv_bias)
        self.dense = nn.Linear(arch.hidden, arch.hidden, bias=arch.o_bias)

    def _rotate(self, x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
        r = self.rotary_dims
        return torch.cat((apply_rotary(x[..., :r], cos, sin), x[..., r:]), dim=-1)

    def forward(self, x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
        b, s, _ = x.shape
        qkv = self.query_key_value(x).view(b, s, self.heads, 3 * self.head_dim).transpose(1, 2)
        q, k, v = qkv.chunk(3, dim=-1)
        if self.rotary_dims > 0:
            q, k = self._rotate(q, cos, sin), self._rotate(k, cos, sin)
        out: Tensor = self.dense(eager_attention(q, k, v))
        return out


class NeoXMlp(nn.Module):
    def __init__(self, arch: Architecture) -> None:
        super().__init__()
        self.dense_h_to_4h = nn.Linear(arch.hidden, arch.intermediate, bias=arch.mlp_bias)
        self.dense_4h_to_h = nn.Linear(arch.intermediate, arch.hidden, bias=arch.mlp_bias)

    def forward(self, x: Tensor) -> Tensor:
        out: Tensor = self.dense_4h_to_h(F.gelu(self.dense_h_to_4h(x)))
        return out


class NeoXLayer(nn.Module):
    def __init__(self, arch: Architecture) -> None:
        super().__init__()
        self.parallel = arch.parallel_residual
        self.input_layernorm = nn.LayerNorm(arch.hidden, eps=LN_EPS)
        self.post_attention_layernorm = nn.LayerNorm(arch.hidden, eps=LN_EPS)
        self.attention = NeoXAttention(arch)
        self.mlp = NeoXMlp(arch)

    def forward(self, x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
        attn: Tensor = self.attention(self.input_layernorm(x), cos, sin)
        if self.parallel:
            out: Tensor = x + attn + self.mlp(self.post_attention_layernorm(x))
        else:
            h = x + attn
            out = h + self.mlp(self.post_attention_layernorm(h))
        return out


class NeoXBody(nn.Module):
    def __init__(self, arch: Architecture, progress: Progress) -> None:
        super().__init__()
        self.embed_in = nn.Embedding(arch.vocab, arch.hidden)
        self.layers = nn.ModuleList(build_layers(arch, NeoXLayer, progress))
        self.final_layer_norm = nn.LayerNorm(arch.hidden, eps=LN_EPS)
        self.rotary_emb = Rotary(max(2, neox_rotary_dims(arch)))

    def forward(self, tokens: Tensor) -> Tensor:
        x = self.embed_in(tokens)
        cos, sin = self.rotary_emb(x, tokens.shape[1])
        for layer in self.layers:
            x = layer(x, cos, sin)
        out: Tensor = self.final_layer_norm(x)
        return out


class GPTNeoXForCausalLM(nn.Module):
    """``GPTNeoXForCausalLM``: ``gpt_neox`` and, untied only, ``embed_out``."""

    def __init__(self, arch: Architecture, progress: Progress) -> None:
        super().__init__()
        self.gpt_neox = NeoXBody(arch, progress)
        self.embed_out = None if arch.tied_embeddings else nn.Linear(arch.hidden, arch.vocab, bias=False)

    def forward(self, tokens: Tensor) -> Tensor:
        h = self.gpt_neox(tokens)
        weight = self.gpt_neox.embed_in.weight if self.embed_out is None else self.embed_out.weight
        return F.linear(h, weight)
