"""Built-in configs of well-known open models: their ``config.json`` facts, each with its source.

Only the keys that shape parameters or activations are copied (floats such as ``rms_norm_eps``
or ``rope_theta`` size nothing and are left out). Each entry reads exactly like the published
``config.json`` so that the same reader, :func:`architecture_from_config`, handles an uploaded
file and a preset: there is one path from config to ledger, not two.

The published parameter counts these configs must reproduce live in the tests
(``tests/ledger/models/test_inventory.py``), beside their sources, so that a typo here fails there.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from app.ledger.models.architecture import Architecture, ModelConfigError
from app.ledger.models.readers import architecture_from_config


@dataclass(frozen=True, slots=True)
class KnownModel:
    id: str
    title: str
    source: str
    config: Mapping[str, object]  # read-only view of the config.json facts

    def architecture(self) -> Architecture:
        return architecture_from_config(self.config)


_HF = "https://huggingface.co/{}/blob/main/config.json"
_LLAMA3 = "; Llama Team, The Llama 3 Herd of Models, arXiv:2407.21783 (July 2024)"
# Llama 3.3 70B keeps Llama 3.1 70B's architecture: the two config.json files agree on every key read here.
_LLAMA_3_70B: dict[str, object] = {
    "model_type": "llama",
    "hidden_size": 8192,
    "intermediate_size": 28672,
    "num_hidden_layers": 80,
    "num_attention_heads": 64,
    "num_key_value_heads": 8,
    "vocab_size": 128256,
    "max_position_embeddings": 131072,
    "tie_word_embeddings": False,
}
# Qwen2.5-7B keeps Qwen2-7B's architecture (the same keys, the same values).
_QWEN2_7B: dict[str, object] = {
    "model_type": "qwen2",
    "hidden_size": 3584,
    "intermediate_size": 18944,
    "num_hidden_layers": 28,
    "num_attention_heads": 28,
    "num_key_value_heads": 4,
    "vocab_size": 152064,
    "max_position_embeddings": 131072,
    "tie_word_embeddings": False,
}
_QWEN25 = "; Qwen Team, Qwen2.5 Technical Report, arXiv:2412.15115 (December 2024)"

_QWEN3 = "; Qwen Team, Qwen3 Technical Report, arXiv:2505.09388 (May 2025)"


def _qwen3(hidden: int, intermediate: int, layers: int, heads: int, tied: bool) -> dict[str, object]:
    """A dense Qwen3 config.json: what its sizes leave to every released one (8 key/value heads of 128, the
    151,936-token vocabulary, 40,960 positions, no attention bias, no sliding window)."""
    return {
        "model_type": "qwen3", "hidden_size": hidden, "intermediate_size": intermediate, "num_hidden_layers": layers,
        "num_attention_heads": heads, "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 151936,
        "max_position_embeddings": 40960, "attention_bias": False, "use_sliding_window": False,
        "sliding_window": None, "tie_word_embeddings": tied,
    }  # fmt: skip


# id → (title, source, config.json facts). Sources: the Hugging Face Hub config of the released
# checkpoint and the paper or report that introduced the model (with its date).
_TABLE: dict[str, tuple[str, str, dict[str, object]]] = {
    "llama-2-7b": (
        "Llama-2-7B",
        _HF.format("meta-llama/Llama-2-7b-hf")
        + "; Touvron et al., Llama 2: Open Foundation and Fine-Tuned Chat Models, arXiv:2307.09288 (July 2023)",
        {
            "model_type": "llama",
            "hidden_size": 4096,
            "intermediate_size": 11008,
            "num_hidden_layers": 32,
            "num_attention_heads": 32,
            "num_key_value_heads": 32,
            "vocab_size": 32000,
            "max_position_embeddings": 4096,
            "tie_word_embeddings": False,
        },
    ),
    "llama-2-13b": (
        "Llama-2-13B",
        _HF.format("meta-llama/Llama-2-13b-hf") + "; Touvron et al., arXiv:2307.09288 (July 2023)",
        {
            "model_type": "llama",
            "hidden_size": 5120,
            "intermediate_size": 13824,
            "num_hidden_layers": 40,
            "num_attention_heads": 40,
            "num_key_value_heads": 40,
            "vocab_size": 32000,
            "max_position_embeddings": 4096,
            "tie_word_embeddings": False,
        },
    ),
    "llama-2-70b": (
        "Llama-2-70B",
        _HF.format("meta-llama/Llama-2-70b-hf") + "; Touvron et al., arXiv:2307.09288 (July 2023), GQA with 8 KV heads",
        {
            "model_type": "llama",
            "hidden_size": 8192,
            "intermediate_size": 28672,
            "num_hidden_layers": 80,
            "num_attention_heads": 64,
            "num_key_value_heads": 8,
            "vocab_size": 32000,
            "max_position_embeddings": 4096,
            "tie_word_embeddings": False,
        },
    ),
    "mistral-7b-v0.1": (
        "Mistral-7B-v0.1",
        _HF.format("mistralai/Mistral-7B-v0.1") + "; Jiang et al., Mistral 7B, arXiv:2310.06825 (October 2023)",
        {
            "model_type": "mistral",
            "hidden_size": 4096,
            "intermediate_size": 14336,
            "num_hidden_layers": 32,
            "num_attention_heads": 32,
            "num_key_value_heads": 8,
            "vocab_size": 32000,
            "max_position_embeddings": 32768,
            "sliding_window": 4096,
            "tie_word_embeddings": False,
        },
    ),
    "mixtral-8x7b-v0.1": (
        "Mixtral-8x7B-v0.1",
        _HF.format("mistralai/Mixtral-8x7B-v0.1")
        + "; Jiang et al., Mixtral of Experts, arXiv:2401.04088 (January 2024)",
        {
            "model_type": "mixtral",
            "hidden_size": 4096,
            "intermediate_size": 14336,
            "num_hidden_layers": 32,
            "num_attention_heads": 32,
            "num_key_value_heads": 8,
            "num_local_experts": 8,
            "num_experts_per_tok": 2,
            "vocab_size": 32000,
            "max_position_embeddings": 32768,
            "tie_word_embeddings": False,
        },
    ),
    "qwen2-0.5b": (
        "Qwen2-0.5B",
        _HF.format("Qwen/Qwen2-0.5B") + "; Yang et al., Qwen2 Technical Report, arXiv:2407.10671 (July 2024)",
        {
            "model_type": "qwen2",
            "hidden_size": 896,
            "intermediate_size": 4864,
            "num_hidden_layers": 24,
            "num_attention_heads": 14,
            "num_key_value_heads": 2,
            "vocab_size": 151936,
            "max_position_embeddings": 131072,
            "tie_word_embeddings": True,
        },
    ),
    "qwen2-7b": (
        "Qwen2-7B",
        _HF.format("Qwen/Qwen2-7B") + "; Yang et al., Qwen2 Technical Report, arXiv:2407.10671 (July 2024)",
        _QWEN2_7B,
    ),
    # --- 2024–2025 releases of the families above (Llama 3.x's rope_scaling sizes nothing: left out)
    "llama-3.1-8b": (
        "Llama-3.1-8B",
        _HF.format("meta-llama/Llama-3.1-8B") + _LLAMA3,
        {
            "model_type": "llama",
            "hidden_size": 4096,
            "intermediate_size": 14336,
            "num_hidden_layers": 32,
            "num_attention_heads": 32,
            "num_key_value_heads": 8,
            "vocab_size": 128256,
            "max_position_embeddings": 131072,
            "tie_word_embeddings": False,
        },
    ),
    "llama-3.1-70b": (
        "Llama-3.1-70B",
        _HF.format("meta-llama/Llama-3.1-70B") + _LLAMA3,
        _LLAMA_3_70B,
    ),
    "llama-3.1-405b": (
        "Llama-3.1-405B",
        _HF.format("meta-llama/Llama-3.1-405B") + _LLAMA3,
        {
            "model_type": "llama",
            "hidden_size": 16384,
            "intermediate_size": 53248,
            "num_hidden_layers": 126,
            "num_attention_heads": 128,
            "num_key_value_heads": 8,
            "vocab_size": 128256,
            "max_position_embeddings": 131072,
            "tie_word_embeddings": False,
        },
    ),
    "llama-3.2-1b": (
        "Llama-3.2-1B",
        _HF.format("meta-llama/Llama-3.2-1B") + "; Meta, Llama 3.2 model card (September 2024)",
        {
            "model_type": "llama",
            "hidden_size": 2048,
            "intermediate_size": 8192,
            "num_hidden_layers": 16,
            "num_attention_heads": 32,
            "num_key_value_heads": 8,
            "head_dim": 64,
            "vocab_size": 128256,
            "max_position_embeddings": 131072,
            "tie_word_embeddings": True,
        },
    ),
    "llama-3.2-3b": (
        "Llama-3.2-3B",
        _HF.format("meta-llama/Llama-3.2-3B") + "; Meta, Llama 3.2 model card (September 2024)",
        {
            "model_type": "llama",
            "hidden_size": 3072,
            "intermediate_size": 8192,
            "num_hidden_layers": 28,
            "num_attention_heads": 24,
            "num_key_value_heads": 8,
            "head_dim": 128,
            "vocab_size": 128256,
            "max_position_embeddings": 131072,
            "tie_word_embeddings": True,
        },
    ),
    "llama-3.3-70b": (
        "Llama-3.3-70B-Instruct",
        _HF.format("meta-llama/Llama-3.3-70B-Instruct") + "; Meta, Llama 3.3 model card (December 2024)",
        _LLAMA_3_70B,
    ),
    "qwen2.5-7b": (
        "Qwen2.5-7B",
        _HF.format("Qwen/Qwen2.5-7B") + _QWEN25,
        _QWEN2_7B,
    ),
    "qwen2.5-72b": (
        "Qwen2.5-72B",
        _HF.format("Qwen/Qwen2.5-72B") + _QWEN25,
        {
            "model_type": "qwen2",
            "hidden_size": 8192,
            "intermediate_size": 29568,
            "num_hidden_layers": 80,
            "num_attention_heads": 64,
            "num_key_value_heads": 8,
            "vocab_size": 152064,
            "max_position_embeddings": 131072,
            "tie_word_embeddings": False,
        },
    ),
    "qwen3-0.6b": ("Qwen3-0.6B-Base", _HF.format("Qwen/Qwen3-0.6B-Base") + _QWEN3, _qwen3(1024, 3072, 28, 16, True)),
    "qwen3-8b": ("Qwen3-8B-Base", _HF.format("Qwen/Qwen3-8B-Base") + _QWEN3, _qwen3(4096, 12288, 36, 32, False)),
    "qwen3-32b": ("Qwen3-32B", _HF.format("Qwen/Qwen3-32B") + _QWEN3, _qwen3(5120, 25600, 64, 64, False)),
    "phi-3.5-mini": (
        "Phi-3.5-mini-instruct",
        _HF.format("microsoft/Phi-3.5-mini-instruct")
        + "; Abdin et al., Phi-3 Technical Report, arXiv:2404.14219 (April 2024; 3.5 in August 2024)",
        {
            "model_type": "phi3",
            "hidden_size": 3072,
            "intermediate_size": 8192,
            "num_hidden_layers": 32,
            "num_attention_heads": 32,
            "num_key_value_heads": 32,
            "vocab_size": 32064,
            "max_position_embeddings": 131072,
            "sliding_window": 262144,
            "tie_word_embeddings": False,
        },
    ),
    "phi-4": (
        "Phi-4",
        _HF.format("microsoft/phi-4") + "; Abdin et al., Phi-4 Technical Report, arXiv:2412.08905 (December 2024)",
        {
            "model_type": "phi3",
            "hidden_size": 5120,
            "intermediate_size": 17920,
            "num_hidden_layers": 40,
            "num_attention_heads": 40,
            "num_key_value_heads": 10,
            "vocab_size": 100352,
            "max_position_embeddings": 16384,
            "sliding_window": None,
            "tie_word_embeddings": False,
        },
    ),
    "mistral-small-24b": (
        "Mistral-Small-24B-Base-2501",
        _HF.format("mistralai/Mistral-Small-24B-Base-2501") + "; Mistral AI, Mistral Small 3 (January 2025)",
        {
            "model_type": "mistral",
            "hidden_size": 5120,
            "intermediate_size": 32768,
            "num_hidden_layers": 40,
            "num_attention_heads": 32,
            "num_key_value_heads": 8,
            "head_dim": 128,
            "vocab_size": 131072,
            "max_position_embeddings": 32768,
            "sliding_window": None,  # null in the published config.json: transformers' default (4096) would apply
            "tie_word_embeddings": False,
        },
    ),
    "mixtral-8x22b": (
        "Mixtral-8x22B-v0.1",
        _HF.format("mistralai/Mixtral-8x22B-v0.1") + "; Mistral AI, Cheaper, Better, Faster, Stronger (April 2024)",
        {
            "model_type": "mixtral",
            "hidden_size": 6144,
            "intermediate_size": 16384,
            "num_hidden_layers": 56,
            "num_attention_heads": 48,
            "num_key_value_heads": 8,
            "num_local_experts": 8,
            "num_experts_per_tok": 2,
            "vocab_size": 32768,
            "max_position_embeddings": 65536,
            "sliding_window": None,  # null in the published config.json: transformers' default (4096) would apply
            "tie_word_embeddings": False,
        },
    ),
    "gpt2": (
        "GPT-2 (124M)",
        _HF.format("openai-community/gpt2")
        + "; Radford et al., Language Models are Unsupervised Multitask Learners, OpenAI (February 2019)",
        {
            "model_type": "gpt2",
            "n_embd": 768,
            "n_layer": 12,
            "n_head": 12,
            "n_positions": 1024,
            "n_ctx": 1024,
            "vocab_size": 50257,
        },
    ),
    "gpt-neox-20b": (
        "GPT-NeoX-20B",
        _HF.format("EleutherAI/gpt-neox-20b")
        + "; Black et al., GPT-NeoX-20B: An Open-Source Autoregressive Language Model, arXiv:2204.06745 (April 2022)",
        {
            "model_type": "gpt_neox",
            "hidden_size": 6144,
            "intermediate_size": 24576,
            "num_hidden_layers": 44,
            "num_attention_heads": 64,
            "vocab_size": 50432,
            "max_position_embeddings": 2048,
            "use_parallel_residual": True,
            "tie_word_embeddings": False,
        },
    ),
}

KNOWN_MODELS: tuple[KnownModel, ...] = tuple(
    KnownModel(id_, title, source, MappingProxyType(dict(config))) for id_, (title, source, config) in _TABLE.items()
)
KNOWN_BY_ID: Mapping[str, KnownModel] = MappingProxyType({m.id: m for m in KNOWN_MODELS})


def known_model(model_id: str) -> KnownModel:
    """The built-in model ``model_id``; an unknown id is a :class:`ModelConfigError` listing the ids."""
    model = KNOWN_BY_ID.get(model_id)
    if model is None:
        shown = repr(model_id[:40]) + ("…" if len(model_id) > 40 else "")
        raise ModelConfigError(f"no built-in model {shown}; built-in: {', '.join(KNOWN_BY_ID)}", "model")
    return model
