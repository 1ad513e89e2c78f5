"""Reading Hugging Face ``config.json`` dicts: every family, its defaults, and every refusal."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.ledger.models.architecture import BOUNDS, FAMILIES, Architecture, ModelConfigError
from app.ledger.models.known import KNOWN_MODELS, KnownModel, known_model
from app.ledger.models.readers import FAMILY_KEYS, architecture_from_config
from tests.support.model_strategies import configs

LLAMA_7B: dict[str, object] = dict(known_model("llama-2-7b").config)


def test_llama_reads_the_published_config() -> None:
    arch = architecture_from_config(LLAMA_7B)
    assert arch == Architecture(
        family="llama",
        hidden=4096,
        layers=32,
        heads=32,
        kv_heads=32,
        head_dim=128,  # 4096 ÷ 32: no head_dim key in the Llama 2 config
        intermediate=11008,
        vocab=32000,
        tied_embeddings=False,
        max_positions=4096,
    )


def test_optional_keys_take_the_hugging_face_defaults() -> None:
    """No num_key_value_heads → MHA (kv = heads); no tie_word_embeddings → untied; no
    max_position_embeddings → LlamaConfig's 2,048; no attention_bias / mlp_bias → none."""
    config = {k: v for k, v in LLAMA_7B.items() if k not in {"num_key_value_heads", "tie_word_embeddings"}}
    del config["max_position_embeddings"]
    arch = architecture_from_config(config)
    assert (arch.kv_heads, arch.tied_embeddings, arch.max_positions) == (32, False, 2048)
    assert (arch.qkv_bias, arch.o_bias, arch.mlp_bias) == (False, False, False)


def test_null_optional_keys_are_absent() -> None:
    arch = architecture_from_config({**LLAMA_7B, "num_key_value_heads": None, "head_dim": None})
    assert (arch.kv_heads, arch.head_dim) == (32, 128)


def test_explicit_head_dim_wins() -> None:
    """Some configs set head_dim apart from hidden ÷ heads (e.g. 5120 ÷ 32 = 160 but head_dim 128)."""
    arch = architecture_from_config({**LLAMA_7B, "hidden_size": 5120, "head_dim": 128})
    assert (arch.head_dim, arch.q_width) == (128, 4096)


def test_llama_attention_and_mlp_bias_flags() -> None:
    arch = architecture_from_config({**LLAMA_7B, "attention_bias": True, "mlp_bias": True})
    assert (arch.qkv_bias, arch.o_bias, arch.mlp_bias) == (True, True, True)


def test_qwen2_always_has_qkv_bias_and_reads_tying() -> None:
    arch = known_model("qwen2-0.5b").architecture()
    assert (arch.qkv_bias, arch.o_bias, arch.mlp_bias, arch.tied_embeddings) == (True, False, False, True)
    assert (arch.heads, arch.kv_heads, arch.head_dim) == (14, 2, 64)  # 896 ÷ 14 = 64


def test_mixtral_reads_experts() -> None:
    arch = known_model("mixtral-8x7b-v0.1").architecture()
    assert (arch.experts, arch.experts_per_token, arch.kv_heads) == (8, 2, 8)


def test_gpt2_defaults() -> None:
    """n_inner absent → 4 × 768 = 3,072; tie_word_embeddings defaults to true; learned positions."""
    arch = known_model("gpt2").architecture()
    assert (arch.intermediate, arch.tied_embeddings, arch.learned_positions, arch.max_positions) == (
        3072,
        True,
        True,
        1024,
    )
    assert (arch.norm, arch.mlp, arch.qkv_bias, arch.o_bias, arch.mlp_bias) == ("layernorm", "gelu", True, True, True)
    assert architecture_from_config({**known_model("gpt2").config, "n_inner": 1000}).intermediate == 1000


def test_gpt_neox_defaults() -> None:
    arch = known_model("gpt-neox-20b").architecture()
    assert (arch.tied_embeddings, arch.parallel_residual, arch.learned_positions) == (False, True, False)
    assert (arch.norm, arch.qkv_bias, arch.o_bias, arch.mlp_bias) == ("layernorm", True, True, True)
    assert (arch.head_dim, arch.intermediate) == (96, 24576)  # 6144 ÷ 64


