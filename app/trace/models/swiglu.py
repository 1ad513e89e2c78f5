"""llama / mistral / qwen2 and mixtral, after transformers' ``LlamaForCausalLM`` and ``MixtralForCausalLM``.

RMSNorm as ``LlamaRMSNorm`` (unfused: an FP32 upcast in Python, kept for backward), rotary embeddings
computed once per forward in FP32 and cast to the activation dtype, ``scaled_dot_product_attention``
with ``is_causal`` and ``enable_gqa`` (no repeated K/V heads, as transformers' SDPA path on CUDA), a
SwiGLU MLP ``down(silu(gate(x)) * up(x))``.

Mixtral: as llama, with ``MixtralSparseMoeBlock``'s router (``gate``), softmax in FP32, top-k,
renormalised weights, and per expert ``w2(silu(w1(x)) * w3(x))`` on the tokens routed to it, scaled
and ``index_add_``-ed back. Which tokens go where is data: fake tensors have no data, so routing is
taken as **balanced** (each expert receives ⌈b·s·k ÷ E⌉ token slots, the last padded), with static
shapes. The saved activations summed over experts are the same for any routing (each token's k expert
passes); only one expert's transient temporaries depend on the balance.
"""

from __future__ import annotations

import torch
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


class MixtralExpert(nn.Module):
    """One ``MixtralBlockSparseTop2MLP``: w1 (gate), w3 (up), w2 (down)."""

    def __init__(self, arch: Architecture) -> None:
        super().__init__()
        h, i = arch.hidden, arch.intermediate
        self.w1 = nn.Linear(h, i, bias=False)
        self.w2 = nn.Linear(i, h, bias=False)
        self.w3 = nn.Linear(h, i, bias=False)

    def forward(self, x: Tensor) -> Tensor:
        out: Tensor = self.w2(F.silu(self.w1(x)) * self.w3(x))
        return out


class MixtralMoe(nn.Module):
    """``MixtralSparseMoeBlock`` with balanced, static-shape routing (see the module docstring)."""

    def __init__(self, arch: Architecture) -> None:
        super().__init__()
        self.experts_per_token = arch.experts_per_token
        self.gate = nn.Linear(arch.hidden, arch.experts, bias=False)
        self.experts = nn.ModuleList(MixtralExpert(arch) for _ in range(arch.experts))

    def forward(self, x: Tensor) -> Tensor:
        b, s, h = x.shape
        tokens = x.reshape(-1, h)
        n, k, e = tokens.shape[0], self.experts_per_token, len(self.experts)
        probs = F.softmax(self.gate(tokens), dim=1, dtype=torch.float32)
        weights, chosen = torch.topk(probs, k, dim=-1)
        weights = (weights / weights.sum(dim=-1, keepdim=True)).to(x.dtype)
        slots = -(-n * k // e)  # each expert's ⌈n·k ÷ E⌉ token slots
        # Slot j of expert i is the routed pair order[i·slots + j] (pairs sorted by expert); the
        # padding slots beyond n·k repeat pair 0 with weight 0.
        order = torch.argsort(chosen.reshape(-1))
        order = torch.cat((order, order.new_zeros(e * slots - n * k)))
        pair_weight = torch.cat((weights.reshape(-1), weights.new_zeros(e * slots - n * k)))[order]
        token_of = order // k
        out = torch.zeros_like(tokens)
        for i, expert in enumerate(self.experts):
            idx = token_of[i * slots : (i + 1) * slots]
            y = expert(tokens[idx]) * pair_weight[i * slots : (i + 1) * slots, None]
            out.index_add_(0, idx, y.to(tokens.dtype))
        return out.reshape(b, s, h)


class MixtralLayer(nn.Module):
    def __init__(self, arch: Architecture) -> None:
        super().__init__()
        self.self_attn = SwiGLUAttention(arch)
        self.block_sparse_moe = MixtralMoe(arch)
        self.input_layernorm = RMSNorm(arch.hidden)
        self.post_attention_layernorm = RMSNorm(arch.hidden)

    def forward(self, x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
        x = x + self.self_attn(self.input_layernorm(x), cos, sin)
        out: Tensor = x + self.block_sparse_moe(self.post_attention_layernorm(x))
        return out


class SwiGLUBody(nn.Module):
    def __init__(self, arch: Architecture, progress: Progress) -> None:
        super().__init__()
        self.embed_tokens = nn.Embedding(arch.vocab, arch.hidden)
        layer = MixtralLayer if arch.experts else SwiGLULayer
        self.layers = nn.ModuleList(build_layers(arch, layer, progress))
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
    """``LlamaForCausalLM`` and its kin (Mistral, Qwen2, Mixtral): ``model`` (embedding, layers, norm)
    and ``lm_head``."""

    def __init__(self, arch: Architecture, progress: Progress) -> None:
        super().__init__()
        self.model = SwiGLUBody(arch, progress)
        self.lm_head = None if arch.tied_embeddings else nn.Linear(arch.hidden, arch.vocab, bias=False)

    def forward(self, tokens: Tensor) -> Tensor:
        h = self.model(tokens)
        weight = self.model.embed_tokens.weight if self.lm_head is None else self.lm_head.weight
        return F.linear(h, weight)
