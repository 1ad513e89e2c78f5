"""Parameter inventories against published counts, hand-counted layers, and wrapped units.

The published counts below are the facts the built-in configs must reproduce; each carries its
source. Every other expected number is worked out by hand in the test or its docstring.
"""

from __future__ import annotations

import dataclasses
import math
from typing import NamedTuple

import pytest
from hypothesis import given

from app.ledger.models.architecture import Architecture
from app.ledger.models.inventory import inventory
from app.ledger.models.known import KNOWN_BY_ID, KNOWN_MODELS, KnownModel, known_model
from app.ledger.models.readers import architecture_from_config
from tests.support.model_strategies import architectures


class Published(NamedTuple):
    model_id: str
    params: int
    source: str


PUBLISHED: tuple[Published, ...] = (
    Published(
        "llama-2-7b",
        6_738_415_616,
        "transformers LlamaForCausalLM.num_parameters() for meta-llama/Llama-2-7b-hf (Hub: 6.74B)",
    ),
    Published(
        "llama-2-13b",
        13_015_864_320,
        "transformers LlamaForCausalLM.num_parameters() for meta-llama/Llama-2-13b-hf (Hub: 13.0B)",
    ),
    Published(
        "llama-2-70b",
        68_976_648_192,
        "transformers LlamaForCausalLM.num_parameters() for meta-llama/Llama-2-70b-hf (Hub: 69.0B)",
    ),
    Published(
        "mistral-7b-v0.1",
        7_241_732_096,
        "Hugging Face Hub safetensors parameter total for mistralai/Mistral-7B-v0.1 (7.24B)",
    ),
    Published(
        "mixtral-8x7b-v0.1",
        46_702_792_704,
        "Hugging Face Hub safetensors parameter total for mistralai/Mixtral-8x7B-v0.1 (46.7B)",
    ),
    Published(
        "qwen2-0.5b",
        494_032_768,
        "Hugging Face Hub safetensors parameter total for Qwen/Qwen2-0.5B (290 tensors, tied head; Hub: 0.49B)",
    ),
    Published(
        "qwen2-7b",
        7_615_616_512,
        "Hugging Face Hub safetensors parameter total for Qwen/Qwen2-7B (7.62B)",
    ),
    Published(
        "llama-3.1-8b",
        8_030_261_248,
        "transformers 5.23.0 LlamaForCausalLM.num_parameters() on the meta device "
        "for meta-llama/Llama-3.1-8B (Hub: 8.03B)",
    ),
    Published(
        "llama-3.1-70b",
        70_553_706_496,
        "transformers 5.23.0 LlamaForCausalLM.num_parameters() on the meta device "
        "for meta-llama/Llama-3.1-70B (Hub: 70.6B)",
    ),
    Published(
        "llama-3.1-405b",
        405_853_388_800,
        "transformers 5.23.0 LlamaForCausalLM.num_parameters() on the meta device "
        "for meta-llama/Llama-3.1-405B (Hub: 406B)",
    ),
    Published(
        "llama-3.2-1b",
        1_235_814_400,
        "transformers 5.23.0 LlamaForCausalLM.num_parameters() on the meta device "
        "for meta-llama/Llama-3.2-1B (Hub: 1.24B; tied head)",
    ),
    Published(
        "llama-3.2-3b",
        3_212_749_824,
        "transformers 5.23.0 LlamaForCausalLM.num_parameters() on the meta device "
        "for meta-llama/Llama-3.2-3B (Hub: 3.21B; tied head)",
    ),
    Published(
        "llama-3.3-70b",
        70_553_706_496,
        "transformers 5.23.0 LlamaForCausalLM.num_parameters() on the meta device "
        "for meta-llama/Llama-3.3-70B-Instruct (Hub: 70.6B)",
    ),
    Published(
        "qwen2.5-7b",
        7_615_616_512,
        "transformers 5.23.0 Qwen2ForCausalLM.num_parameters() on the meta device for Qwen/Qwen2.5-7B (Hub: 7.62B)",
    ),
    Published(
        "qwen2.5-72b",
        72_706_203_648,
        "transformers 5.23.0 Qwen2ForCausalLM.num_parameters() on the meta device for Qwen/Qwen2.5-72B (Hub: 72.7B)",
    ),
    Published(
        "qwen3-0.6b",
        596_049_920,
        "transformers 5.23.0 Qwen3ForCausalLM.num_parameters() on the meta device for Qwen/Qwen3-0.6B-Base "
        "(model card: 0.6B, 0.44B non-embedding = 440,467,456 here; tied head)",
    ),
    Published(
        "qwen3-8b",
        8_190_735_360,
        "transformers 5.23.0 Qwen3ForCausalLM.num_parameters() on the meta device for Qwen/Qwen3-8B-Base "
        "(model card: 8.2B, 6.95B non-embedding = 6,946,075,648 here)",
    ),
    Published(
        "qwen3-32b",
        32_762_123_264,
        "transformers 5.23.0 Qwen3ForCausalLM.num_parameters() on the meta device for Qwen/Qwen3-32B "
        "(model card: 32.8B, 31.2B non-embedding = 31,206,298,624 here)",
    ),
    Published(
        "gemma-2-2b",
        2_614_341_888,
        "transformers 5.23.0 Gemma2ForCausalLM.num_parameters() on the meta device for google/gemma-2-2b "
        "(tied: the head is the embedding; model card: 2.6B)",
    ),
    Published(
        "gemma-2-9b",
        9_241_705_984,
        "transformers 5.23.0 Gemma2ForCausalLM.num_parameters() on the meta device for google/gemma-2-9b "
        "(tied; model card: 9.24B)",
    ),
    Published(
        "gemma-2-27b",
        27_227_128_320,
        "transformers 5.23.0 Gemma2ForCausalLM.num_parameters() on the meta device for google/gemma-2-27b "
        "(tied; model card: 27.2B)",
    ),
    Published(
        "gemma-3-1b",
        999_885_952,
        "transformers 5.23.0 Gemma3ForCausalLM.num_parameters() on the meta device for google/gemma-3-1b-pt "
        "(tied; model card: 1B)",
    ),
    Published(
        "gemma-3-4b",
        3_880_263_168,
        "transformers 5.23.0 Gemma3ForCausalLM.num_parameters() of google/gemma-3-4b-pt's text_config on the meta "
        "device (the language model of the 4.3B model card's total, its SigLIP vision tower apart)",
    ),
    Published(
        "gemma-3-12b",
        11_766_034_176,
        "transformers 5.23.0 Gemma3ForCausalLM.num_parameters() of google/gemma-3-12b-pt's text_config on the meta "
        "device (the language model of the 12.2B model card's total, its vision tower apart)",
    ),
    Published(
        "gemma-3-27b",
        27_009_346_304,
        "transformers 5.23.0 Gemma3ForCausalLM.num_parameters() of google/gemma-3-27b-pt's text_config on the meta "
        "device (the language model of the 27.4B model card's total, its vision tower apart)",
    ),
    Published(
        "qwen3-30b-a3b",
        30_532_122_624,
        "transformers 5.23.0 Qwen3MoeForCausalLM.num_parameters() on the meta device for Qwen/Qwen3-30B-A3B "
        "(model card: 30.5B total, 3.3B activated, 29.9B non-embedding = 29,909,792,768 here)",
    ),
    Published(
        "qwen3-235b-a22b",
        235_093_634_560,
        "transformers 5.23.0 Qwen3MoeForCausalLM.num_parameters() on the meta device for Qwen/Qwen3-235B-A22B "
        "(model card: 235B total, 22B activated, 234B non-embedding = 233,848,974,848 here)",
    ),
    Published(
        "deepseek-v3",
        671_026_404_352,
        "transformers 5.23.0 DeepseekV3ForCausalLM.num_parameters() on the meta device for deepseek-ai/DeepSeek-V3 "
        "(technical report: 671B total, 37B activated; the Hub's 685B adds the MTP module, which transformers does "
        "not build)",
    ),
    Published(
        "phi-3-mini",
        3_821_079_552,
        "transformers 5.23.0 Phi3ForCausalLM.num_parameters() on the meta device for "
        "microsoft/Phi-3-mini-128k-instruct (model card: 3.8B)",
    ),
    Published(
        "phi-3.5-mini",
        3_821_079_552,
        "transformers 5.23.0 Phi3ForCausalLM.num_parameters() on the meta device for "
        "microsoft/Phi-3.5-mini-instruct (model card: 3.8B)",
    ),
    Published(
        "phi-4",
        14_659_507_200,
        "transformers 5.23.0 Phi3ForCausalLM.num_parameters() on the meta device for microsoft/phi-4 "
        "(model card: 14B; Hub: 14.7B)",
    ),
    Published(
        "olmo-2-7b",
        7_298_617_344,
        "transformers 5.23.0 Olmo2ForCausalLM.num_parameters() on the meta device for allenai/OLMo-2-1124-7B "
        "(Hub: 7.3B)",
    ),
    Published(
        "olmo-2-13b",
        13_716_198_400,
        "transformers 5.23.0 Olmo2ForCausalLM.num_parameters() on the meta device for allenai/OLMo-2-1124-13B "
        "(Hub: 13.7B)",
    ),
    Published(
        "mistral-small-24b",
        23_572_403_200,
        "transformers 5.23.0 MistralForCausalLM.num_parameters() on the meta device "
        "for mistralai/Mistral-Small-24B-Base-2501 (Hub: 23.6B)",
    ),
    Published(
        "mixtral-8x22b",
        140_630_071_296,
        "transformers 5.23.0 MixtralForCausalLM.num_parameters() on the meta device "
        "for mistralai/Mixtral-8x22B-v0.1 (Hub: 141B)",
    ),
    Published(
        "gpt2",
        124_439_808,
        "transformers GPT2LMHeadModel.num_parameters() for openai-community/gpt2; the paper's '117M' was "
        "corrected to 124M in openai/gpt-2's README (the Hub's 137M counts the 12 causal-mask buffers)",
    ),
    Published(
        "gpt-neox-20b",
        20_554_567_680,
        "EleutherAI/gpt-neox-20b model card, hyperparameter table: n_parameters 20554567680 "
        "(its n_vocab 50257 is the tokenizer's; the embedding is padded to 50,432 rows)",
    ),
)


