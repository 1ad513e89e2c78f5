"""The ledger against the spec's worked example and hand-computed edge cases.

Every expected number below is worked out by hand in the test's docstring; none is copied
from the code's output.
"""

from __future__ import annotations

import pytest

from app.ledger.arithmetic import ceil_div, share_bp
from app.ledger.estimate import estimate
from app.ledger.ledger import Ledger, compute_ledger
from app.ledger.scenario import Scenario, parse_scenario
from app.ledger.state.checkpoint import checkpoint_policies
from app.ledger.state.persistent import LedgerLine
from app.ledger.state.rules import CLASSES

GB = 10**9

# The spec's worked example, in decimal GB, by stage and class (7B params, D = 8,
# BF16 params/grads, FP32 master, two FP32 Adam moments).
WORKED: dict[int, dict[str, str]] = {
    # stage 0: nothing sharded: 7e9 × 2 = 14, 7e9 × 2 = 14, 7e9 × 4 = 28, 7e9 × 2 × 4 = 56
    0: {"parameters": "14", "gradients": "14", "master_weights": "28", "optimizer_states": "56"},
    # stage 1: master and optimizer ÷ 8: 28 / 8 = 3.5, 56 / 8 = 7
    1: {"parameters": "14", "gradients": "14", "master_weights": "3.5", "optimizer_states": "7"},
    # stage 2: gradients ÷ 8 too: 14 / 8 = 1.75
    2: {"parameters": "14", "gradients": "1.75", "master_weights": "3.5", "optimizer_states": "7"},
    # stage 3: parameters ÷ 8 too: 14 / 8 = 1.75
    3: {"parameters": "1.75", "gradients": "1.75", "master_weights": "3.5", "optimizer_states": "7"},
}
WORKED_TOTALS: dict[int, int] = {
    0: 112_000_000_000,  # 14 + 14 + 28 + 56
    1: 38_500_000_000,  # 14 + 14 + 3.5 + 7
    2: 26_250_000_000,  # 14 + 1.75 + 3.5 + 7
    3: 14_000_000_000,  # 1.75 + 1.75 + 3.5 + 7
}


def decimal_gb(text: str) -> int:
    """'3.5' GB -> 3,500,000,000 bytes, exactly (no float)."""
    whole, _, frac = text.partition(".")
    return int(whole) * GB + int((frac or "0").ljust(9, "0"))


def line(ledger: Ledger, stage: int, tensor_class: str) -> LedgerLine:
    (found,) = [ln for ln in ledger.stages[stage].lines if ln.tensor_class == tensor_class]
    return found


# --------------------------------------------------------------------------- worked example


@pytest.mark.parametrize("stage", [0, 1, 2, 3])
@pytest.mark.parametrize("tensor_class", CLASSES)
def test_worked_example_every_cell(seed: Scenario, stage: int, tensor_class: str) -> None:
    """Each (stage, class) cell of the spec's table, in bytes."""
    ledger = compute_ledger(seed)
    assert ledger.stages[stage].bytes_of(tensor_class) == decimal_gb(WORKED[stage][tensor_class])


@pytest.mark.parametrize(("stage", "total"), sorted(WORKED_TOTALS.items()))
def test_worked_example_stage_totals(seed: Scenario, stage: int, total: int) -> None:
    """112 / 38.5 / 26.25 / 14 GB."""
    ledger = compute_ledger(seed)
    assert ledger.stages[stage].persistent == total
    assert ledger.stages[stage].peak.persistent == total
    assert sum(ln.bytes for ln in ledger.stages[stage].lines) == total


def test_stage_order_and_four_classes(seed: Scenario) -> None:
    ledger = compute_ledger(seed)
    assert [st.stage for st in ledger.stages] == [0, 1, 2, 3]
    for st in ledger.stages:
        assert [ln.tensor_class for ln in st.lines] == list(CLASSES)


def test_stage3_gather_without_prefetch(seed: Scenario) -> None:
    """U = 400,000,000, D = 8, BF16, P = 0: (1 + 0) × (400M − ⌈400M ÷ 8⌉) × 2 = 350M × 2 = 700,000,000 B."""
    ledger = compute_ledger(seed)
    assert ledger.stages[3].peak.gather == 700_000_000
    assert [ledger.stages[s].peak.gather for s in (0, 1, 2)] == [0, 0, 0]


