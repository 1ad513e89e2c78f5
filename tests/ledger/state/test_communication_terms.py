"""Communication per step, term by term, for each group layout: plain data parallelism, HSDP, ZeRO++'s hpZ
and expert parallelism.

Every expected figure is computed here by hand from the spec's rule — each collective sends (G − 1) ÷ G of its
buffer over a group of G ranks, terms over the same group summed before the one rounding up — with the
arithmetic in a comment; none is read from the code under test. Each term is pinned whole (what it is, its
buffer, its group, its spelling, whether it runs across HSDP's replica groups), since the page shows them.
"""

from __future__ import annotations

import pytest

from app.ledger.scenario import DEFAULT_SCENARIO, Scenario, parse_scenario
from app.ledger.state.communication import EVIDENCE, Term, communication

# Small numbers make each rounding visible: N = 10, BF16 parameters, FP32 gradients:
# Ψ_p = 10 × 2 = 20 B, Ψ_g = 10 × 4 = 40 B.
SMALL: dict[str, object] = {"params": 10, "unit_params": 0, "param_bytes": 2, "grad_bytes": 4, "master_bytes": 4}


def small(**changes: object) -> Scenario:
    return parse_scenario({**SMALL, **changes})


# --------------------------------------------------------------------------- plain data parallelism


@pytest.mark.parametrize(
    ("stage", "terms", "volume", "total", "spelled"),
    [
        # 2 × Ψ_g = 80 B; ⌈80 × 7 ÷ 8⌉ = 70
        (0, (Term("all-reduce", 80, 8, "2 × Ψ_g"),), 80, 70, "2 × Ψ_g = 2 × 40"),
        # Ψ_g + Ψ_p = 60 B; ⌈60 × 7 ÷ 8⌉ = ⌈52.5⌉ = 53
        (1, (Term("reduce-scatter", 40, 8, "Ψ_g"), Term("all-gather", 20, 8, "Ψ_p")), 60, 53, "Ψ_g + Ψ_p = 40 + 20"),
        (2, (Term("reduce-scatter", 40, 8, "Ψ_g"), Term("all-gather", 20, 8, "Ψ_p")), 60, 53, "Ψ_g + Ψ_p = 40 + 20"),
        # 2 × Ψ_p + Ψ_g = 80 B; ⌈80 × 7 ÷ 8⌉ = 70
        (3, (Term("all-gather forward", 20, 8, "Ψ_p"), Term("all-gather backward", 20, 8, "Ψ_p"),
             Term("reduce-scatter", 40, 8, "Ψ_g")), 80, 70, "2 × Ψ_p + Ψ_g = 2 × 20 + 40"),
    ],
)  # fmt: skip
def test_plain_data_parallelism(stage: int, terms: tuple[Term, ...], volume: int, total: int, spelled: str) -> None:
    comm = communication(small(dp=8), stage)
    assert comm.stage == stage
    assert comm.terms == terms
    assert (comm.volume, comm.bytes) == (volume, total)
    assert comm.formula.text == f"⌈({spelled}) × 7 ÷ 8⌉ = {total} B"
    assert comm.evidence == EVIDENCE
    expected = {
        0: "all-reduce of gradients",
        1: "reduce-scatter of gradients + all-gather of updated parameters",
        2: "reduce-scatter of gradients + all-gather of updated parameters",
        3: "all-gather in forward + all-gather in backward + reduce-scatter of gradients",
    }
    assert comm.collectives == expected[stage]


def test_one_rank_sends_nothing() -> None:
    """D = 1: every term × 0 ÷ 1."""
    for stage in range(4):
        comm = communication(small(dp=1), stage)
        assert comm.bytes == 0
        assert comm.formula.text.endswith("× 0 ÷ 1⌉ = 0 B")


def test_the_seed_in_the_spec_s_words() -> None:
    """N = 7e9, BF16 throughout, D = 8: stage 3 sends ⌈(2 × 14e9 + 14e9) × 7 ÷ 8⌉ = 36.75e9 B."""
    comm = communication(DEFAULT_SCENARIO, 3)
    assert comm.formula.text == ("⌈(2 × Ψ_p + Ψ_g = 2 × 14,000,000,000 + 14,000,000,000) × 7 ÷ 8⌉ = 36,750,000,000 B")


