"""Tensor, pipeline and expert parallelism, HSDP and ZeRO++'s hpZ, held to hand counts and to the oracle.

The per-rank parameter counts are compared with ``app.ledger.verify.oracle.rank_params``, which spells out
Megatron-LM's layout family by family from the checkpoint shapes and shares no code with
``app.ledger.models.parallel``; the sharded classes and the communication with the closed forms of
ZeRO, HSDP and ZeRO++ written out here. Known models and generated configs of every family are drawn.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.ledger.arithmetic import ceil_div
from app.ledger.estimate import estimate
from app.ledger.ledger import Ledger, StageLedger, compute_ledger
from app.ledger.models.architecture import Architecture
from app.ledger.models.defaults import model_defaults
from app.ledger.models.known import KNOWN_BY_ID
from app.ledger.models.reference import compact, resolve
from app.ledger.scenario import Scenario, ScenarioError, parse_scenario
from app.ledger.scenario.fields import FIELD_BY_NAME
from app.ledger.state.rules import CLASSES, STAGES
from app.ledger.verify import checks as checks_module
from app.ledger.verify.checks import oracle_agreement
from app.ledger.verify.oracle import LATENT_KEYS, rank_params, stage_table
from tests.support.model_strategies import configs

KNOWN = tuple(KNOWN_BY_ID)
DP_MAX = FIELD_BY_NAME["dp"].maximum


def divisors(x: int) -> list[int]:
    return [d for d in range(1, x + 1) if x % d == 0]


def oracle_share(arch: Architecture, tp: int = 1, pp: int = 1, stage: str = "first", ep: int = 1) -> tuple[int, int]:
    """The oracle's (dense, experts) per rank, from the architecture's plain numbers."""
    a = arch
    return rank_params(
        a.family, a.hidden, a.layers, a.heads, a.kv_heads, a.head_dim, a.intermediate, a.vocab, a.experts,
        a.tied_embeddings, a.qkv_bias, a.o_bias, a.mlp_bias, a.norm == "layernorm",
        a.max_positions if a.learned_positions else 0, tp, pp, stage, ep, a.qk_norm,
        **{key: getattr(a, key) for key in LATENT_KEYS},
    )  # fmt: skip


@dataclass(frozen=True)
class Layout:
    model: str
    arch: Architecture
    tp: int
    pp: int
    pp_stage: str
    ep: int

    def raw(self, **more: object) -> dict[str, object]:
        return {"model": self.model, "tp": self.tp, "pp": self.pp, "pp_stage": self.pp_stage, "ep": self.ep, **more}


@st.composite
def models(draw: st.DrawFn, family: st.SearchStrategy[str] | None = None) -> str:
    """A known model id or a generated config in its compact (``cfg:``) form."""
    if family is None and draw(st.booleans()):
        return draw(st.sampled_from(KNOWN))
    return compact(draw(configs() if family is None else configs(family)))


@st.composite
def layouts(draw: st.DrawFn, moe: bool = False, whole_kv_heads: bool = True) -> Layout:
    """A model with tp dividing its heads (and its key/value heads: see the GQA test below), pp dividing its
    layers, a pipeline end, and for a mixture of experts ep dividing the experts."""
    moe_families = st.sampled_from(["mixtral", "qwen3_moe"])
    moe_models = st.one_of(st.just("mixtral-8x7b-v0.1"), st.just("qwen3-30b-a3b"), models(moe_families))
    model = draw(moe_models) if moe else draw(models())
    arch = resolve(model).architecture
    tp = draw(st.sampled_from(divisors(math.gcd(arch.heads, arch.kv_heads) if whole_kv_heads else arch.heads)))
    pp = draw(st.sampled_from(divisors(arch.layers)))
    ep = draw(st.sampled_from(divisors(arch.experts))) if arch.experts else 1
    return Layout(model, arch, tp, pp, draw(st.sampled_from(["first", "last"])), ep)


@st.composite
def widths(draw: st.DrawFn) -> dict[str, object]:
    return {
        "param_bytes": draw(st.sampled_from([1, 2, 4])),
        "grad_bytes": draw(st.sampled_from([2, 4])),
        "master_bytes": draw(st.sampled_from([0, 4, 8])),
        "opt_states": draw(st.integers(0, 3)),
        "opt_bytes": draw(st.sampled_from([1, 2, 4, 8])),
        "offload_optimizer": draw(st.sampled_from(["none", "none", "cpu"])),
        "offload_param": draw(st.sampled_from(["none", "none", "cpu"])),
    }


def cells(ledger: Ledger) -> dict[int, dict[str, int]]:
    return {st_.stage: {c: st_.bytes_of(c) for c in CLASSES} for st_ in ledger.stages}


def figures(ledger: Ledger) -> tuple[int | bool, ...]:
    """Every line, peak part, verdict, communication and host figure of a ledger."""
    out: list[int | bool] = []
    for st_ in ledger.stages:
        out.extend(ln.bytes for ln in st_.lines)
        p = st_.peak
        out.extend((p.persistent, p.gather, p.buckets, p.activations, p.total, p.fits, st_.communication.bytes))
    out.extend(h.per_node for h in ledger.host.stages)
    return tuple(out)


# --------------------------------------------------------------------------- hand-computed examples


def test_llama_2_7b_first_of_four_pipeline_stages() -> None:
    """8 layers × (4 × 4,096² attention + 3 × 4,096 × 11,008 MLP + 2 × 4,096 norms = 202,383,360)
    + the embedding 32,000 × 4,096 = 131,072,000: 1,750,138,880 parameters on the first stage; the last
    has the final norm 4,096 and the head 131,072,000 instead: 1,750,142,976."""
    arch = resolve("llama-2-7b").architecture
    assert oracle_share(arch, pp=4, stage="first") == (1_750_138_880, 0)
    assert oracle_share(arch, pp=4, stage="last") == (1_750_142_976, 0)
    assert parse_scenario({"model": "llama-2-7b", "pp": 4}).params == 8 * 202_383_360 + 131_072_000 == 1_750_138_880
    last = parse_scenario({"model": "llama-2-7b", "pp": 4, "pp_stage": "last"})
    assert last.params == 8 * 202_383_360 + 4_096 + 131_072_000 == 1_750_142_976


def test_llama_2_7b_two_way_tensor_parallel() -> None:
    """tp = 2: every matmul halves, the two norms per layer stay whole: 32 × (202,375,168 ÷ 2 + 8,192)
    + the embedding and the head on half the vocabulary (2 × 16,000 × 4,096) + the final norm 4,096."""
    expected = 32 * (202_375_168 // 2 + 8_192) + 2 * 16_000 * 4_096 + 4_096
    assert expected == 3_369_340_928
    assert oracle_share(resolve("llama-2-7b").architecture, tp=2) == (expected, 0)
    assert parse_scenario({"model": "llama-2-7b", "tp": 2}).params == expected


def test_mixtral_8x7b_four_way_expert_parallel() -> None:
    """ep = 4: each rank keeps 2 of the 8 experts per layer. Dense per layer: q and o 4,096² each, k and v
    1,024 × 4,096 each (8 key/value heads), the router 8 × 4,096 and two norms: 41,984,000; × 32 layers +
    embedding and head 131,072,000 each + the final norm 4,096 = 1,605,636,096. Experts: 32 layers × 2 ×
    (w1, w2, w3: 3 × 4,096 × 14,336 = 176,160,768) = 11,274,289,152."""
    dense = 32 * (2 * 4_096**2 + 2 * 1_024 * 4_096 + 8 * 4_096 + 2 * 4_096) + 2 * 131_072_000 + 4_096
    experts = 32 * 2 * 3 * 4_096 * 14_336
    assert (dense, experts) == (1_605_636_096, 11_274_289_152)
    assert oracle_share(resolve("mixtral-8x7b-v0.1").architecture, ep=4) == (dense, experts)
    s = parse_scenario({"model": "mixtral-8x7b-v0.1", "ep": 4, "dp": 8})
    assert (s.params, s.expert_params) == (dense + experts, experts)
    # ZeRO-3 shards the dense part over D = 8 and the experts over D ÷ ep = 2 ranks (BF16 parameters).
    assert compute_ledger(s).stages[3].bytes_of("parameters") == (ceil_div(dense, 8) + experts // 2) * 2


def test_gpt2_tied_head_keeps_an_embedding_copy_on_the_last_stage() -> None:
    """GPT-2, pp = 2: a layer is ln_1 + ln_2 (2 × 1,536) + c_attn (768 × 2,304 + 2,304) + attn.c_proj
    (768² + 768) + c_fc (768 × 3,072 + 3,072) + mlp.c_proj (3,072 × 768 + 768) = 7,087,872. First stage: 6 layers
    + wte (50,257 × 768 = 38,597,376) + wpe (1,024 × 768 = 786,432) = 81,911,040. Last: 6 layers + ln_f 1,536
    + the tied head's copy of wte = 81,126,144. Together the model's 124,439,808 and one more wte."""
    layer = 2 * 1_536 + (768 * 2_304 + 2_304) + (768**2 + 768) + (768 * 3_072 + 3_072) + (3_072 * 768 + 768)
    assert layer == 7_087_872
    first = parse_scenario({"model": "gpt2", "pp": 2}).params
    last = parse_scenario({"model": "gpt2", "pp": 2, "pp_stage": "last"}).params
    assert first == 6 * layer + 38_597_376 + 786_432 == 81_911_040
    assert last == 6 * layer + 1_536 + 38_597_376 == 81_126_144
    assert first + last == 124_439_808 + 38_597_376


# --------------------------------------------------------------------------- (a) the ledger against the oracle


@settings(max_examples=40)
@given(layouts(), st.data())
def test_the_ledger_cells_equal_the_oracle_with_its_own_rank_params(lay: Layout, data: st.DataObject) -> None:
    dp = lay.ep * data.draw(st.integers(1, 16), label="dp ÷ ep")
    group, hpz = dp, 1
    if lay.ep == 1:  # expert parallelism with a shard group or hpZ is refused; dense models take either
        kind = data.draw(st.sampled_from(["plain", "hsdp", "hpz"]), label="sharding")
        if kind == "hsdp":
            group = data.draw(st.sampled_from(divisors(dp)), label="shard_group")
        elif kind == "hpz":
            hpz = data.draw(st.sampled_from(divisors(dp)), label="hpz")
    raw = lay.raw(dp=dp, shard_group=group, hpz=hpz, **data.draw(widths()))
    s = parse_scenario(raw)
    dense, experts = oracle_share(lay.arch, lay.tp, lay.pp, lay.pp_stage, lay.ep)
    sharded_experts = experts if lay.ep > 1 else 0  # at ep = 1 ZeRO shards the experts like the rest
    assert s.params == dense + experts
    assert s.expert_params == sharded_experts
    table = stage_table(
        dense + experts, dp, s.param_bytes, s.grad_bytes, s.master_bytes, s.opt_states, s.opt_bytes,
        optimizer_offloaded=s.offload_optimizer != "none", params_offloaded=s.offload_param != "none",
        expert_params=sharded_experts, ep=lay.ep, shard_group=group, hpz=hpz,
    )  # fmt: skip
    ledger = compute_ledger(s)
    assert cells(ledger) == table
    result = oracle_agreement(ledger)
    assert result.passed, result.message
    assert result.message.startswith("all 16 (stage, class) cells equal the oracle's")


def test_oracle_agreement_fails_naming_the_params_per_rank(monkeypatch: pytest.MonkeyPatch) -> None:
    """When the oracle's count per rank is not the scenario's, check 1 says so with both numbers."""
    real = rank_params

    def one_more(*args: object, **kwargs: object) -> tuple[int, int]:
        dense, experts = real(*args, **kwargs)  # type: ignore[arg-type]
        return dense + 1, experts

    monkeypatch.setattr(checks_module, "rank_params", one_more)
    result = oracle_agreement(compute_ledger(parse_scenario({"model": "llama-2-7b", "pp": 4})))
    assert result.passed is False
    assert result.check == "oracle-agreement"
    assert "params per rank" in result.message
    assert "pp = 4 (first stage)" in result.message
    assert "1,750,138,880" in result.message
    assert "1,750,138,881" in result.message


def test_oracle_agreement_skips_the_count_for_typed_params(monkeypatch: pytest.MonkeyPatch) -> None:
    """A typed params is the user's, not the model's: the oracle's count per rank does not apply to it."""
    monkeypatch.setattr(checks_module, "rank_params", lambda *a, **k: (1, 0))
    result = oracle_agreement(compute_ledger(parse_scenario({"model": "llama-2-7b", "params": "7B"})))
    assert result.passed, result.message
    assert result.message == "all 16 (stage, class) cells equal the oracle's"


