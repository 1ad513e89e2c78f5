"""Frozen parameters (``trainable_params`` below ``params``, with ``frozen_bytes``): gradients, the master copy and
the optimizer states exist only for what trains; every parameter is still sharded and gathered. The figures are
hand-computed in each docstring; ``tests/trace/test_frozen_traced.py`` checks the rule against PEFT's LoRA under
Accelerate's FSDP2 on real code."""

from __future__ import annotations

import pytest

from app.ledger.estimate import estimate
from app.ledger.ledger import compute_ledger
from app.ledger.scenario import Scenario, ScenarioError, parse_scenario
from app.ledger.state.communication import communication
from app.ledger.state.host import host_ledger

# Llama 3.1 8B with PEFT LoRA r = 16 on every linear layer of its 32 decoder layers: 32 × 16 × (4096 + 4096 +
# 4096 + 1024 + 4096 + 1024 + 4096 + 4096 + 4096 + 14336 + 4096 + 14336 + 14336 + 4096) = 41,943,040 adapters
N = 8_030_261_248 + 41_943_040  # 8,072,204,288: PEFT's "all params"
T = 41_943_040  # its "trainable params"
F = N - T  # 8,030,261,248 frozen: the base model


def _lines(raw: dict[str, object], stage: int) -> dict[str, int]:
    s = parse_scenario({"params": N, "trainable_params": T, "dp": 8, **raw})
    return {line.tensor_class: line.bytes for line in compute_ledger(s, schedule=False).stages[stage].lines}


def test_under_accelerate_the_adapters_are_fp32_and_the_frozen_base_bf16() -> None:
    """hf-fsdp2, D = 8, stage 3: ⌈T ÷ 8⌉ = 5,242,880 and ⌈F ÷ 8⌉ = 1,003,782,656.
    parameters 5,242,880 × 4 + 1,003,782,656 × 2 = 2,028,536,832 B; gradients 5,242,880 × 4 = 20,971,520 B;
    AdamW 5,242,880 × 2 × 4 = 41,943,040 B; no master copy. Stage 0: T × 4 + F × 2 = 16,228,294,656 B of
    parameters, T × 4 of gradients."""
    assert _lines({"stack": "hf-fsdp2"}, 3) == {
        "parameters": 2_028_536_832, "gradients": 20_971_520, "master_weights": 0, "optimizer_states": 41_943_040,
    }  # fmt: skip
    stage0 = _lines({"stack": "hf-fsdp2"}, 0)
    assert (stage0["parameters"], stage0["gradients"]) == (16_228_294_656, T * 4)


def test_one_width_for_every_parameter_when_the_model_is_built_in_it() -> None:
    """The plain stack's seed layout (BF16 parameters and gradients, FP32 master and Adam): frozen_bytes follows
    param_bytes, so the parameters line is ⌈N ÷ 8⌉ × 2 = 2,018,051,072 B; gradients ⌈T ÷ 8⌉ × 2 = 10,485,760 B,
    master × 4 = 20,971,520 B, Adam × 8 = 41,943,040 B."""
    assert _lines({}, 3) == {
        "parameters": 2_018_051_072, "gradients": 10_485_760, "master_weights": 20_971_520,
        "optimizer_states": 41_943_040,
    }  # fmt: skip


def test_only_what_trains_is_reduced_and_every_parameter_gathered() -> None:
    """Stage 3, one micro batch: all-gathers move N × 2 B (forward and backward), the reduce-scatter T × 2 B."""
    s = parse_scenario({"params": N, "trainable_params": T, "dp": 8})
    terms = {t.what: t.buffer for t in communication(s, 3).terms}
    assert terms["reduce-scatter"] == T * 2
    assert terms["all-gather forward"] == terms["all-gather backward"] == N * 2