def test_stage3_gather_with_one_prefetched_unit(seed: Scenario) -> None:
    """P = 1: (1 + 1) × 350,000,000 × 2 = 1,400,000,000 B."""
    ledger = compute_ledger(seed.with_(prefetch=1))
    assert ledger.stages[3].peak.gather == 1_400_000_000


def test_gather_formula_substitutes_numbers(seed: Scenario) -> None:
    formula = compute_ledger(seed).stages[3].peak.gather_formula.text
    assert "400,000,000" in formula
    assert "350,000,000" in formula
    assert "700,000,000" in formula


def test_gather_is_zero_at_dp1_and_u0(seed: Scenario) -> None:
    """U − ⌈U ÷ 1⌉ = 0; and with U = 0 there is nothing to gather."""
    assert compute_ledger(seed.with_(dp=1)).stages[3].peak.gather == 0
    assert compute_ledger(seed.with_(unit_params=0)).stages[3].peak.gather == 0


def test_gather_uses_gather_width_not_param_width(seed: Scenario) -> None:
    """FSDP2 layout: FP32 shards gathered in BF16: 350,000,000 × 2 = 700,000,000, not × 4."""
    fsdp2 = seed.with_(param_bytes=4, master_bytes=0, grad_bytes=4, gather_bytes=2)
    assert compute_ledger(fsdp2).stages[3].peak.gather == 700_000_000


@pytest.mark.parametrize(
    ("stage", "peak", "fits", "headroom"),
    [
        # persistent + 0.7 GB gather at stage 3 + 20 GB declared activations; headroom = 80 GB − peak
        (0, 132_000_000_000, False, -52_000_000_000),  # 112 + 20 = 132; 80 − 132 = −52
        (1, 58_500_000_000, True, 21_500_000_000),  # 38.5 + 20 = 58.5; 80 − 58.5 = 21.5
        (2, 46_250_000_000, True, 33_750_000_000),  # 26.25 + 20 = 46.25; 80 − 46.25 = 33.75
        (3, 34_700_000_000, True, 45_300_000_000),  # 14 + 0.7 + 20 = 34.7; 80 − 34.7 = 45.3
    ],
)
def test_worked_example_peaks_and_fit(seed: Scenario, stage: int, peak: int, fits: bool, headroom: int) -> None:
    p = compute_ledger(seed).stages[stage].peak
    assert p.activations == 20_000_000_000
    assert p.buckets == 0
    assert p.overhead == 0
    assert p.contingency == 0
    assert p.subtotal == peak
    assert p.total == peak
    assert p.fits is fits
    assert p.total + p.headroom == 80_000_000_000  # the capacity
    assert p.headroom == headroom


def test_peak_exactly_at_capacity_fits(seed: Scenario) -> None:
    """fits is peak ≤ capacity: stage 3 peak 34.7 GB against 34.7 GB capacity fits with 0 headroom."""
    p = compute_ledger(seed.with_(capacity_bytes=34_700_000_000)).stages[3].peak
    assert p.fits is True
    assert p.headroom == 0
    q = compute_ledger(seed.with_(capacity_bytes=34_699_999_999)).stages[3].peak
    assert q.fits is False
    assert q.headroom == -1


@pytest.mark.parametrize(
    ("stage", "expected"),
    [
        (0, 24_500_000_000),  # ⌈2 × 14e9 × 7 ÷ 8⌉ = ⌈28e9 × 7 ÷ 8⌉ = 24.5e9
        (1, 24_500_000_000),  # ⌈(14e9 + 14e9) × 7 ÷ 8⌉ = 24.5e9
        (2, 24_500_000_000),  # same collectives as stage 1
        (3, 36_750_000_000),  # ⌈(2 × 14e9 + 14e9) × 7 ÷ 8⌉ = ⌈42e9 × 7 ÷ 8⌉ = 36.75e9 (1.5× stage 0)
    ],
)
def test_communication_per_stage(seed: Scenario, stage: int, expected: int) -> None:
    comm = compute_ledger(seed).stages[stage].communication
    assert comm.bytes == expected
    assert f"{expected:,}" in comm.formula.text