@pytest.mark.parametrize(
    ("model", "tp"),
    [("mistral-7b-v0.1", 16), ("llama-2-70b", 16), ("qwen2-0.5b", 7), ("qwen2-7b", 7), ("mixtral-8x7b-v0.1", 32)],
)
def test_key_value_heads_fewer_than_tp_are_replicated_whole(model: str, tp: int) -> None:
    """Mistral-7B at tp = 16 has 8 key/value heads of 128: each rank holds one whole head (128 × 4,096 per
    k and v), not 64 rows: 32 layers × 2 × 64 × 4,096 = 16,777,216 parameters more than the ledger counts."""
    s = parse_scenario({"model": model, "tp": tp})
    dense, experts = oracle_share(resolve(model).architecture, tp)
    assert s.params == dense + experts
    assert oracle_agreement(compute_ledger(s)).passed


# --------------------------------------------------------------------------- (b) the shares add up


@settings(max_examples=40)
@given(models(), st.data())
def test_pipeline_stages_add_up_to_the_model(model: str, data: st.DataObject) -> None:
    """tp = ep = 1: first + the pp − 2 middle stages (L ÷ pp layers each) + last = the model's exact count,
    plus the tied head's copy of the token embedding (vocab × hidden) when pp > 1."""
    arch = resolve(model).architecture
    inv = resolve(model).inventory
    pp = data.draw(st.sampled_from(divisors(arch.layers)), label="pp")
    first = parse_scenario({"model": model, "pp": pp, "pp_stage": "first"}).params
    last = parse_scenario({"model": model, "pp": pp, "pp_stage": "last"}).params
    if pp == 1:
        assert first == last == inv.params
        return
    per_stage = arch.layers // pp
    middle = sum(u.params for u in inv.units[1 + per_stage : 1 + (pp - 1) * per_stage])  # stages 1 … pp − 2's layers
    copy = arch.vocab * arch.hidden if arch.tied_embeddings else 0
    assert first + middle + last == inv.params + copy
    assert (first, last) == (sum(oracle_share(arch, 1, pp, "first")), sum(oracle_share(arch, 1, pp, "last")))


