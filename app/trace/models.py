"""Plain-torch decoders whose parameters are exactly the inventory of :mod:`app.ledger.models`.

Each family is written after the Hugging Face ``transformers`` modelling code it stands for, so that
the tensors autograd saves are the ones a real run saves on the same kernels, and the parameter
names and shapes are the checkpoint's (``model.layers.0.self_attn.q_proj.weight``; GPT-2's
``Conv1D`` weights stored [in, out]). That matters twice: FSDP2 pads dim 0 of exactly these
tensors, and a test holds every name, shape and the count to :func:`app.ledger.models.inventory`.

What each family computes (the choices a trace reproduces, stated once):

- llama / mistral / qwen2: RMSNorm as ``LlamaRMSNorm`` (unfused: an FP32 upcast in Python, kept for
  backward), rotary embeddings computed once per forward in FP32 and cast to the activation dtype,
  ``scaled_dot_product_attention`` with ``is_causal`` and ``enable_gqa`` (no repeated K/V heads,
  as transformers' SDPA path on CUDA), a SwiGLU MLP ``down(silu(gate(x)) * up(x))``.
- gpt2: LayerNorm, learned positions, ``Conv1D`` as ``addmm``, eager attention (the s × s scores
  materialised, as transformers' ``eager`` path and the lab's GPT-family ledger: see
  ``_eager_attention``), ``gelu_new`` (tanh), the config defaults' dropout of 0.1 on embeddings,
  attention probabilities and both residual branches.
- gpt_neox: LayerNorm, fused ``query_key_value``, rotary on the first quarter of each head
  (``rotary_pct`` = 0.25, the config default), eager attention, exact GELU, attention and MLP in parallel when
  ``use_parallel_residual``, no dropout (the config defaults are 0).
- mixtral: as llama, with ``MixtralSparseMoeBlock``'s router (``gate``), softmax in FP32, top-k,
  renormalised weights, and per expert ``w2(silu(w1(x)) * w3(x))`` on the tokens routed to it,
  scaled and ``index_add_``-ed back. Which tokens go where is data: fake tensors have no data, so
  routing is taken as **balanced** (each expert receives ⌈b·s·k ÷ E⌉ token slots, the last padded),
  with static shapes. The saved activations summed over experts are the same for any routing
  (each token's k expert passes); only one expert's transient temporaries depend on the balance.

No weight is ever initialised for real: the trace builds these under ``FakeTensorMode``.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from app.ledger.models.architecture import Architecture
from app.trace.setup import TRACEABLE_FAMILIES

RMS_EPS = 1e-6
LN_EPS = 1e-5
ROPE_THETA = 10_000.0
GPT2_DROPOUT = 0.1
NEOX_ROTARY_PCT = 0.25

Progress = Callable[[int, int], None]  # (layers built, layers)


class ModelBuildError(ValueError):
    """A config the trace cannot build (a family it does not implement yet)."""


# --------------------------------------------------------------------------- shared pieces


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


def _norm(arch: Architecture) -> nn.Module:
    return RMSNorm(arch.hidden) if arch.norm == "rmsnorm" else nn.LayerNorm(arch.hidden, eps=LN_EPS)


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


def _apply_rotary(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    return x * cos + _rotate_half(x) * sin


def _dropout(x: Tensor, p: float, training: bool) -> Tensor:
    """Dropout as CUDA runs it: ``F.dropout`` on a CUDA tensor dispatches to the fused ``native_dropout``,
    which saves a 1-byte ``bool`` mask for backward. On CPU, ``F.dropout`` multiplies by a noise tensor in
    the input's dtype and saves that (2 B per element in BF16), so a CPU trace calling it would not be
    the run the lab budgets; ``native_dropout`` has a CPU kernel with the CUDA path's saved tensors."""
    if not training or p == 0:
        return x
    out, _mask = torch.native_dropout(x, p, True)
    return out


def _eager_attention(q: Tensor, k: Tensor, v: Tensor, dropout: float = 0.0) -> Tensor:
    """[b, heads, s, d] in, [b, s, heads × d] out, causal: transformers' ``eager`` attention for GPT-2
    and GPT-NeoX, the kernel the lab's GPT-family activation ledger counts (Korthikanti et al. 2022).
    The s × s scores are materialised: the softmax output is saved, and with dropout its mask (1 B per
    element, :func:`_dropout`) and its output (saved by ``× V``); an additive causal mask saves nothing."""
    b, heads, s, d = q.shape
    scores = torch.matmul(q * d**-0.5, k.transpose(-1, -2))
    causal = torch.full((s, s), float("-inf"), dtype=scores.dtype).triu(1)  # a temporary, not saved by add
    probs = torch.softmax(scores + causal, dim=-1)
    if dropout > 0:
        probs = _dropout(probs, dropout, training=True)
    out = torch.matmul(probs, v)
    return out.transpose(1, 2).contiguous().reshape(b, s, heads * d)