def test_communication_rounds_up_and_vanishes_at_dp1(seed: Scenario) -> None:
    """N = 7, D = 8, 2-byte widths: stage 0 = ⌈2 × 14 × 7 ÷ 8⌉ = ⌈24.5⌉ = 25; stage 3 = ⌈42 × 7 ÷ 8⌉ = ⌈36.75⌉ = 37."""
    tiny = compute_ledger(seed.with_(params=7, unit_params=7))
    assert tiny.stages[0].communication.bytes == 25
    assert tiny.stages[3].communication.bytes == 37
    solo = compute_ledger(seed.with_(dp=1))
    assert [st.communication.bytes for st in solo.stages] == [0, 0, 0, 0]


# --------------------------------------------------------------------------- edge cases


def test_uneven_division_takes_the_ceiling() -> None:
    """N = 7, D = 8: the busiest rank owns ⌈7 ÷ 8⌉ = 1 element, not 0.875.

    stage 3: parameters 1 × 2 = 2, gradients 1 × 2 = 2, master 1 × 4 = 4, optimizer 1 × 4 × 2 = 8 -> 16 B.
    stage 0: 7 × 2 + 7 × 2 + 7 × 4 + 7 × 8 = 14 + 14 + 28 + 56 = 112 B.
    """
    s = parse_scenario({"params": 7, "dp": 8})
    assert s.unit_params == 7  # min(400M, 7)
    ledger = compute_ledger(s)
    stage3 = ledger.stages[3]
    assert [ln.elements for ln in stage3.lines] == [1, 1, 1, 1]
    assert [ln.bytes for ln in stage3.lines] == [2, 2, 4, 8]
    assert stage3.persistent == 16
    assert ledger.stages[0].persistent == 112
    assert ledger.stages[1].persistent == 14 + 14 + 4 + 8
    assert ledger.stages[2].persistent == 14 + 2 + 4 + 8
    # gather: U − ⌈7 ÷ 8⌉ = 7 − 1 = 6 remote elements × 2 B
    assert stage3.peak.gather == 12


def test_uneven_division_larger() -> None:
    """N = 1,000,000,001, D = 8: ⌈N ÷ 8⌉ = 125,000,001 (125,000,000.125 rounded up); × 2 B = 250,000,002."""
    ledger = compute_ledger(parse_scenario({"params": 1_000_000_001, "dp": 8}))
    p = line(ledger, 3, "parameters")
    assert p.elements == 125_000_001
    assert p.bytes == 250_000_002
    assert "⌈1,000,000,001 ÷ 8⌉ = 125,000,001" in p.formula.text


def test_master_bytes_zero_is_an_empty_class_with_a_note(seed: Scenario) -> None:
    """master_bytes = 0: the master class is 0 bytes at every stage and says why."""
    s = seed.with_(master_bytes=0)
    ledger = compute_ledger(s)
    for stage in range(4):
        master = line(ledger, stage, "master_weights")
        assert master.bytes == 0
        assert master.copies == 0
        assert "master_bytes = 0" in master.note
    # stage 0: 14 + 14 + 0 + 56 = 84 GB; stage 3: 1.75 + 1.75 + 0 + 7 = 10.5 GB
    assert ledger.stages[0].persistent == 84_000_000_000
    assert ledger.stages[3].persistent == 10_500_000_000


def test_other_classes_carry_no_note(seed: Scenario) -> None:
    for st in compute_ledger(seed).stages:
        assert all(ln.note == "" for ln in st.lines)


def test_opt_states_zero_is_an_empty_class(seed: Scenario) -> None:
    """Plain SGD: opt_states = 0: optimizer states 0 bytes; stage 0 = 14 + 14 + 28 = 56 GB."""
    ledger = compute_ledger(seed.with_(opt_states=0))
    for stage in range(4):
        opt = line(ledger, stage, "optimizer_states")
        assert opt.bytes == 0
        assert opt.copies == 0
        assert "opt_states = 0" in opt.note
    assert ledger.stages[0].persistent == 56_000_000_000


def test_fsdp2_layout(seed: Scenario) -> None:
    """FSDP2 with bf16 param_dtype: param 4, grad 4, no master, Adam FP32.

    stage 3: ⌈7e9 ÷ 8⌉ = 875e6 elements; params 875e6 × 4 = 3.5e9, grads 3.5e9, master 0,
    optimizer 875e6 × 2 × 4 = 7e9 -> 14e9 B.
    """
    s = parse_scenario({"param_bytes": 4, "grad_bytes": 4, "master_bytes": 0, "gather_bytes": 2})
    ledger = compute_ledger(s)
    assert [ln.bytes for ln in ledger.stages[3].lines] == [3_500_000_000, 3_500_000_000, 0, 7_000_000_000]
    assert ledger.stages[3].persistent == 14_000_000_000