def test_the_host_offloads_and_saves_the_optimizer_of_what_trains() -> None:
    """Optimizer offload to the CPU at stage 3 (seed layout): master + Adam + FP32 gradients + the 16-bit gradient
    partition = ⌈T ÷ 8⌉ × (4 + 8 + 4 + 2) = 94,371,840 B per rank; full-rank0 saving: max(the model, T × 2 + F × 2
    = N × 2, the optimizer, T × (8 + 4)) = 16,144,408,576 B."""
    s = parse_scenario({"params": N, "trainable_params": T, "dp": 8, "offload_optimizer": "cpu",
                        "save_path": "full-rank0"})  # fmt: skip
    stage3 = host_ledger(s).stages[3]
    assert stage3.per_rank == 5_242_880 * 18 == 94_371_840
    assert stage3.save_peak == N * 2 == 16_144_408_576


def test_a_typed_trainable_count_takes_the_declared_peak_and_says_why() -> None:
    """A count alone does not say which units hold gradients: the declared peak, and the answer says so."""
    e = estimate(parse_scenario({"model": "llama-3.1-8b", "trainable_params": T}), with_kill_lists=False)
    peak = e.ledger.stages[3].peak
    assert peak.schedule is None and "which units hold gradients" in peak.why_declared


@pytest.mark.parametrize("model", ["llama-3.1-8b", "gemma-2-2b"])
@pytest.mark.parametrize(
    "trains", [{"lora_rank": 16}, {"frozen_layers": 8, "freeze_embed": 1}, {"frozen_modules": "self_attn"}]
)
def test_lora_and_frozen_layers_are_walked(model: str, trains: dict[str, int]) -> None:
    e = estimate(parse_scenario({"model": model, **trains}), with_kill_lists=False)
    assert e.ledger.stages[3].peak.schedule is not None


def test_lora_on_a_family_without_its_rules_takes_the_declared_peak() -> None:
    e = estimate(parse_scenario({"model": "gpt2", "lora_rank": 8}), with_kill_lists=False)
    peak = e.ledger.stages[3].peak
    assert peak.schedule is None and "walks it on the layers of" in peak.why_declared


def test_a_frozen_prefix_of_gemma3s_two_kinds_of_layer_is_walked_kind_by_kind() -> None:
    """Expanded K/V makes gemma3_text's global layers (5, 11, 17, 23 of 26) a second kind: frozen, each kind keeps
    less than the same kind trained, and the two frozen kinds differ."""
    run = {"model": "gemma-3-1b", "gqa": "expand", "seq_len": 2048, "frozen_layers": 12}
    e = estimate(parse_scenario(run), with_kill_lists=False)
    assert e.ledger.stages[3].peak.schedule is not None and e.model is not None
    a = e.model.activations
    kept = [a.kept(k) for k in range(a.layers)]
    assert kept[5] < kept[17] and kept[4] < kept[16] and kept[5] != kept[4]
    assert kept[0] == kept[10] and kept[5] == kept[11] and kept[12] == kept[16]


@pytest.mark.parametrize("raw", [{"params": 1_000, "trainable_params": 1_001}, {"trainable_params": "8B"}])
def test_more_trainable_than_all_parameters_is_refused_naming_the_field(raw: dict[str, object]) -> None:
    with pytest.raises(ScenarioError) as refused:
        parse_scenario(raw)
    assert [e.field for e in refused.value.errors] == ["trainable_params"]
    assert "larger than params" in str(refused.value)


def test_a_new_params_keeps_everything_training_unless_trainable_was_set() -> None:
    s = parse_scenario({})
    assert s.with_(params=1_000).trainable_params == 1_000
    frozen = parse_scenario({"trainable_params": 1_000})
    assert frozen.with_(params=2_000).trainable_params == 1_000


@pytest.mark.parametrize("trains", [{"lora_rank": 16}, {"frozen_layers": 4}])
def test_hpz_with_frozen_parameters_at_their_own_width_is_refused_naming_hpz(trains: dict[str, int]) -> None:
    """Accelerate keeps the frozen base in BF16 beside FP32 trained shards; ZeRO++'s secondary partition of such a
    split is not modelled (it made the stage-3 total exceed stage 2's): refused, as with a typed trainable count."""
    with pytest.raises(ScenarioError) as refused:
        parse_scenario({"model": "llama-3.1-8b", "stack": "hf-fsdp2", "dp": 8, "hpz": 2, **trains})
    assert [e.field for e in refused.value.errors] == ["hpz"]


