"""llama / mistral / qwen2, after transformers' ``LlamaForCausalLM``.

RMSNorm as ``LlamaRMSNorm`` (unfused: an FP32 upcast in Python, kept for backward), rotary embeddings
computed once per forward in FP32 and cast to the activation dtype, ``scaled_dot_product_attention``
with ``is_causal`` and ``enable_gqa`` (no repeated K/V heads, as transformers' SDPA path on CUDA), a
SwiGLU MLP ``down(silu(gate(x)) * up(x))``.

Mixtral is traced with transformers' own class only (``--stack hf-fsdp2``): transformers 5.23.0 holds its experts
fused and runs them as grouped GEMMs, which is what the lab counts.
"""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor, nn

from app.ledger.models.architecture import Architecture
from app.trace.models.blocks import Progress, RMSNorm, Rotary, apply_rotary, build_layers, sdpa


class SwiGLUAttention(nn.Module):
    def __init__(self, arch: Architecture) -> None:
        super().__init__()
        h = arch.hidden
        self.heads, self.kv_heads, self.head_dim = arch.heads, arch.kv_heads, arch.head_dim
        self.q_proj = nn.Linear(h, arch.q_width, bias=arch.qkv_bias)
        self.k_proj = nn.Linear(h, arch.kv_width, bias=arch.qkv_bias)
        self.v_proj = nn.Linear(h, arch.kv_width, bias=arch.qkv_bias)
        self.o_proj = nn.Linear(arch.q_width, h, bias=arch.o_bias)

    def forward(self, x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
        b, s, _ = x.shape
        q = self.q_proj(x).view(b, s, self.heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(b, s, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(b, s, self.kv_heads, self.head_dim).transpose(1, 2)
        q, k = apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)
        out: Tensor = self.o_proj(sdpa(q, k, v))
        return out


class SwiGLUMlp(nn.Module):
    def __init__(self, arch: Architecture) -> None:
        super().__init__()
        h, i = arch.hidden, arch.intermediate
        self.gate_proj = nn.Linear(h, i, bias=arch.mlp_bias)
        self.up_proj = nn.Linear(h, i, bias=arch.mlp_bias)
        self.down_proj = nn.Linear(i, h, bias=arch.mlp_bias)

    def forward(self, x: Tensor) -> Tensor:
        out: Tensor = self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))
        return out


class SwiGLULayer(nn.Module):
    def __init__(self, arch: Architecture) -> None:
        super().__init__()
        self.self_attn = SwiGLUAttention(arch)
        self.mlp = SwiGLUMlp(arch)
        self.input_layernorm = RMSNorm(arch.hidden)
        self.post_attention_layernorm = RMSNorm(arch.hidden)

    def forward(self, x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
        x = x + self.self_attn(self.input_layernorm(x), cos, sin)
        out: Tensor = x + self.mlp(self.post_attention_layernorm(x))
        return out


class SwiGLUBody(nn.Module):
    def __init__(self, arch: Architecture, progress: Progress) -> None:
        super().__init__()
        self.embed_tokens = nn.Embedding(arch.vocab, arch.hidden)
        self.layers = nn.ModuleList(build_layers(arch, SwiGLULayer, progress))
        self.norm = RMSNorm(arch.hidden)
        self.rotary_emb = Rotary(arch.head_dim)

    def forward(self, tokens: Tensor) -> Tensor:
        x = self.embed_tokens(tokens)
        cos, sin = self.rotary_emb(x, tokens.shape[1])
        for layer in self.layers:
            x = layer(x, cos, sin)
        out: Tensor = self.norm(x)
        return out


class SwiGLUForCausalLM(nn.Module):
    """``LlamaForCausalLM`` and its kin (Mistral, Qwen2): ``model`` (embedding, layers, norm)
    and ``lm_head``."""

    def __init__(self, arch: Architecture, progress: Progress) -> None:
        super().__init__()
        self.model = SwiGLUBody(arch, progress)
        self.lm_head = None if arch.tied_embeddings else nn.Linear(arch.hidden, arch.vocab, bias=False)

    def forward(self, tokens: Tensor) -> Tensor:
        h = self.model(tokens)
        weight = self.model.embed_tokens.weight if self.lm_head is None else self.lm_head.weight
        return F.linear(h, weight)