# --------------------------------------------------------------------------- HSDP: shard groups of S < D


def test_hsdp_stage_0_still_all_reduces_over_every_rank() -> None:
    """Plain data parallelism has no shard group: 2 × Ψ_g over all 8; ⌈80 × 7 ÷ 8⌉ = 70."""
    comm = communication(small(dp=8, shard_group=4), 0)
    assert comm.terms == (Term("all-reduce", 80, 8, "2 × Ψ_g"),)
    assert comm.bytes == 70
    assert comm.collectives == "all-reduce of gradients"


# The gradient shard all-reduced across the R = 8 ÷ 4 = 2 replica groups: 2 × ⌈10 ÷ 4⌉ × 4 B = 2 × 3 × 4 = 24 B.
ACROSS = Term("all-reduce of the gradient shard", 24, 2, "2 × ⌈N ÷ 4⌉ × 4 B", across=True)
ACROSS_SPELLED = "⌈(all-reduce of the gradient shard 2 × ⌈N ÷ 4⌉ × 4 B = 24) × 1 ÷ 2⌉"


def test_hsdp_stage_1() -> None:
    """Within the group of 4: ⌈(40 + 20) × 3 ÷ 4⌉ = 45; across 2 groups: ⌈24 × 1 ÷ 2⌉ = 12; 57 B."""
    comm = communication(small(dp=8, shard_group=4), 1)
    assert comm.terms == (Term("reduce-scatter", 40, 4, "Ψ_g"), Term("all-gather", 20, 4, "Ψ_p"), ACROSS)
    assert (comm.volume, comm.bytes) == (84, 57)
    assert comm.formula.text == (f"⌈(reduce-scatter Ψ_g = 40 + all-gather Ψ_p = 20) × 3 ÷ 4⌉ + {ACROSS_SPELLED} = 57 B")
    assert comm.collectives == (
        "reduce-scatter of gradients + all-gather of updated parameters (within the shard group of 4) + all-reduce "
        "of the gradient shard across the 2 groups"
    )


def test_hsdp_stage_3() -> None:
    """Within the group of 4: ⌈(20 + 20 + 40) × 3 ÷ 4⌉ = 60; across: 12; 72 B."""
    comm = communication(small(dp=8, shard_group=4), 3)
    assert comm.terms == (
        Term("all-gather forward", 20, 4, "Ψ_p"),
        Term("all-gather backward", 20, 4, "Ψ_p"),
        Term("reduce-scatter", 40, 4, "Ψ_g"),
        ACROSS,
    )
    assert (comm.volume, comm.bytes) == (104, 72)
    assert comm.formula.text == (
        "⌈(all-gather forward Ψ_p = 20 + all-gather backward Ψ_p = 20 + reduce-scatter Ψ_g = 40) × 3 ÷ 4⌉ + "
        f"{ACROSS_SPELLED} = 72 B"
    )
    assert comm.collectives.startswith("all-gather in forward + all-gather in backward + reduce-scatter of gradients ")


def test_hsdp_groups_of_equal_size_round_apart() -> None:
    """N = 1, D = 9 in 3 groups of 3 (BF16 parameters, FP32 gradients), stage 3: within ⌈(2 + 2 + 4) × 2 ÷ 3⌉ = 6
    and across the 3 groups ⌈2 × 1 × 4 × 2 ÷ 3⌉ = 6: 12 B. One rounding of both would give ⌈16 × 2 ÷ 3⌉ = 11."""
    comm = communication(small(params=1, dp=9, shard_group=3), 3)
    assert comm.terms[-1] == Term("all-reduce of the gradient shard", 8, 3, "2 × ⌈N ÷ 3⌉ × 4 B", across=True)
    assert comm.bytes == 12
    assert comm.formula.text.endswith(
        "× 2 ÷ 3⌉ + ⌈(all-reduce of the gradient shard 2 × ⌈N ÷ 3⌉ × 4 B = 8) × 2 ÷ 3⌉ = 12 B"
    )


def test_one_shard_group_of_every_rank_is_plain() -> None:
    """S = D: no replica group, nothing to all-reduce across; the spec's formula."""
    comm = communication(small(dp=8, shard_group=8), 1)
    assert all(not t.across for t in comm.terms)
    assert comm.bytes == 53
    assert comm.collectives == "reduce-scatter of gradients + all-gather of updated parameters"