def test_every_known_model_has_a_published_count() -> None:
    assert {p.model_id for p in PUBLISHED} == set(KNOWN_BY_ID)


@pytest.mark.parametrize("fact", PUBLISHED, ids=lambda p: p.model_id)
def test_known_models_match_their_published_count(fact: Published) -> None:
    inv = inventory(known_model(fact.model_id).architecture())
    assert inv.params == fact.params, fact.source
    assert sum(t.numel for t in inv.tensors()) == fact.params


# --- hand-counted layers ----------------------------------------------------------------------


def test_llama_2_7b_by_hand() -> None:
    """Layer: q, k, v, o 4 × 4096² = 67,108,864; gate, up, down 3 × 4096 × 11008 = 135,266,304;
    two RMSNorm weights 2 × 4096 = 8,192 → 202,383,360. Model: 32 × 202,383,360 = 6,476,267,520
    + embed 32000 × 4096 = 131,072,000 + final norm 4,096 + untied head 131,072,000."""
    inv = inventory(known_model("llama-2-7b").architecture())
    assert inv.units[1].params == 202_383_360
    assert inv.unit_sizes()[0] == ("embed", 131_072_000)
    assert inv.unit_sizes()[-1] == ("final", 131_076_096)
    assert inv.params == 6_476_267_520 + 131_072_000 + 4_096 + 131_072_000
    assert (inv.largest_unit.name, inv.largest_unit.params) == ("layers.0", 202_383_360)