def test_unknown_keys_are_ignored() -> None:
    assert architecture_from_config({**LLAMA_7B, "rope_theta": 10000, "anything": [1]}) == architecture_from_config(
        LLAMA_7B
    )


@pytest.mark.parametrize("model", KNOWN_MODELS, ids=lambda m: m.id)
def test_every_known_config_reads(model: KnownModel) -> None:
    assert model.architecture().family == model.config["model_type"]
    assert model.source.startswith("https://huggingface.co/")
    with pytest.raises(TypeError):
        model.config["hidden_size"] = 1  # type: ignore[index]  # the table is read-only


# --- refusals -------------------------------------------------------------------------------


def test_unknown_model_type_lists_the_supported_families() -> None:
    with pytest.raises(ModelConfigError) as caught:
        architecture_from_config({"model_type": "bert", "hidden_size": 768})
    message = str(caught.value)
    assert "'bert'" in message
    assert "not supported" in message
    for family in FAMILIES:
        assert family in message
    assert caught.value.key == "model_type"


def test_missing_model_type_names_it_and_lists_families() -> None:
    with pytest.raises(ModelConfigError, match=r"missing required key 'model_type'.*llama"):
        architecture_from_config({"hidden_size": 4096})


def test_a_long_unknown_model_type_is_cut_short() -> None:
    with pytest.raises(ModelConfigError) as caught:
        architecture_from_config({"model_type": "x" * 10_000})
    assert len(str(caught.value)) < 240  # the list of supported families, and no more of the 10,000 characters


@pytest.mark.parametrize(
    ("model_type", "config", "key"),
    [
        ("llama", LLAMA_7B, "hidden_size"),
        ("llama", LLAMA_7B, "num_hidden_layers"),
        ("llama", LLAMA_7B, "num_attention_heads"),
        ("llama", LLAMA_7B, "intermediate_size"),
        ("llama", LLAMA_7B, "vocab_size"),
        ("mixtral", dict(known_model("mixtral-8x7b-v0.1").config), "num_local_experts"),
        ("mixtral", dict(known_model("mixtral-8x7b-v0.1").config), "num_experts_per_tok"),
        ("gpt2", dict(known_model("gpt2").config), "n_embd"),
        ("gpt2", dict(known_model("gpt2").config), "n_positions"),
        ("gpt_neox", dict(known_model("gpt-neox-20b").config), "intermediate_size"),
    ],
)
def test_a_missing_required_key_is_named(model_type: str, config: dict[str, object], key: str) -> None:
    broken = {k: v for k, v in config.items() if k != key}
    with pytest.raises(ModelConfigError, match=f"missing required key '{key}' for model_type '{model_type}'") as caught:
        architecture_from_config(broken)
    assert caught.value.key == key


@pytest.mark.parametrize(
    ("value", "says"),
    [("4096", "got str"), (4096.0, "got float"), (True, "got true/false"), (None, "got null"), ([4096], "got list")],
)
def test_a_non_integer_is_refused_by_name(value: object, says: str) -> None:
    with pytest.raises(ModelConfigError, match=f"'hidden_size' must be an integer, {says}"):
        architecture_from_config({**LLAMA_7B, "hidden_size": value})


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("num_hidden_layers", 0),
        ("num_hidden_layers", 1025),
        ("hidden_size", 131_073),
        ("vocab_size", 2**22 + 1),
        ("vocab_size", -1),
        ("intermediate_size", 10**100),
        ("num_key_value_heads", 0),
    ],
)
def test_out_of_bounds_values_are_refused_by_name(key: str, value: int) -> None:
    with pytest.raises(ModelConfigError, match=f"'{key}' = .* is out of bounds") as caught:
        architecture_from_config({**LLAMA_7B, key: value})
    assert caught.value.key == key
    assert len(str(caught.value)) < 120  # a googol is described, not printed


def test_experts_are_bounded() -> None:
    mixtral = dict(known_model("mixtral-8x7b-v0.1").config)
    with pytest.raises(ModelConfigError, match="'num_local_experts' = 1,025 is out of bounds"):
        architecture_from_config({**mixtral, "num_local_experts": 1025})
    with pytest.raises(ModelConfigError, match="'num_local_experts' must be at least 1"):
        architecture_from_config({**mixtral, "num_local_experts": 0})
    with pytest.raises(ModelConfigError, match="'num_experts_per_tok' = 9 must be 1"):
        architecture_from_config({**mixtral, "num_experts_per_tok": 9})