@settings(max_examples=30)
@given(layouts(moe=True), st.data())
def test_expert_parallel_splits_only_the_experts(lay: Layout, data: st.DataObject) -> None:
    """Each rank keeps E ÷ ep of every MoE layer's experts: its expert parameters × ep are all the experts of
    the stage's layers, its dense parameters are those at ep = 1."""
    dp = lay.ep * data.draw(st.integers(1, 8), label="dp ÷ ep")
    s = parse_scenario(lay.raw(dp=dp))
    whole = parse_scenario(lay.raw(dp=dp, ep=1))
    at_one = whole.model_defaults()
    assert at_one is not None
    stage_experts = at_one.share.experts  # all experts of the stage's layers, tp-split
    if lay.ep > 1:
        assert s.expert_params * lay.ep == stage_experts
        assert s.params - s.expert_params == whole.params - stage_experts  # the dense part is untouched
    else:
        assert (s.params, s.expert_params) == (whole.params, 0)
    if lay.tp == 1:  # by hand: w1, w2, w3 of E experts in each of the stage's L ÷ pp layers
        a = lay.arch
        assert stage_experts == a.layers // lay.pp * a.experts * 3 * a.intermediate * a.hidden


# --------------------------------------------------------------------------- (c) HSDP


@st.composite
def plain_scenarios(draw: st.DrawFn, dp: int) -> dict[str, object]:
    return {
        "params": draw(st.one_of(st.integers(1, 1_000), st.integers(1, 10**12))),
        "dp": dp,
        "unit_params": 0,
        **{k: v for k, v in draw(widths()).items() if not k.startswith("offload")},
    }