# --------------------------------------------------------------------------- ZeRO++ hpZ


def test_hpz_stage_3_gathers_backward_within_its_group() -> None:
    """D = 8, hpz = 4: over D ⌈(all-gather forward 20 + reduce-scatter 40) × 7 ÷ 8⌉ = ⌈52.5⌉ = 53, within the hpZ
    group ⌈20 × 3 ÷ 4⌉ = 15: 68 B."""
    comm = communication(small(dp=8, hpz=4), 3)
    assert comm.terms == (
        Term("all-gather forward", 20, 8, "Ψ_p"),
        Term("all-gather backward (hpZ)", 20, 4, "Ψ_p"),
        Term("reduce-scatter", 40, 8, "Ψ_g"),
    )
    assert (comm.volume, comm.bytes) == (80, 68)
    assert comm.formula.text == (
        "⌈(all-gather forward Ψ_p = 20 + reduce-scatter Ψ_g = 40) × 7 ÷ 8⌉ + "
        "⌈(all-gather backward (hpZ) Ψ_p = 20) × 3 ÷ 4⌉ = 68 B"
    )
    assert comm.collectives == (
        "all-gather in forward (over D) + all-gather in backward (within the hpZ group of 4) + reduce-scatter of "
        "gradients"
    )


def test_hpz_of_two() -> None:
    """hpz = 2, the smallest group: ⌈(20 + 40) × 7 ÷ 8⌉ = 53 over D, ⌈20 × 1 ÷ 2⌉ = 10 within the pair: 63 B."""
    comm = communication(small(dp=8, hpz=2), 3)
    assert comm.terms[1] == Term("all-gather backward (hpZ)", 20, 2, "Ψ_p")
    assert comm.bytes == 63


def test_hpz_of_every_rank_is_one_rounding() -> None:
    """hpz = D = 8: backward gathers over the same 8 ranks, ⌈(20 + 20 + 40) × 7 ÷ 8⌉ = 70 in the spec's words."""
    comm = communication(small(dp=8, hpz=8), 3)
    assert comm.bytes == 70
    assert comm.formula.text == "⌈(2 × Ψ_p + Ψ_g = 2 × 20 + 40) × 7 ÷ 8⌉ = 70 B"


@pytest.mark.parametrize("stage", [0, 1, 2])
def test_hpz_changes_only_stage_3(stage: int) -> None:
    """Stages 0–2 gather no parameters in backward: as without hpZ (70, 53, 53 B)."""
    comm = communication(small(dp=8, hpz=4), stage)
    assert comm.bytes == {0: 70, 1: 53, 2: 53}[stage]
    assert "hpZ" not in comm.collectives
    assert all(t.group == 8 for t in comm.terms)


# --------------------------------------------------------------------------- expert parallelism

# Mixtral-8x7B with ep = 4 on D = 8: per rank the dense 1,605,636,096 parameters and 2 of the 8 experts of each
# layer, 32 × 2 × (3 × 4,096 × 14,336) = 11,274,289,152 (both spelled in tests/ledger/models/test_parallel.py).
# BF16 parameters, FP32 gradients: Ψ_p = dense 3,211,272,192, experts 22,548,578,304;
# Ψ_g = dense 6,422,544,384, experts 45,097,156,608. The dense part runs over D = 8, the experts over D ÷ ep = 2.
DENSE, EXPERTS = 1_605_636_096, 32 * 2 * 3 * 4_096 * 14_336
MOE: dict[str, object] = {"model": "mixtral-8x7b-v0.1", "ep": 4, "dp": 8, "param_bytes": 2, "grad_bytes": 4}


@pytest.fixture(scope="module")
def moe() -> Scenario:
    s = parse_scenario(MOE)
    assert (s.params, s.expert_params) == (DENSE + EXPERTS, EXPERTS) == (12_879_925_248, 11_274_289_152)
    return s