def test_contingency_rounds_up() -> None:
    """N = 7, D = 8, no activations, 1 % contingency at stage 0: subtotal 112 B; ⌈112 × 1 ÷ 100⌉ = ⌈1.12⌉ = 2."""
    s = parse_scenario({"params": 7, "dp": 8, "activation_bytes": 0, "contingency_pct": 1})
    p = compute_ledger(s).stages[0].peak
    assert p.subtotal == 112
    assert p.contingency == 2
    assert p.total == 114
    assert "⌈112 × 1 ÷ 100⌉ = 2 B" in p.contingency_formula.text


def test_contingency_exact_multiple_and_full() -> None:
    """25 % of 112 is exactly 28; 100 % doubles it."""
    base = parse_scenario({"params": 7, "dp": 8, "activation_bytes": 0})
    assert compute_ledger(base.with_(contingency_pct=25)).stages[0].peak.contingency == 28
    assert compute_ledger(base.with_(contingency_pct=100)).stages[0].peak.total == 224


def test_contingency_applies_to_whole_subtotal(seed: Scenario) -> None:
    """Stage 3 of the seed with 1 GB buckets, 2 GB overhead, 10 %:
    subtotal = 14 + 0.7 + 1 + 20 + 2 = 37.7 GB; contingency 3.77 GB; peak 41.47 GB.
    """
    s = seed.with_(bucket_bytes=GB, overhead_bytes=2 * GB, contingency_pct=10)
    p = compute_ledger(s).stages[3].peak
    assert (p.buckets, p.overhead) == (GB, 2 * GB)
    assert p.subtotal == 37_700_000_000
    assert p.contingency == 3_770_000_000
    assert p.total == 41_470_000_000
    assert p.headroom == 80_000_000_000 - 41_470_000_000


def test_activations_never_divided_by_dp(seed: Scenario) -> None:
    for dp in (1, 8, 131_072):
        for st in compute_ledger(seed.with_(dp=dp)).stages:
            assert st.peak.activations == 20_000_000_000
            assert "not divided by D" in st.peak.activations_formula.text


@pytest.mark.parametrize(
    ("part", "whole", "expected"),
    [
        (56, 112, 5_000),  # 50.00 %
        (1, 8, 1_250),  # 12.50 %
        (1, 3, 3_333),  # 33.333… % rounds down
        (2, 3, 6_667),  # 66.666… % rounds up
        (1, 20_000, 1),  # 0.005 % = 0.5 bp rounds half up
        (1, 20_001, 0),  # just under half a basis point
        (5, 0, 0),  # an empty stage has no shares
        (7, 7, 10_000),
    ],
)
def test_share_in_basis_points(part: int, whole: int, expected: int) -> None:
    assert share_bp(part, whole) == expected


@pytest.mark.parametrize(
    ("a", "b", "expected"), [(0, 8, 0), (1, 8, 1), (7, 8, 1), (8, 8, 1), (9, 8, 2), (10**13, 3, 3_333_333_333_334)]
)
def test_ceil_div(a: int, b: int, expected: int) -> None:
    assert ceil_div(a, b) == expected


# --------------------------------------------------------------------------- ledger lines


def test_ledger_line_fields_stage3_parameters(seed: Scenario) -> None:
    """stage 3 parameters: width 2, 1 copy, 8 owners, ⌈7e9 ÷ 8⌉ = 875,000,000 elements, 1.75e9 B."""
    ln = line(compute_ledger(seed), 3, "parameters")
    assert (ln.tensor_class, ln.width, ln.copies, ln.owners, ln.elements, ln.bytes) == (
        "parameters",
        2,
        1,
        8,
        875_000_000,
        1_750_000_000,
    )
    for number in ("7,000,000,000", "875,000,000", "1,750,000,000"):
        assert number in ln.formula.text
    assert "stage 3" in ln.evidence
    assert "ZeRO" in ln.evidence