def test_llama_2_70b_grouped_query_attention() -> None:
    """k and v are 8 KV heads × 128 = 1,024 wide: 2 × 8192² + 2 × 1024 × 8192 + 3 × 8192 × 28672
    + 2 × 8192 = 134,217,728 + 16,777,216 + 704,643,072 + 16,384 = 855,654,400 per layer."""
    inv = inventory(known_model("llama-2-70b").architecture())
    assert inv.units[1].params == 855_654_400
    shapes = {t.name: t.shape for t in inv.tensors()}
    assert shapes["model.layers.79.self_attn.k_proj.weight"] == (1024, 8192)
    assert shapes["model.layers.0.self_attn.q_proj.weight"] == (8192, 8192)
    assert shapes["model.layers.0.mlp.down_proj.weight"] == (8192, 28672)
    assert len(inv.units) == 82  # embed + 80 layers + final


def test_mixtral_experts_and_router() -> None:
    """Per layer: attention 2 × 4096² + 2 × 1024 × 4096 = 41,943,040; 8 experts × 3 × 4096 × 14336
    = 1,409,286,144; router 8 × 4096 = 32,768; norms 8,192 → 1,451,270,144. Model: 32 × that
    = 46,440,644,608 + 2 × 131,072,000 + 4,096 = 46,702,792,704."""
    inv = inventory(known_model("mixtral-8x7b-v0.1").architecture())
    assert inv.units[1].params == 1_451_270_144
    names = {t.name: t.shape for t in inv.tensors()}  # as transformers 5.23.0 holds them: the experts fused
    assert names["model.layers.3.mlp.gate.weight"] == (8, 4096)
    assert names["model.layers.3.mlp.experts.gate_up_proj"] == (8, 2 * 14336, 4096)
    assert names["model.layers.3.mlp.experts.down_proj"] == (8, 4096, 14336)
    assert inv.tensor_count == 3 + 32 * (4 + 1 + 2 + 2)  # 291