@settings(max_examples=40)
@given(st.integers(1, 16), st.integers(1, 16), st.booleans(), st.data())
def test_a_shard_group_of_d_is_the_plain_ledger(
    group: int, replicas: int, with_model: bool, data: st.DataObject
) -> None:
    dp = group * replicas
    raw = {"model": data.draw(models()), "dp": dp} if with_model else data.draw(plain_scenarios(dp))
    plain = compute_ledger(parse_scenario(raw))
    assert figures(compute_ledger(parse_scenario({**raw, "shard_group": dp}))) == figures(plain)
    if group < dp:  # a real shard group shards less: stage 3 holds more
        grouped = compute_ledger(parse_scenario({**raw, "shard_group": group}))
        assert grouped.stages[3].persistent >= plain.stages[3].persistent


@settings(max_examples=30)
@given(st.sampled_from([1, 2, 6, 8, 12, 16, 24, 64]), st.data())
def test_persistent_never_grows_as_the_shard_group_grows(dp: int, data: st.DataObject) -> None:
    raw = data.draw(plain_scenarios(dp))
    previous: list[int] | None = None
    for group in divisors(dp):
        ledger = compute_ledger(parse_scenario({**raw, "shard_group": group}))
        here = [st_.persistent for st_ in ledger.stages]
        assert (
            here[0]
            == ledger.scenario.params
            * sum(w for w in (ledger.scenario.param_bytes, ledger.scenario.grad_bytes, ledger.scenario.master_bytes))
            + ledger.scenario.params * ledger.scenario.opt_states * ledger.scenario.opt_bytes
        )
        if previous is not None:
            assert all(a <= b for a, b in zip(here, previous, strict=True)), (group, here, previous)
        previous = here