def test_experts_stage_0(moe: Scenario) -> None:
    """Dense: ⌈2 × 6,422,544,384 × 7 ÷ 8⌉ = 11,239,452,672; experts: ⌈2 × 45,097,156,608 × 1 ÷ 2⌉ =
    45,097,156,608; 56,336,609,280 B."""
    comm = communication(moe, 0)
    assert comm.terms == (
        Term("all-reduce", 12_845_088_768, 8, "2 × Ψ_g"),
        Term("all-reduce (experts)", 90_194_313_216, 2, "2 × Ψ_g(experts)"),
    )
    assert (comm.volume, comm.bytes) == (103_039_401_984, 56_336_609_280)
    assert comm.formula.text == (
        "⌈(all-reduce 2 × Ψ_g = 12,845,088,768) × 7 ÷ 8⌉ + "
        "⌈(all-reduce (experts) 2 × Ψ_g(experts) = 90,194,313,216) × 1 ÷ 2⌉ = 56,336,609,280 B"
    )
    assert comm.collectives == "all-reduce of gradients; the experts' over their D ÷ ep = 2 ranks"


def test_experts_stage_1(moe: Scenario) -> None:
    """Dense: ⌈(6,422,544,384 + 3,211,272,192) × 7 ÷ 8⌉ = 8,429,589,504; experts:
    ⌈(45,097,156,608 + 22,548,578,304) × 1 ÷ 2⌉ = 33,822,867,456; 42,252,456,960 B."""
    comm = communication(moe, 1)
    assert comm.terms == (
        Term("reduce-scatter", 6_422_544_384, 8, "Ψ_g"),
        Term("all-gather", 3_211_272_192, 8, "Ψ_p"),
        Term("reduce-scatter (experts)", 45_097_156_608, 2, "Ψ_g(experts)"),
        Term("all-gather (experts)", 22_548_578_304, 2, "Ψ_p(experts)"),
    )
    assert comm.bytes == 42_252_456_960


def test_experts_stage_3(moe: Scenario) -> None:
    """Dense: ⌈(2 × 3,211,272,192 + 6,422,544,384) × 7 ÷ 8⌉ = 11,239,452,672; experts:
    ⌈(2 × 22,548,578,304 + 45,097,156,608) × 1 ÷ 2⌉ = 45,097,156,608; 56,336,609,280 B."""
    comm = communication(moe, 3)
    assert comm.terms == (
        Term("all-gather forward", 3_211_272_192, 8, "Ψ_p"),
        Term("all-gather backward", 3_211_272_192, 8, "Ψ_p"),
        Term("reduce-scatter", 6_422_544_384, 8, "Ψ_g"),
        Term("all-gather forward (experts)", 22_548_578_304, 2, "Ψ_p(experts)"),
        Term("all-gather backward (experts)", 22_548_578_304, 2, "Ψ_p(experts)"),
        Term("reduce-scatter (experts)", 45_097_156_608, 2, "Ψ_g(experts)"),
    )
    assert comm.bytes == 56_336_609_280
    assert comm.collectives == (
        "all-gather in forward + all-gather in backward + reduce-scatter of gradients; the experts' over their "
        "D ÷ ep = 2 ranks"
    )


def test_a_term_s_group_is_its_key() -> None:
    """Terms over the same ranks share a rounding; HSDP's across-group term is another group even at the same
    size."""
    assert Term("x", 1, 4, "Ψ").key == (False, 4)
    assert Term("x", 1, 4, "Ψ", across=True).key == (True, 4)


def test_units_kept_gathered_after_forward_are_not_gathered_again_in_backward() -> None:
    """Stage 3 with reshard_after_forward 0 (FSDP2 keeps each unit unsharded into its backward): one all-gather a
    micro batch, Ψ_p, not two; the seed's ⌈(Ψ_p + Ψ_g) × 7 ÷ 8⌉ with Ψ_p = N × 2 and Ψ_g = N × 2 at D = 8."""
    s = parse_scenario({"reshard_after_forward": 0})
    c = communication(s, 3)
    assert [t.what for t in c.terms] == ["all-gather forward", "reduce-scatter"]
    assert c.bytes == -(-(7_000_000_000 * 2 + 7_000_000_000 * 2) * 7 // 8) == 24_500_000_000
    assert "Ψ_p + Ψ_g" in c.formula.text
    assert communication(parse_scenario({}), 3).bytes == -(-(3 * 7_000_000_000 * 2) * 7 // 8)