def test_qwen2_biases_and_tied_head() -> None:
    """Qwen2-0.5B layer: q 896² + 896, k and v 128 × 896 + 128 each, o 896² (no bias):
    1,836,160; MLP 3 × 896 × 4864 = 13,074,432; norms 1,792 → 14,912,384. The head is tied:
    24 × 14,912,384 + 151936 × 896 (once) + 896 = 357,897,216 + 136,134,656 + 896."""
    inv = inventory(known_model("qwen2-0.5b").architecture())
    assert inv.units[1].params == 14_912_384
    assert inv.params == 357_897_216 + 136_134_656 + 896
    names = [t.name for t in inv.tensors()]
    assert "model.layers.0.self_attn.q_proj.bias" in names
    assert "model.layers.0.self_attn.o_proj.bias" not in names
    assert "lm_head.weight" not in names
    assert inv.tensor_count == 290  # the safetensors file of Qwen/Qwen2-0.5B holds 290 tensors


def test_gpt2_conv1d_shapes_and_positions() -> None:
    """GPT-2 layer: ln_1 2 × 768; c_attn 768 × 2304 + 2304; c_proj 768² + 768; ln_2 2 × 768;
    c_fc 768 × 3072 + 3072; c_proj 3072 × 768 + 768 → 7,087,872. Model: 12 × 7,087,872
    = 85,054,464 + wte 50257 × 768 = 38,597,376 + wpe 1024 × 768 = 786,432 + ln_f 1,536."""
    inv = inventory(known_model("gpt2").architecture())
    assert inv.units[1].params == 7_087_872
    assert inv.params == 85_054_464 + 38_597_376 + 786_432 + 1_536
    shapes = {t.name: t.shape for t in inv.tensors()}
    assert shapes["transformer.h.0.attn.c_attn.weight"] == (768, 2304)  # Conv1D: [in, out]
    assert shapes["transformer.h.11.mlp.c_proj.weight"] == (3072, 768)
    assert shapes["transformer.wpe.weight"] == (1024, 768)
    assert "lm_head.weight" not in shapes


def test_gpt_neox_20b_by_hand() -> None:
    """Layer: two LayerNorms 4 × 6144; query_key_value 3 × 6144² + 3 × 6144; dense 6144² + 6144;
    dense_h_to_4h 24576 × 6144 + 24576; dense_4h_to_h 6144 × 24576 + 6144 = 12h² + 13h with
    h = 6144 → 453,064,704. Model: 44 × that = 19,934,846,976 + embed_in and embed_out
    2 × 50432 × 6144 = 619,708,416 + final LayerNorm 12,288."""
    inv = inventory(known_model("gpt-neox-20b").architecture())
    assert inv.units[1].params == 12 * 6144**2 + 13 * 6144 == 453_064_704
    assert inv.params == 19_934_846_976 + 619_708_416 + 12_288
    assert inv.final.params == 50432 * 6144 + 2 * 6144
    assert {t.name for t in inv.final.tensors} == {
        "gpt_neox.final_layer_norm.weight",
        "gpt_neox.final_layer_norm.bias",
        "embed_out.weight",
    }


# --- the largest unit -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model_id", "name", "params"),
    [
        # 151936 × 896 = 136,134,656 (the tied embedding, used again as the head) vs a 14,912,384 layer
        ("qwen2-0.5b", "embed", 136_134_656),
        # wte 38,597,376 + wpe 786,432 = 39,383,808 vs a 7,087,872 layer
        ("gpt2", "embed", 39_383_808),
        # untied head 152064 × 3584 = 544,997,376 + final norm 3,584 vs a 233,057,792 layer
        ("qwen2-7b", "final", 545_000_960),
        # a layer (202,383,360) outweighs the embedding and the head (131,072,000 each)
        ("llama-2-7b", "layers.0", 202_383_360),
    ],
)
def test_the_largest_unit_may_be_the_embedding_or_the_head(model_id: str, name: str, params: int) -> None:
    inv = inventory(known_model(model_id).architecture())
    assert (inv.largest_unit.name, inv.largest_unit.params) == (name, params)
    assert inv.largest_unit.params == max(p for _, p in inv.unit_sizes())