def test_modules_frozen_by_name_leave_each_layer_the_rest_to_train() -> None:
    """Llama 3.1 8B, every layer's self_attn frozen: q 4096², k and v 1024 × 4096, o 4096² = 41,943,040 per layer,
    32 layers: 1,342,177,280 frozen. Only the rest reduce-scatters: at D 8 a layer's trained elements are its MLP
    (3 × 4096 × 14336) and two norms (2 × 4096), 176,168,960, each ⌈÷ 8⌉ on dim 0 (all divide)."""
    e = estimate(parse_scenario({"model": "llama-3.1-8b", "frozen_modules": "self_attn", "dp": 8}),
                 with_kill_lists=False)  # fmt: skip
    s = e.scenario
    assert s.frozen_params == 32 * 41_943_040 == 1_342_177_280
    assert e.model is not None and e.model.freezes is not None
    assert e.model.freezes.formula == "32 × 41,943,040 (their self_attn) = 1,342,177,280"
    schedule = e.ledger.stages[3].peak.schedule
    assert schedule is not None
    layer = 3 * 4096 * 14336 + 2 * 4096
    rs = {i.key: i.bytes_of("reduce_scatter") for i in schedule.instants}
    assert rs["backward-layer-30"] == layer * s.reduce_bytes  # layer 31's reduce-scatter input, in flight


@pytest.mark.parametrize(
    ("raw", "says"),
    [({"frozen_modules": "self_attn,cross_attn"}, "cross_attn: not a module of llama's decoder layers"),
     ({"frozen_modules": "self_attn,mlp,input_layernorm,post_attention_layernorm"}, "freezes every parameter"),
     ({"frozen_modules": "mlp", "lora_rank": 8}, "LoRA freezes the whole base model already"),
     ({"frozen_modules": "mlp", "tp": 2}, "tensor, pipeline or expert parallelism")],
)  # fmt: skip
def test_frozen_modules_the_model_cannot_take_are_refused_naming_the_field(raw: dict[str, object], says: str) -> None:
    with pytest.raises(ScenarioError) as refused:
        parse_scenario({"model": "llama-3.1-8b", **raw})
    assert [e.field for e in refused.value.errors] == ["frozen_modules"]
    assert says in str(refused.value)


def test_frozen_modules_beside_a_frozen_prefix_of_two_kinds_of_layer_are_refused() -> None:
    parse_scenario({"model": "deepseek-v3", "frozen_modules": "self_attn"})  # alone, walked per kind
    with pytest.raises(ScenarioError) as refused:
        parse_scenario({"model": "deepseek-v3", "frozen_modules": "self_attn", "frozen_layers": 4})
    assert [e.field for e in refused.value.errors] == ["frozen_modules"]
    assert "two kinds of layer" in str(refused.value)


def test_frozen_modules_need_a_model() -> None:
    with pytest.raises(ScenarioError) as refused:
        parse_scenario({"params": 1_000_000, "frozen_modules": "mlp"})
    assert [e.field for e in refused.value.errors] == ["frozen_modules"]


