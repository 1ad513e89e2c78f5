"""gpt2, after transformers' ``GPT2LMHeadModel``.

LayerNorm, learned positions, ``Conv1D`` as ``addmm`` (weights stored [in, out]), eager attention (the
s × s scores materialised, as transformers' ``eager`` path and the lab's GPT-family ledger: see
:func:`~app.trace.models.blocks.eager_attention`), ``gelu_new`` (tanh), the config defaults' dropout of
0.1 on embeddings, attention probabilities and both residual branches.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from app.ledger.models.architecture import Architecture
from app.trace.models.blocks import LN_EPS, Progress, build_layers, cuda_dropout, eager_attention

GPT2_DROPOUT = 0.1


class Conv1D(nn.Module):
    """GPT-2's ``Conv1D``: a linear layer with its weight stored [in, out]."""

    def __init__(self, in_features: int, out_features: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(in_features, out_features))
        self.bias = nn.Parameter(torch.zeros(out_features))
        nn.init.normal_(self.weight, std=0.02)

    def forward(self, x: Tensor) -> Tensor:
        shape = (*x.shape[:-1], self.weight.shape[1])
        return torch.addmm(self.bias, x.reshape(-1, x.shape[-1]), self.weight).view(shape)


def _gelu_new(x: Tensor) -> Tensor:
    return F.gelu(x, approximate="tanh")


class GPT2Attention(nn.Module):
    def __init__(self, arch: Architecture) -> None:
        super().__init__()
        self.heads, self.head_dim = arch.heads, arch.head_dim
        self.c_attn = Conv1D(arch.hidden, 3 * arch.hidden)
        self.c_proj = Conv1D(arch.hidden, arch.hidden)

    def forward(self, x: Tensor) -> Tensor:
        b, s, h = x.shape
        q, k, v = (t.view(b, s, self.heads, self.head_dim).transpose(1, 2) for t in self.c_attn(x).split(h, dim=2))
        dropout = GPT2_DROPOUT if self.training else 0.0
        return cuda_dropout(self.c_proj(eager_attention(q, k, v, dropout)), GPT2_DROPOUT, self.training)


class GPT2Mlp(nn.Module):
    def __init__(self, arch: Architecture) -> None:
        super().__init__()
        self.c_fc = Conv1D(arch.hidden, arch.intermediate)
        self.c_proj = Conv1D(arch.intermediate, arch.hidden)

    def forward(self, x: Tensor) -> Tensor:
        return cuda_dropout(self.c_proj(_gelu_new(self.c_fc(x))), GPT2_DROPOUT, self.training)


class GPT2Block(nn.Module):
    def __init__(self, arch: Architecture) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(arch.hidden, eps=LN_EPS)
        self.attn = GPT2Attention(arch)
        self.ln_2 = nn.LayerNorm(arch.hidden, eps=LN_EPS)
        self.mlp = GPT2Mlp(arch)

    def forward(self, x: Tensor) -> Tensor:
        x = x + self.attn(self.ln_1(x))
        out: Tensor = x + self.mlp(self.ln_2(x))
        return out


class GPT2Body(nn.Module):
    def __init__(self, arch: Architecture, progress: Progress) -> None:
        super().__init__()
        self.wte = nn.Embedding(arch.vocab, arch.hidden)
        self.wpe = nn.Embedding(arch.max_positions, arch.hidden)
        self.h = nn.ModuleList(build_layers(arch, GPT2Block, progress))
        self.ln_f = nn.LayerNorm(arch.hidden, eps=LN_EPS)

    def forward(self, tokens: Tensor) -> Tensor:
        positions = torch.arange(tokens.shape[1]).unsqueeze(0)
        x = cuda_dropout(self.wte(tokens) + self.wpe(positions), GPT2_DROPOUT, self.training)
        for block in self.h:
            x = block(x)
        out: Tensor = self.ln_f(x)
        return out


class GPT2LMHeadModel(nn.Module):
    """``GPT2LMHeadModel``: ``transformer`` and, untied only, ``lm_head``."""

    def __init__(self, arch: Architecture, progress: Progress) -> None:
        super().__init__()
        self.transformer = GPT2Body(arch, progress)
        self.lm_head = None if arch.tied_embeddings else nn.Linear(arch.hidden, arch.vocab, bias=False)

    def forward(self, tokens: Tensor) -> Tensor:
        h = self.transformer(tokens)
        weight = self.transformer.wte.weight if self.lm_head is None else self.lm_head.weight
        return F.linear(h, weight)