def hsdp_communication(params: int, pb: int, gb: int, dp: int, group: int, stage: int) -> int:
    """By hand: the collectives within the shard group S, then the gradient shard's all-reduce over R = D ÷ S."""
    psi_p, psi_g = params * pb, params * gb
    if stage == 0:  # plain data parallelism all-reduces over all D
        return ceil_div(2 * psi_g * (dp - 1), dp)
    within = (2 * psi_p + psi_g) if stage == 3 else (psi_p + psi_g)
    r = dp // group
    return ceil_div(within * (group - 1), group) + ceil_div(2 * ceil_div(params, group) * gb * (r - 1), r)


@settings(max_examples=60)
@given(st.integers(1, 16), st.integers(1, 16), st.data())
def test_hsdp_communication_by_hand(group: int, replicas: int, data: st.DataObject) -> None:
    """⌈(2Ψp + Ψg)(S − 1) ÷ S⌉ + ⌈2⌈N ÷ S⌉·gb·(R − 1) ÷ R⌉ at stage 3 (Ψp + Ψg within the group at stages 1–2),
    over shard groups and replica groups of different sizes (equal sizes: see the next test)."""
    dp = group * replicas
    raw = data.draw(plain_scenarios(dp))
    s = parse_scenario({**raw, "shard_group": group})
    if group == replicas and group > 1:
        return
    ledger = compute_ledger(s)
    for st_ in ledger.stages:
        want = hsdp_communication(s.params, s.param_bytes, s.grad_bytes, dp, group, st_.stage)
        assert st_.communication.bytes == want, (st_.stage, st_.communication.formula)


def test_hsdp_communication_with_equal_shard_and_replica_groups() -> None:
    """N = 1, BF16 parameters, FP32 gradients, D = 9 in shard groups of 3: ⌈8 × 2 ÷ 3⌉ = 6 within the group
    and ⌈2 × 1 × 4 × 2 ÷ 3⌉ = 6 across the three groups: 12 B, not ⌈(8 + 8) × 2 ÷ 3⌉ = 11 B."""
    s = parse_scenario({"params": 1, "dp": 9, "shard_group": 3, "param_bytes": 2, "grad_bytes": 4, "unit_params": 0})
    assert hsdp_communication(1, 2, 4, 9, 3, 3) == 12
    assert compute_ledger(s).stages[3].communication.bytes == 12


# --------------------------------------------------------------------------- (d) hpZ