def test_ledger_line_fields_optimizer_copies(seed: Scenario) -> None:
    """stage 0 optimizer: width 4, 2 copies, 1 owner, 7e9 elements, 7e9 × 4 × 2 = 56e9 B."""
    ln = line(compute_ledger(seed), 0, "optimizer_states")
    assert (ln.width, ln.copies, ln.owners, ln.elements, ln.bytes) == (4, 2, 1, 7_000_000_000, 56_000_000_000)
    assert "2 copies" in ln.formula.text
    assert "56,000,000,000" in ln.formula.text


@pytest.mark.parametrize(
    ("stage", "owners"),
    [
        (0, {"parameters": 1, "gradients": 1, "master_weights": 1, "optimizer_states": 1}),
        (1, {"parameters": 1, "gradients": 1, "master_weights": 8, "optimizer_states": 8}),
        (2, {"parameters": 1, "gradients": 8, "master_weights": 8, "optimizer_states": 8}),
        (3, {"parameters": 8, "gradients": 8, "master_weights": 8, "optimizer_states": 8}),
    ],
)
def test_ownership_table(seed: Scenario, stage: int, owners: dict[str, int]) -> None:
    """The spec's ownership table at D = 8."""
    st = compute_ledger(seed).stages[stage]
    assert {ln.tensor_class: ln.owners for ln in st.lines} == owners


def test_every_line_has_evidence_and_formula(seed: Scenario) -> None:
    for st in compute_ledger(seed).stages:
        for ln in st.lines:
            assert ln.evidence.strip()
            assert ln.formula.text.endswith(f"= {ln.bytes:,} B")
            assert ln.bytes == ln.elements * ln.width * ln.copies


def test_evidence_names_the_partitioning_stage(seed: Scenario) -> None:
    ledger = compute_ledger(seed)
    assert "stage 2 partitions gradients" in line(ledger, 2, "gradients").evidence
    assert "stage 1" in line(ledger, 1, "optimizer_states").evidence
    assert "§5.2" in line(ledger, 3, "gradients").evidence


def test_stage_ledger_bytes_of_unknown_class(seed: Scenario) -> None:
    with pytest.raises(KeyError):
        compute_ledger(seed).stages[0].bytes_of("activations")


# --------------------------------------------------------------------------- checkpoint ledger


def test_checkpoint_policies_worked_example(seed: Scenario) -> None:
    """sharded: 0 / 0.  full_params: device U × 2 = 800,000,000; host N × 2 = 14e9.
    full_state: device 800,000,000; host 7e9 × (2 + 4 + 2 × 4) = 7e9 × 14 = 98e9 > 80e9 -> flagged.
    """
    policies = {c.policy: c for c in estimate(seed).checkpoint}
    assert list(policies) == ["sharded", "full_params", "full_state"]
    sharded, full_params, full_state = policies["sharded"], policies["full_params"], policies["full_state"]
    assert (sharded.device_bytes, sharded.host_bytes, sharded.flagged) == (0, 0, False)
    assert (full_params.device_bytes, full_params.host_bytes, full_params.flagged) == (
        800_000_000,
        14_000_000_000,
        False,
    )
    assert (full_state.device_bytes, full_state.host_bytes, full_state.flagged) == (
        800_000_000,
        98_000_000_000,
        True,
    )
    assert "98,000,000,000" in full_state.flag
    assert sharded.flag == full_params.flag == ""
    # save peaks: persistent(stage) + device transient + overhead (0)
    assert sharded.save_peaks == (112 * GB, 38_500_000_000, 26_250_000_000, 14 * GB)
    assert full_params.save_peaks[3] == 14_800_000_000


def test_checkpoint_full_state_not_flagged_when_small() -> None:
    """1e9 params: full state 1e9 × 14 = 14e9 ≤ 80e9 -> not flagged."""
    s = parse_scenario({"params": 1_000_000_000})
    full_state = checkpoint_policies(s, (0, 0, 0, 0))[2]
    assert full_state.host_bytes == 14_000_000_000
    assert full_state.flagged is False
    # the threshold is the device capacity: 14e9 > 13.9e9 flags it
    assert checkpoint_policies(s.with_(capacity_bytes=13_900_000_000), (0, 0, 0, 0))[2].flagged is True


def test_checkpoint_overhead_enters_save_peak(seed: Scenario) -> None:
    s = seed.with_(overhead_bytes=5)
    full_params = checkpoint_policies(s, (10, 20, 30, 40))[1]
    assert full_params.save_peaks == (10 + 800_000_000 + 5, 20 + 800_000_005, 30 + 800_000_005, 40 + 800_000_005)