def test_grouped_query_heads_must_divide() -> None:
    with pytest.raises(ModelConfigError, match="not a multiple of 'num_key_value_heads'"):
        architecture_from_config({**LLAMA_7B, "num_key_value_heads": 5})


def test_hidden_must_split_into_heads_without_head_dim() -> None:
    with pytest.raises(ModelConfigError, match="'hidden_size' = 4,097 is not a multiple"):
        architecture_from_config({**LLAMA_7B, "hidden_size": 4097})
    with pytest.raises(ModelConfigError, match="'n_embd' = 770 is not a multiple of 'n_head' = 12"):
        architecture_from_config({**known_model("gpt2").config, "n_embd": 770})


def test_booleans_must_be_booleans() -> None:
    with pytest.raises(ModelConfigError, match="'tie_word_embeddings' must be true or false"):
        architecture_from_config({**LLAMA_7B, "tie_word_embeddings": "false"})


def test_a_config_must_be_an_object() -> None:
    with pytest.raises(ModelConfigError, match="must be a JSON object"):
        architecture_from_config([("model_type", "llama")])  # type: ignore[arg-type]
    with pytest.raises(ModelConfigError, match="'model_type' must be text"):
        architecture_from_config({"model_type": 7})


def test_an_unknown_built_in_id_lists_the_ids() -> None:
    with pytest.raises(ModelConfigError, match=r"no built-in model 'llama-9b'; built-in: llama-2-7b, .*gpt-neox-20b"):
        known_model("llama-9b")


def test_a_hand_built_architecture_is_validated_too() -> None:
    good = known_model("llama-2-7b").architecture()
    bad_values: list[tuple[str, object]] = [
        ("layers", 0),
        ("layers", 2000),
        ("hidden", True),
        ("family", "bert"),
        ("kv_heads", 5),
        ("experts", 8),
        ("experts_per_token", 1),
        ("norm", "batchnorm"),
        ("tied_embeddings", 1),
    ]
    for field, bad in bad_values:
        with pytest.raises(ModelConfigError):
            dataclasses.replace(good, **{field: bad})  # type: ignore[arg-type]
    mixtral = known_model("mixtral-8x7b-v0.1").architecture()
    with pytest.raises(ModelConfigError, match="experts_per_token"):
        dataclasses.replace(mixtral, experts_per_token=0)
    with pytest.raises(ModelConfigError, match="heads × head_dim"):
        dataclasses.replace(known_model("gpt2").architecture(), head_dim=32)


@given(
    key=st.sampled_from(
        [
            ("num_hidden_layers", "layers"),
            ("hidden_size", "hidden"),
            ("vocab_size", "vocab"),
            ("intermediate_size", "intermediate"),
            ("num_attention_heads", "heads"),
        ]
    ),
    data=st.data(),
)
def test_any_value_outside_the_bounds_is_refused(key: tuple[str, str], data: st.DataObject) -> None:
    """Below the minimum or above the maximum, up to absurd sizes: always a named refusal."""
    config_key, bound = key
    lo, hi = BOUNDS[bound]
    value = data.draw(st.one_of(st.integers(max_value=lo - 1), st.integers(min_value=hi + 1)))
    with pytest.raises(ModelConfigError) as caught:
        architecture_from_config({**LLAMA_7B, config_key: value})
    assert caught.value.key == config_key


class _Recording(dict[str, object]):
    """A config that remembers every key the reader asks about."""

    def __init__(self, config: dict[str, object]) -> None:
        super().__init__(config)
        self.asked: set[str] = set()

    def __contains__(self, key: object) -> bool:
        self.asked.add(str(key))
        return super().__contains__(key)

    def __getitem__(self, key: str) -> object:
        self.asked.add(key)
        return super().__getitem__(key)

    def get(self, key: str, default: object = None) -> object:
        self.asked.add(key)
        return super().get(key, default)


@given(configs())
def test_each_family_reads_exactly_its_declared_keys(config: dict[str, object]) -> None:
    """FAMILY_KEYS is what compaction keeps: a key the reader consults but the list lacks would be
    dropped from links, and a listed key the reader never checks would travel unchecked."""
    recording = _Recording(config)
    architecture_from_config(recording)
    assert recording.asked == set(FAMILY_KEYS[str(config["model_type"])])  # type: ignore[index]