@settings(max_examples=60)
@given(st.sampled_from([2, 4, 6, 8, 12, 16, 32, 48, 64, 1024]), st.data())
def test_hpz_parameters_and_communication_by_hand(dp: int, data: st.DataObject) -> None:
    """Stage 3 keeps ⌈N ÷ D⌉ + ⌈N ÷ hpz⌉ parameters; forward all-gathers and the reduce-scatter run over D,
    backward's all-gather within the hpz group: ⌈(Ψp + Ψg)(D − 1) ÷ D⌉ + ⌈Ψp(h − 1) ÷ h⌉ (h = D: one group)."""
    raw = data.draw(plain_scenarios(dp))
    h = data.draw(st.sampled_from([d for d in divisors(dp) if d > 1]), label="hpz")
    s = parse_scenario({**raw, "hpz": h})
    n, pb = s.params, s.param_bytes
    psi_p, psi_g = n * pb, n * s.grad_bytes
    ledger = compute_ledger(s)
    three = ledger.stages[3]
    assert three.bytes_of("parameters") == (ceil_div(n, dp) + ceil_div(n, h)) * pb
    for c in ("gradients", "master_weights", "optimizer_states"):  # hpZ adds to the parameters only
        assert three.bytes_of(c) == compute_ledger(s.with_(hpz=1)).stages[3].bytes_of(c)
    if h < dp:
        want = ceil_div((psi_p + psi_g) * (dp - 1), dp) + ceil_div(psi_p * (h - 1), h)
    else:
        want = ceil_div((2 * psi_p + psi_g) * (dp - 1), dp)
    assert three.communication.bytes == want, three.communication.formula
    for st_ in ledger.stages[:3]:  # stages 0–2 have no secondary partition
        assert figures_of_stage(st_) == figures_of_stage(compute_ledger(s.with_(hpz=1)).stages[st_.stage])


def figures_of_stage(st_: StageLedger) -> tuple[int, ...]:
    return (*(ln.bytes for ln in st_.lines), st_.peak.total, st_.communication.bytes)


# --------------------------------------------------------------------------- (e) 1F1B activations


@settings(max_examples=40)
@given(layouts(), st.sampled_from(["none", "selective", "full"]))
def test_one_f_one_b_activations(lay: Layout, policy: str) -> None:
    """The first stage keeps pp micro batches of its L ÷ pp layers and the embedding output, no head or
    logits; the last one micro batch with the head and the logits; both one layer's working set (full
    recomputation) and, with ep > 1, the all-to-all buffers. Per-layer, embedding, head and logits figures are
    the whole model's (pp = 1)."""
    s = parse_scenario(lay.raw(act_policy=policy, dp=lay.ep))
    whole = model_defaults(s.model_query()._replace(pp=1, pp_stage="first")).activations
    layers = lay.arch.layers // lay.pp

    def other(j: int) -> bool:
        # two kinds of layer: deepseek_v3's first dense layers, gemma3_text's global layers (every N-th)
        return j < whole.alt_first or (whole.alt_every > 0 and (j + 1) % whole.alt_every == 0)

    def kept(j: int) -> int:
        return whole.alt_per_layer_bytes if other(j) else whole.per_layer_bytes

    first = lay.pp == 1 or lay.pp_stage == "first"
    stage = range(layers) if first else range(lay.arch.layers - layers, lay.arch.layers)
    own = sum(kept(j) for j in stage)
    # one layer recomputes at a time: the larger working set of the kinds the stage holds (a stage of deepseek_v3's
    # dense first layers alone, at pp = 61, rebuilds a dense layer's)
    working = max(whole.alt_working_set_bytes if other(j) else whole.working_set_bytes for j in stage)
    fixed = working + whole.all_to_all_bytes
    if lay.pp == 1:
        want = own + whole.embedding_bytes + whole.head_bytes + whole.logits_bytes + fixed
    elif lay.pp_stage == "first":
        want = lay.pp * (own + whole.embedding_bytes) + fixed
    else:
        want = own + whole.head_bytes + whole.logits_bytes + fixed
    assert s.activation_bytes == want
    assert s.source_of("activation_bytes") == "modelled"
    if lay.pp > 1 and lay.pp_stage == "first":
        assert whole.embedding_bytes > 0  # so that the pp × embedding term is tested


# --------------------------------------------------------------------------- (f) the fit finder with groups


