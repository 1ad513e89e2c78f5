"""torchtitan's own Llama 3 model for a scenario's architecture: what the ``torchtitan`` stack's trace runs.

torchtitan 0.3.0 (``models/llama3``): its ``Llama3Model`` of ``Llama3TransformerBlock``s, built from the same
configs its registry builds (``make_gqa_config`` with ``fuse_qkv=True``: one ``wqkv`` projection; ``make_ffn_config``:
w1, w3, w2; its ``RMSNorm``, a ``torch.nn.RMSNorm``; ``ComplexRoPE``: one complex64 ``cache`` buffer of
(seq_len, head_dim ÷ 2) per layer, not persistent, sized by the training sequence length as
``Decoder.Config.update_from_config`` sizes it), with the architecture's sizes.

One part stands in, because it cannot run backward on CPU: the registry's attention backend is FlexAttention
(``attn_backend="flex"``), whose backward raises "FlexAttention does not support backward on CPU". The trace
runs torchtitan's own ``ScaledDotProductAttention`` module instead (``enable_gqa`` like flex: K and V are never
expanded), whose CPU kernel keeps what flex keeps for backward: the output and an FP32 log-sum-exp per head per
token. Built under ``FakeTensorMode``, no weight is initialised (``init_weights`` reads values).

The loss is the trace loop's cross-entropy on whole logits, not the llama3 configs' ``ChunkedLossWrapper``: that
wrapper runs the head's backward chunk by chunk inside the loss's forward, which torch 2.13's ``FSDPMemTracker``
cannot follow (its module tracker loses the hierarchy and it refuses the head's second top-level call).
"""

from __future__ import annotations

from torch import nn

from app.ledger.models.architecture import Architecture

TITAN_PIN = "torchtitan==0.3.0"


def build_titan_model(arch: Architecture, seq_len: int) -> nn.Module:
    """torchtitan's ``Llama3Model`` with ``arch``'s sizes and a RoPE cache of ``seq_len`` positions, training."""
    import torch
    from torchtitan.models.common import ComplexRoPE, Embedding, Linear, RMSNorm, ScaledDotProductAttention
    from torchtitan.models.common.config_utils import make_ffn_config, make_gqa_config
    from torchtitan.models.llama3.model import Llama3Model, Llama3TransformerBlock

    init = {"weight": torch.nn.init.zeros_}  # never run: the model is not initialised under fake tensors
    rope = ComplexRoPE.Config(dim=arch.head_dim, max_seq_len=seq_len)
    layers = [
        Llama3TransformerBlock.Config(
            attention_norm=RMSNorm.Config(normalized_shape=arch.hidden),
            ffn_norm=RMSNorm.Config(normalized_shape=arch.hidden),
            attention=make_gqa_config(
                dim=arch.hidden,
                n_heads=arch.heads,
                n_kv_heads=arch.kv_heads,
                head_dim=arch.head_dim,
                wqkv_param_init=init,
                wo_param_init=init,
                inner_attention=ScaledDotProductAttention.Config(),
                fuse_qkv=True,
                rope=rope,
            ),
            feed_forward=make_ffn_config(
                dim=arch.hidden, hidden_dim=arch.intermediate, w1_param_init=init, w2w3_param_init=init
            ),
        )
        for _ in range(arch.layers)
    ]
    config = Llama3Model.Config(
        dim=arch.hidden,
        vocab_size=arch.vocab,
        tok_embeddings=Embedding.Config(num_embeddings=arch.vocab, embedding_dim=arch.hidden, param_init=init),
        norm=RMSNorm.Config(normalized_shape=arch.hidden),
        lm_head=Linear.Config(in_features=arch.hidden, out_features=arch.vocab, param_init=init),
        layers=layers,
        enable_weight_tying=arch.tied_embeddings,
    )
    model: nn.Module = config.build()
    model.train()
    return model