def test_a_sliding_window_as_transformers_reads_it() -> None:
    """MistralConfig (transformers 5.23.0) takes sliding_window = 4,096 when the key is absent, none when it is
    null; MixtralConfig none when absent. 0 is how the lab's links spell null."""
    mistral = {k: v for k, v in known_model("mistral-7b-v0.1").config.items() if k != "sliding_window"}
    assert architecture_from_config(mistral).sliding_window == 4096
    assert architecture_from_config({**mistral, "sliding_window": None}).sliding_window == 0
    assert architecture_from_config({**mistral, "sliding_window": 0}).sliding_window == 0
    assert architecture_from_config({**mistral, "sliding_window": 2048}).sliding_window == 2048
    assert known_model("mistral-small-24b").architecture().sliding_window == 0  # published null
    assert known_model("mixtral-8x7b-v0.1").architecture().sliding_window == 0
    with pytest.raises(ModelConfigError) as caught:
        architecture_from_config({**mistral, "sliding_window": -1})
    assert caught.value.key == "sliding_window"


def test_qwen3_reads_its_own_defaults() -> None:
    """Qwen3Config (transformers 5.23.0): head_dim 128 when absent (not hidden ÷ heads), no attention bias, per-head
    q/k norms; a sliding window switched on is refused by name."""
    qwen3 = {k: v for k, v in known_model("qwen3-0.6b").config.items() if k not in ("head_dim", "attention_bias")}
    arch = architecture_from_config(qwen3)
    assert (arch.head_dim, arch.q_width, arch.hidden, arch.qk_norm, arch.qkv_bias) == (128, 2048, 1024, "head", False)
    assert architecture_from_config({**qwen3, "attention_bias": True}).o_bias
    with pytest.raises(ModelConfigError) as caught:
        architecture_from_config({**qwen3, "use_sliding_window": True})
    assert caught.value.key == "use_sliding_window"


def test_phi3_reads_fused_projections_and_refuses_a_reached_window() -> None:
    """Phi3Config (transformers 5.23.0): fused qkv_proj and gate_up_proj; a sliding window the context never reaches
    (Phi-3.5-mini's 262,144 over 131,072 positions) is none, a shorter one (Phi-3-mini-4k's 2,047 over 4,096) is
    refused by name; a null one is none."""
    phi = dict(known_model("phi-3.5-mini").config)
    arch = architecture_from_config(phi)
    assert (arch.fused, arch.sliding_window, arch.qkv_bias) == (True, 0, False)
    assert architecture_from_config({**phi, "sliding_window": None}).sliding_window == 0
    with pytest.raises(ModelConfigError) as caught:
        architecture_from_config({**phi, "max_position_embeddings": 4096, "sliding_window": 2047})
    assert caught.value.key == "sliding_window"


def test_qwen3_moe_reads_its_experts_and_refuses_what_it_does_not_model() -> None:
    """Qwen3MoeConfig (transformers 5.23.0): experts of moe_intermediate_size (intermediate_size sizes only dense
    layers, and is not read), head_dim hidden ÷ heads when absent, per-head q/k norms, norm_topk_prob; dense layers
    among the sparse (decoder_sparse_step ≠ 1, mlp_only_layers), the router's auxiliary loss and a sliding window are
    refused by name, as is a token routed to more experts than there are."""
    config = dict(known_model("qwen3-30b-a3b").config)
    arch = architecture_from_config(config)
    assert (arch.experts, arch.experts_per_token, arch.intermediate, arch.head_dim) == (128, 8, 768, 128)
    assert (arch.qk_norm, arch.topk_renorm, arch.fused_experts) == ("head", True, True)
    assert architecture_from_config({**config, "intermediate_size": 1}) == arch
    without = {k: v for k, v in config.items() if k not in ("head_dim", "norm_topk_prob", "mlp_only_layers")}
    assert (architecture_from_config(without).head_dim, architecture_from_config(without).topk_renorm) == (64, False)
    for key, value in [("decoder_sparse_step", 2), ("mlp_only_layers", [0, 47]), ("output_router_logits", True),
                       ("use_sliding_window", True), ("num_experts_per_tok", 129), ("num_experts", 0),
                       ("norm_topk_prob", 1), ("moe_intermediate_size", 0)]:  # fmt: skip
        with pytest.raises(ModelConfigError) as caught:
            architecture_from_config({**config, key: value})
        assert caught.value.key == key, (key, caught.value)
    with pytest.raises(ModelConfigError, match="missing required key 'moe_intermediate_size'"):
        architecture_from_config({k: v for k, v in config.items() if k != "moe_intermediate_size"})