@st.composite
def grouped_scenarios(draw: st.DrawFn) -> Scenario:
    kind = draw(st.sampled_from(["hsdp", "hpz", "ep"]))
    if kind == "ep":
        lay = draw(layouts(moe=True).filter(lambda lay: lay.ep > 1))
        dp = lay.ep * draw(st.integers(1, 4))
        model_raw: dict[str, object] = lay.raw(dp=dp, act_policy="full", seq_len=256)
        share = parse_scenario(model_raw)
        capacity = share.activation_bytes + share.params * draw(st.integers(1, 24))
        return parse_scenario({**model_raw, "capacity_bytes": min(2**46, capacity)})
    dp = draw(st.sampled_from([2, 4, 6, 8, 16, 24]))
    raw = draw(plain_scenarios(dp))
    params = int(str(raw["params"]))
    raw["unit_params"] = draw(st.integers(0, params))
    raw["activation_bytes"] = draw(st.integers(0, 10**10))
    raw["prefetch"] = draw(st.integers(0, 2))
    raw["contingency_pct"] = draw(st.integers(0, 20))
    # a device of 1 … 24 B per parameter beside the activations: answers from D = 1 to beyond the bound
    raw["capacity_bytes"] = min(2**46, int(str(raw["activation_bytes"])) + params * draw(st.integers(1, 24)))
    divisor = draw(st.sampled_from([d for d in divisors(dp) if d > 1]))
    raw["shard_group" if kind == "hsdp" else "hpz"] = divisor if kind == "hpz" or divisor < dp else 1
    return parse_scenario(raw)


def _peak(s: Scenario, dp: int, stage: int) -> int:
    return compute_ledger(s.with_(dp=dp)).stages[stage].peak.total


@settings(max_examples=25)
@given(grouped_scenarios())
def test_the_fit_finder_answers_a_multiple_of_the_groups(s: Scenario) -> None:
    """Every smallest D is a multiple of ep, hpz and a shard group smaller than D, fits under the full ledger,
    and the previous multiple does not."""
    step = math.lcm(s.ep, s.hpz, 1 if s.shard_group == s.dp else s.shard_group)
    fit = estimate(s, with_kill_lists=False).fit
    for stage in STAGES:
        d = fit.stages[stage].smallest_dp
        if d is None:  # nothing fits: not even the largest multiple
            assert _peak(s, DP_MAX // step * step, stage) > s.capacity_bytes
            continue
        assert d % step == 0, (stage, d, step)
        assert _peak(s, d, stage) <= s.capacity_bytes, (stage, d)
        if d > step:
            assert _peak(s, d - step, stage) > s.capacity_bytes, (stage, d, step)


# --------------------------------------------------------------------------- (g) refusals


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ({"model": "llama-2-7b", "pp": 3}, "pp"),  # 32 layers
        ({"model": "gpt2", "pp": 5}, "pp"),  # 12 layers
        ({"model": "llama-2-7b", "ep": 2, "dp": 8}, "ep"),  # a dense model
        ({"ep": 2, "dp": 8}, "ep"),  # no model at all
        ({"model": "mixtral-8x7b-v0.1", "ep": 3, "dp": 6}, "ep"),  # 3 does not divide 8 experts
        ({"model": "mixtral-8x7b-v0.1", "ep": 4, "dp": 6}, "ep"),  # 4 does not divide D = 6
        ({"dp": 8, "shard_group": 3}, "shard_group"),
        ({"dp": 12, "shard_group": 8}, "shard_group"),
        ({"dp": 8, "shard_group": 4, "hpz": 2}, "hpz"),
        ({"dp": 8, "hpz": 3}, "hpz"),
    ],
)
def test_bad_layouts_are_refused_naming_the_field(raw: dict[str, object], field: str) -> None:
    with pytest.raises(ScenarioError) as caught:
        parse_scenario(raw)
    assert caught.value.errors[0].field == field, caught.value.errors


@settings(max_examples=30)
@given(models(), st.data())
def test_pp_not_dividing_the_layers_is_refused(model: str, data: st.DataObject) -> None:
    layers = resolve(model).architecture.layers
    pp = data.draw(st.integers(2, 1_024).filter(lambda p: layers % p != 0), label="pp")
    with pytest.raises(ScenarioError) as caught:
        parse_scenario({"model": model, "pp": pp})
    assert [e.field for e in caught.value.errors] == ["pp"]