def _sdpa(q: Tensor, k: Tensor, v: Tensor, dropout: float = 0.0) -> Tensor:
    """[b, heads, s, d] in, [b, s, heads × d] out, causal; K/V heads are grouped, never repeated."""
    gqa = k.shape[1] != q.shape[1]
    out = F.scaled_dot_product_attention(q, k, v, dropout_p=dropout, is_causal=True, enable_gqa=gqa)
    b, heads, s, d = out.shape
    return out.transpose(1, 2).contiguous().reshape(b, s, heads * d)


# --------------------------------------------------------------------------- llama, mistral, qwen2


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
        q, k = _apply_rotary(q, cos, sin), _apply_rotary(k, cos, sin)
        out: Tensor = self.o_proj(_sdpa(q, k, v))
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
        self.layers = nn.ModuleList(_build_layers(arch, layer, progress))
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


# --------------------------------------------------------------------------- gpt2


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
        return _dropout(self.c_proj(_eager_attention(q, k, v, dropout)), GPT2_DROPOUT, self.training)


class GPT2Mlp(nn.Module):
    def __init__(self, arch: Architecture) -> None:
        super().__init__()
        self.c_fc = Conv1D(arch.hidden, arch.intermediate)
        self.c_proj = Conv1D(arch.intermediate, arch.hidden)

    def forward(self, x: Tensor) -> Tensor:
        return _dropout(self.c_proj(_gelu_new(self.c_fc(x))), GPT2_DROPOUT, self.training)


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
        self.h = nn.ModuleList(_build_layers(arch, GPT2Block, progress))
        self.ln_f = nn.LayerNorm(arch.hidden, eps=LN_EPS)

    def forward(self, tokens: Tensor) -> Tensor:
        positions = torch.arange(tokens.shape[1]).unsqueeze(0)
        x = _dropout(self.wte(tokens) + self.wpe(positions), GPT2_DROPOUT, self.training)
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


# --------------------------------------------------------------------------- gpt_neox


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
        return torch.cat((_apply_rotary(x[..., :r], cos, sin), x[..., r:]), dim=-1)

    def forward(self, x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
        b, s, _ = x.shape
        qkv = self.query_key_value(x).view(b, s, self.heads, 3 * self.head_dim).transpose(1, 2)
        q, k, v = qkv.chunk(3, dim=-1)
        if self.rotary_dims > 0:
            q, k = self._rotate(q, cos, sin), self._rotate(k, cos, sin)
        out: Tensor = self.dense(_eager_attention(q, k, v))
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
        self.layers = nn.ModuleList(_build_layers(arch, NeoXLayer, progress))
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


# --------------------------------------------------------------------------- building


def _build_layers(
    arch: Architecture, layer: Callable[[Architecture], nn.Module], progress: Progress
) -> list[nn.Module]:
    out: list[nn.Module] = []
    for k in range(arch.layers):
        out.append(layer(arch))
        progress(k + 1, arch.layers)
    return out


def build_model(arch: Architecture, progress: Progress | None = None) -> nn.Module:
    """The family's decoder for ``arch`` (call under ``FakeTensorMode`` for a model of any size).

    Raises :class:`ModelBuildError` for a family the trace does not implement yet.
    """
    report: Progress = progress or (lambda done, total: None)
    if arch.family == "gpt2":
        return GPT2LMHeadModel(arch, report)
    if arch.family == "gpt_neox":
        return GPTNeoXForCausalLM(arch, report)
    if arch.family in ("llama", "mistral", "qwen2", "mixtral"):
        return SwiGLUForCausalLM(arch, report)
    raise ModelBuildError(f"family {arch.family!r} is not yet traceable (traceable: {', '.join(TRACEABLE_FAMILIES)})")


def decoder_layers(model: nn.Module) -> list[nn.Module]:
    """The decoder layers of a model :func:`build_model` made, in execution order."""
    for body_name, list_name in (("model", "layers"), ("transformer", "h"), ("gpt_neox", "layers")):
        body = getattr(model, body_name, None)
        if isinstance(body, nn.Module):
            layers = getattr(body, list_name)
            assert isinstance(layers, nn.ModuleList)
            return list(layers)
    raise TypeError(f"{type(model).__name__} is not a model build_model makes")


def parameter_inventory(model: nn.Module) -> list[tuple[str, tuple[int, ...]]]:
    """(name, shape) of every distinct parameter, in registration order (a tied head counted once)."""
    return [(name, tuple(p.shape)) for name, p in model.named_parameters()]