def test_gemma2_reads_its_own_defaults_and_soft_caps() -> None:
    """Gemma2Config (transformers 5.23.0): head_dim 256 and tied embeddings when absent, four norms a layer, the
    scores and the logits soft-capped unless the key is null; a soft-cap that is not null or a positive number is
    refused by name. A link spells a soft-cap whole (its value sizes nothing) and reads back the same model."""
    from app.ledger.models.reference import compact, config_of, resolve

    config = dict(known_model("gemma-2-9b").config)
    arch = architecture_from_config({k: v for k, v in config.items() if k not in ("head_dim", "tie_word_embeddings")})
    assert (arch.head_dim, arch.tied_embeddings, arch.sandwich_norms, arch.eager_attention) == (256, True, True, True)
    assert (arch.attn_softcap, arch.logit_softcap) == (True, True)
    off = architecture_from_config({**config, "attn_logit_softcapping": None, "final_logit_softcapping": None})
    assert (off.attn_softcap, off.logit_softcap) == (False, False)
    for key in ("attn_logit_softcapping", "final_logit_softcapping"):
        for bad in (0, -1.5, True, "50", 10_001):
            with pytest.raises(ModelConfigError) as caught:
                architecture_from_config({**config, key: bad})
            assert caught.value.key == key, (key, bad)
    link = compact({**config, "attn_logit_softcapping": 49.5})
    assert "attn_logit_softcapping=50;" in link and resolve(link).architecture == arch
    assert config_of(link)["final_logit_softcapping"] == 30


def test_qwen3_moe_reads_num_local_experts_as_num_experts_alias() -> None:
    """Qwen3MoeConfig's attribute_map: the Hub's files say num_experts, a config transformers writes says
    num_local_experts; either is read, both only when they agree (a disagreement names the alias)."""
    config = dict(known_model("qwen3-30b-a3b").config)
    written = {k: v for k, v in config.items() if k != "num_experts"} | {"num_local_experts": 128}
    assert architecture_from_config(written) == architecture_from_config(config)
    assert architecture_from_config({**config, "num_local_experts": 128}).experts == 128
    with pytest.raises(ModelConfigError) as caught:
        architecture_from_config({**config, "num_local_experts": 64})
    assert caught.value.key == "num_local_experts"


def test_gemma3_reads_its_layer_pattern_and_window() -> None:
    """Gemma3TextConfig (transformers 5.23.0): layer_types, when given, must be every N-th layer global (N read from
    the list; any other list refused by name), else sliding_window_pattern (default 6); the window 4,096 when absent,
    none when null; a soft-cap other than null refused; a link carries the pattern, not the list."""
    from app.ledger.models.reference import compact, resolve

    config = dict(known_model("gemma-3-1b").config)
    arch = architecture_from_config(config)
    assert (arch.global_every, arch.sliding_window, arch.qk_norm, arch.sandwich_norms) == (6, 512, "head", True)
    kinds = ["sliding_attention" if (i + 1) % 4 else "full_attention" for i in range(26)]
    listed = {k: v for k, v in config.items() if k != "sliding_window_pattern"} | {"layer_types": kinds}
    assert architecture_from_config(listed).global_every == 4
    assert resolve(compact(listed)).architecture == architecture_from_config(listed)
    assert "sliding_window_pattern=4" in compact(listed) and "layer_types" not in compact(listed)
    assert architecture_from_config({k: v for k, v in config.items() if k != "sliding_window"}).sliding_window == 4096
    assert architecture_from_config({**config, "sliding_window": None}).sliding_window == 0
    for key, value in [("layer_types", kinds[:-1]), ("layer_types", ["full_attention", *kinds[1:]]),
                       ("layer_types", "sliding_attention"), ("sliding_window_pattern", 0),
                       ("attn_logit_softcapping", 50.0), ("final_logit_softcapping", 30)]:  # fmt: skip
        with pytest.raises(ModelConfigError) as caught:
            architecture_from_config({**config, key: value})
        assert caught.value.key == key, (key, value)