@pytest.mark.parametrize(
    ("raw", "field", "says"),
    [({"lora_targets": "gate_proj,down_proj"}, "lora_targets",
      "gate_proj without up_proj: PEFT fuses them into gate_up_proj (name both)"),
     ({"lora_targets": "gate_up_proj"}, "lora_targets", "gate_up_proj: not a linear module of qwen3_moe's layers"),
     ({"lora_targets": "experts"}, "lora_targets", "experts: not a linear module"),
     ({"lora_targets": ""}, "lora_targets", "no default target modules for qwen3_moe"),
     ({"lora_targets": "q_proj", "base_quant": "nf4", "stack": "hf-fsdp2"}, "base_quant", "mixture of experts")],
)  # fmt: skip
def test_lora_on_a_mixture_of_experts_takes_peft_s_names(raw: dict[str, object], field: str, says: str) -> None:
    """PEFT 0.21.0 reaches a MoE block's router and 3-D experts by their transformers-4 names (all-linear among
    them), fusing gate and up: half of that pair, the tensors' own names, no names, or a 4-bit MoE base are refused
    naming the field; the rest is walked (tests/trace)."""
    per_layer = {}
    for targets in ("q_proj,k_proj,v_proj,o_proj", "all-linear", "gate,down_proj"):
        s = parse_scenario({"model": "qwen3-30b-a3b", "lora_rank": 8, "lora_targets": targets})
        assert estimate(s, with_kill_lists=False).ledger.stages[3].peak.schedule is not None
        md = s.model_defaults()
        assert md is not None
        per_layer[targets] = md.activations.per_layer_bytes
    # all-linear keeps the attention's and, beside them, the folded stacks (E·3i·h in BF16) and their GEMMs' inputs
    folded = 128 * 3 * 768 * 2048 * 2
    assert per_layer["all-linear"] - per_layer["q_proj,k_proj,v_proj,o_proj"] > folded
    with pytest.raises(ScenarioError) as refused:
        parse_scenario({"model": "qwen3-30b-a3b", "lora_rank": 8, **raw})
    assert [e.field for e in refused.value.errors] == [field]
    assert says in str(refused.value)


def test_module_names_are_read_as_one_canonical_list() -> None:
    """Spaces, empty names and repeats do not change what is frozen, nor the link: only commas is nothing frozen
    (so nothing is refused for frozen parameters); a dotted path is not a module name, and is told so."""
    s = parse_scenario({"model": "llama-3.2-1b", "frozen_modules": " self_attn , mlp,,self_attn"})
    assert s.frozen_modules == "self_attn,mlp"
    assert s.frozen_params == parse_scenario({"model": "llama-3.2-1b", "frozen_modules": "mlp,self_attn"}).frozen_params
    nothing = parse_scenario({"model": "llama-3.2-1b", "frozen_modules": ",", "hpz": 2, "stack": "hf-fsdp2"})
    assert nothing.frozen_modules == "" and nothing.frozen_params == 0
    with pytest.raises(ScenarioError) as refused:
        parse_scenario({"model": "llama-3.2-1b", "frozen_modules": "self_attn.q_proj"})
    assert "holds something other than module names" in str(refused.value)
    assert "module names (letters, digits, _ and -) with commas" in refused.value.errors[0].allowed


def test_a_mixture_of_experts_is_told_the_targets_it_may_take() -> None:
    for targets in ("", "experts", "w1"):
        with pytest.raises(ScenarioError) as refused:
            parse_scenario({"model": "mixtral-8x7b-v0.1", "lora_rank": 8, "lora_targets": targets})
        allowed = "all-linear or some of gate, k_proj, o_proj, q_proj, v_proj, w1, w2, w3"
        assert refused.value.errors[0].allowed == allowed


def _instant(s: Scenario, key: str) -> dict[str, int]:
    schedule = estimate(s, with_kill_lists=False).ledger.stages[3].peak.schedule
    assert schedule is not None
    instant = next(i for i in schedule.instants if i.key == key)
    out: dict[str, int] = {}
    for e in instant.entries:
        out[e.what] = out.get(e.what, 0) + e.bytes
    return out