def test_a_tie_goes_to_the_first_unit() -> None:
    """hidden 4, one head, one layer, intermediate 1: a layer is q, k, v, o 4 × 4² = 64 + MLP
    3 × 4 × 1 = 12 + norms 2 × 4 = 8 → 84. Vocab 17 untied: embed 17 × 4 = 68, final 68 + 4 = 72
    → the layer. Vocab 21 tied: embed 21 × 4 = 84 = the layer, final 4 → the embedding, first."""
    config: dict[str, object] = {
        "model_type": "llama",
        "hidden_size": 4,
        "num_attention_heads": 1,
        "num_hidden_layers": 1,
        "intermediate_size": 1,
        "vocab_size": 17,
    }
    small = inventory(architecture_from_config(config))
    assert small.unit_sizes() == (("embed", 68), ("layers.0", 84), ("final", 72))
    assert small.largest_unit.name == "layers.0"
    tie = inventory(architecture_from_config({**config, "vocab_size": 21, "tie_word_embeddings": True}))
    assert tie.unit_sizes() == (("embed", 84), ("layers.0", 84), ("final", 4))
    assert tie.largest_unit.name == "embed"


# --- structure and cost -----------------------------------------------------------------------


@given(architectures())
def test_the_total_is_the_sum_of_the_tensors_and_of_the_units(arch: Architecture) -> None:
    inv = inventory(arch)
    tensors = list(inv.tensors())
    assert inv.params == sum(t.numel for t in tensors) == sum(u.params for u in inv.units)
    assert inv.tensor_count == len(tensors)
    assert len({t.name for t in tensors}) == len(tensors)  # names are unique
    for t in tensors:
        assert t.numel == math.prod(t.shape) and all(d >= 1 for d in t.shape)
    assert [u.name for u in inv.units] == ["embed", *(f"layers.{k}" for k in range(arch.layers)), "final"]
    biggest = max(u.params for u in inv.units)
    assert inv.largest_unit.params == biggest
    assert inv.largest_unit.name == next(u.name for u in inv.units if u.params == biggest)  # first of equals


@given(architectures())
def test_a_tied_head_is_counted_once(arch: Architecture) -> None:
    """Tying removes exactly one vocab × hidden matrix from the count."""
    tied = inventory(dataclasses.replace(arch, tied_embeddings=True))
    untied = inventory(dataclasses.replace(arch, tied_embeddings=False))
    assert untied.params - tied.params == arch.vocab * arch.hidden


def test_the_largest_allowed_config_stays_cheap() -> None:
    """1,024 layers of 1,024 experts: one layer's nine tensors (the experts fused in two, as transformers holds
    them) are built once and shared by the 1,024 layer units, so the inventory holds a few dozen objects."""
    arch = architecture_from_config(
        {
            "model_type": "mixtral",
            "hidden_size": 131_072,
            "num_attention_heads": 1_024,
            "num_key_value_heads": 1,
            "num_hidden_layers": 1_024,
            "intermediate_size": 1_048_576,
            "vocab_size": 2**22,
            "num_local_experts": 1_024,
            "num_experts_per_tok": 1_024,
        }
    )
    inv = inventory(arch)
    h, i, e, kv = 131_072, 1_048_576, 1_024, 128  # kv width: 1 KV head × head_dim 128
    layer = 2 * h * h + 2 * kv * h + e * h + e * 3 * h * i + 2 * h
    assert inv.params == 1_024 * layer + 2 * 2**22 * h + h
    assert inv.tensor_count == 1 + 1_024 * (4 + 1 + 2 + 2) + 2
    assert len(inv.units[1].tensors) == 4 + 1 + 2 + 2


@pytest.mark.parametrize("model", KNOWN_MODELS, ids=lambda m: m.id)
def test_layer_units_share_one_tensor_tuple(model: KnownModel) -> None:
    """Bounded memory: a model of L identical layers holds one tuple of their tensors, not L copies
    (an 80-layer model's inventory stays the size of a 2-layer one's, plus L small unit records); a model of two
    kinds of layer (deepseek_v3) one tuple per kind."""
    inv = inventory(model.architecture())
    layers = inv.units[1:-1]
    for first, count, unit in inv.layer_kinds:
        assert all(u.tensors is unit.tensors for u in layers[first : first + count])
    assert sum(count for _, count, _ in inv.layer_kinds) == len(layers)
    assert layers[-1].prefix.endswith(f".{len(layers) - 1}.")