def test_a_layer_is_gathered_with_its_adapters() -> None:
    """PEFT puts the adapters inside the modules they wrap, so FSDP2 all-gathers them with their layer: at D 6 the
    unsharded layer grows by each adapter tensor's rows padded to a multiple of 6, times its columns, in BF16."""
    d = 6
    run = {"model": "qwen3-30b-a3b", "stack": "hf-fsdp2", "dp": d, "seq_len": 1024}
    adapted = parse_scenario({**run, "lora_rank": 16, "lora_targets": "all-linear"})
    base = parse_scenario({**run, "lora_rank": 16, "lora_targets": "q_proj"})
    md = adapted.model_defaults()
    assert md is not None and md.lora is not None
    grown = 0
    for m in md.lora.modules[1:]:  # what all-linear adds to q_proj's: lora_A rows × in, lora_B out × rows
        grown += -(-m.rows // d) * d * m.b + -(-m.a // d) * d * m.rows
    key, what = "backward-layer-1-unshard", "layer 1 unsharded"
    assert _instant(adapted, key)[what] - _instant(base, key)[what] == grown * 2


@pytest.mark.parametrize(
    ("targets", "stack"),
    [("all-linear", 128 * 2048 * 768 + 8 * 2048 * 768),  # down_proj's stack E·h·i and its GEMM's input k·s·b·i
     ("gate_proj,up_proj", 128 * 1536 * 2048 - 8 * 2048 * 768)],  # gate_up's E·2i·h, the SiLU already freed
)  # fmt: skip
def test_a_folded_stack_s_gradient_is_a_layer_s_widest_temporary(targets: str, stack: int) -> None:
    """In a layer's backward the first folded expert stack gets a gradient of its whole size (Qwen3-30B-A3B: E 128,
    h 2,048, i 768, k 8; s 2,048): beside the gradient entering the layer, it is the layer's temporaries, in BF16."""
    s = parse_scenario({"model": "qwen3-30b-a3b", "stack": "hf-fsdp2", "seq_len": 2048, "lora_rank": 16,
                        "lora_targets": targets, "act_policy": "full"})  # fmt: skip
    temporaries = _instant(s, "backward-layer-1")
    what = "layer 1's backward: the activation gradient and the widest pair of op gradients"
    assert temporaries[what] == (2048 * 2048 + stack) * 2


@pytest.mark.parametrize(
    ("targets", "stack"), [("gate_proj,up_proj", 128 * 1536 * 2048), ("down_proj", 128 * 2048 * 768)]
)
def test_the_first_layer_keeps_no_folded_stack_whose_input_takes_no_gradient(targets: str, stack: int) -> None:
    """A grouped GEMM keeps its folded expert stack for its input's gradient. With the experts' adapters alone no
    gradient enters the first layer's MLP (the embedding and the attention frozen): the first layer keeps no stack,
    which every other layer keeps (Qwen3-30B-A3B: E 128, h 2,048, i 768; BF16)."""
    s = parse_scenario({"model": "qwen3-30b-a3b", "stack": "hf-fsdp2", "lora_rank": 8, "lora_targets": targets})
    md = s.model_defaults()
    assert md is not None
    led = md.activations
    assert led.alt_first == 1
    assert led.per_layer_bytes - led.alt_per_layer_bytes >= stack * 2


def test_deepseek_v3_s_dense_layers_carry_the_attention_s_adapters_alone() -> None:
    """PEFT never adapts DeepSeek-V3's dense layers' MLP (its gate/up/down names go to the routed experts): with the
    attention's projections targeted every layer carries the same adapters; with the experts alone the three dense
    layers carry none, train nothing, and (no gradient reaching them) keep no activation, while the receipt says
    so."""
    from app.receipts.sections.trains import trains_out

    both = parse_scenario({"model": "deepseek-v3", "dp": 64, "lora_rank": 16, "lora_targets": "q_b_proj,kv_b_proj"})
    experts = parse_scenario({"model": "deepseek-v3", "dp": 64, "lora_rank": 8, "lora_targets": "down_proj"})
    attention = 16 * ((24_576 + 1_536) + (32_768 + 512))  # r × (out + in) of q_b_proj and kv_b_proj
    down = 8 * 256 * (7_168 + 2_048)  # r·E × (h + i): one ParamWrapper over the 256 routed experts' down_proj stack
    assert both.trainable_params == 61 * attention
    assert experts.trainable_params == 58 * down
    md = estimate(experts).model
    assert md is not None and md.activations.alt_first == 3
    assert md.activations.alt_per_layer_bytes == 0 < md.activations.per_layer_bytes
    lora = trains_out(experts).lora
    assert lora is not None and (lora.dense_layers, lora.dense_per_layer, lora.per_layer) == (3, 0, down)
