"""The peak's formulas: the declared peak's terms, and the schedule-aware peak's instant formulas, by hand.

The page shows each part of the peak with its arithmetic; here each formula is held whole, its numbers
computed in the comments from the spec ("Training peak") and the model's shapes, never read from the peak.
"""

from __future__ import annotations

import dataclasses

import pytest

from app.ledger.ledger import Ledger, compute_ledger
from app.ledger.peak.declared import (
    activation_bytes,
    contingency,
    declared_peak,
    gather_bytes,
    max_subtotal,
    remote_unit_elements,
    training_peak,
)
from app.ledger.peak.schedule.instants import Instant
from app.ledger.scenario import Scenario, parse_scenario
from app.ledger.state.rules import PRODUCTION, Rules
from app.ledger.verify.frozen import FROZEN_MODEL_SCENARIO


@pytest.fixture(scope="module")
def model() -> Ledger:
    return compute_ledger(FROZEN_MODEL_SCENARIO)


# --------------------------------------------------------------------------- the declared peak


def test_the_gather_with_and_without_a_prefetch(seed: Scenario) -> None:
    """(1 + P) × (U − ⌈U ÷ D⌉) × 2 B: 400e6 − 50e6 = 350e6 remote elements; P = 0: 700e6 B, P = 1: 1.4e9 B."""
    assert compute_ledger(seed).stages[3].peak.gather_formula.text == (
        "(1 + 0) × (400,000,000 − ⌈400,000,000 ÷ 8⌉) × 2 B = 1 × 350,000,000 × 2 B = 700,000,000 B"
    )
    assert compute_ledger(seed.with_(prefetch=1)).stages[3].peak.gather_formula.text == (
        "(1 + 1) × (400,000,000 − ⌈400,000,000 ÷ 8⌉) × 2 B = 2 × 350,000,000 × 2 B = 1,400,000,000 B"
    )


def test_a_rule_without_the_gather_says_so_at_stage_3_only(seed: Scenario) -> None:
    rules = Rules(gather_peak=False)
    three, two = declared_peak(seed, 3, 0, rules), declared_peak(seed, 2, 0, rules)
    assert (three.gather, three.gather_counted, three.gather_formula.text) == (0, False, "all-gather not counted")
    assert (two.gather, two.gather_counted) == (0, True)  # stages 0–2 gather nothing under any rule
    assert two.gather_formula.text == "stages 0–2 hold full parameters: nothing to gather"


def test_the_gather_at_another_degree(seed: Scenario) -> None:
    """The fit finder's D = 16: 400e6 − ⌈400e6 ÷ 16⌉ = 375e6 remote elements, × 2 B = 750e6 B."""
    assert remote_unit_elements(seed, 16) == 375_000_000
    assert remote_unit_elements(seed) == 350_000_000
    assert gather_bytes(seed, 3, PRODUCTION, 16) == 750_000_000
    assert [gather_bytes(seed, st, PRODUCTION) for st in range(4)] == [0, 0, 0, 700_000_000]


def test_the_gather_of_an_expert_split_unit() -> None:
    """Mixtral-8x7B, ep = 4, D = 8: the largest unit (a layer) is 41,984,000 dense parameters over 8 and 2 × 176,160,768
    = 352,321,536 expert parameters over 2: 394,305,536 − 5,248,000 − 176,160,768 = 212,896,768 remote elements."""
    s = parse_scenario({"model": "mixtral-8x7b-v0.1", "ep": 4, "dp": 8, "param_bytes": 2})
    peak = compute_ledger(s).stages[3].peak
    assert peak.gather == 212_896_768 * 2
    assert peak.gather_formula.text == (
        "(1 + 0) × (394,305,536 − (⌈41,984,000 ÷ 8⌉ + ⌈352,321,536 ÷ 2⌉)) × 2 B = 1 × 212,896,768 × 2 B = 425,793,536 B"
    )


def test_activations_never_divided_and_the_mutant_that_divides_them(seed: Scenario) -> None:
    assert compute_ledger(seed).stages[1].peak.activations_formula.text == "20,000,000,000 B, not divided by D"
    divided = compute_ledger(seed, Rules(activations_divided_by_dp=True)).stages[1].peak
    assert divided.activations_formula.text == "20,000,000,000 B ÷ 8 = 2,500,000,000 B"
    assert activation_bytes(seed, Rules(activations_divided_by_dp=True), dp=4) == 5_000_000_000  # 20e9 ÷ 4
    assert activation_bytes(seed, PRODUCTION, dp=4) == 20_000_000_000


def test_the_contingency_rounds_up(seed: Scenario) -> None:
    """10 % of stage 3's 34.7e9 B: ⌈34.7e9 × 10 ÷ 100⌉ = 3.47e9 B; 1 % of 101 B: ⌈1.01⌉ = 2 B."""
    peak = compute_ledger(seed.with_(contingency_pct=10)).stages[3].peak
    assert (peak.subtotal, peak.contingency, peak.total) == (34_700_000_000, 3_470_000_000, 38_170_000_000)
    assert peak.contingency_formula.text == "⌈34,700,000,000 × 10 ÷ 100⌉ = 3,470,000,000 B"
    assert [contingency(101, 1), contingency(100, 1), contingency(0, 50), contingency(7, 100)] == [2, 1, 0, 7]


@pytest.mark.parametrize(
    ("capacity", "pct", "largest"),
    [
        (100, 0, 100),
        (100, 10, 90),  # 90 + 9 = 99 fits, 91 + ⌈9.1⌉ = 101 does not
        (101, 10, 91),  # 91 + ⌈9.1⌉ = 101
        (104, 3, 100),  # 100 + 3 = 103; 101 + ⌈3.03⌉ = 105
        (1, 100, 0),  # 1 + 1 = 2 > 1
    ],
)
def test_the_largest_subtotal_that_fits(capacity: int, pct: int, largest: int) -> None:
    assert max_subtotal(capacity, pct) == largest


def test_without_ledger_lines_the_peak_is_declared(seed: Scenario) -> None:
    peak = training_peak(FROZEN_MODEL_SCENARIO, 3, 0, PRODUCTION)
    assert (peak.kind, peak.why_declared, peak.schedule, peak.instant) == ("declared", "no ledger lines given", None,
                                                                           None)  # fmt: skip
    assert peak.declared_peak is peak


# --------------------------------------------------------------------------- the instant formulas


def test_the_gather_at_the_worst_instant(model: Ledger) -> None:
    """Stage 3's worst instant is layer 1's backward: the root (262,148,096 parameters) and layer 1 (202,383,360)
    unsharded in BF16, and layer 0 prefetched: 524,296,192 + 404,766,720 + 404,766,720 = 1,333,829,632 B."""
    peak = model.stages[3].peak
    assert peak.gather == 1_333_829_632
    assert peak.gather_formula.text == (
        "at the backward at layer 1: root unit unsharded (until its post-backward): 262,148,096 elements × 2 B = "
        "524,296,192 B + layer 1 unsharded: 202,383,360 elements × 2 B = 404,766,720 B + all-gather output of the "
        "layer prefetched for the backward ahead (the whole padded unit): 202,383,360 elements × 2 B = "
        "404,766,720 B; total 1,333,829,632 B"
    )


def test_two_entries_have_a_total(model: Ledger) -> None:
    """Stage 3's activations at layer 1's backward, two entries: what is saved (two checkpointed inputs, s·b·h × 2 B
    = 4,096 × 4,096 × 2 = 33,554,432 B each, and layer 1's recomputed 629,702,656 B: 696,811,520 B) and the op's
    temporaries (the activation gradient 33,554,432 B and the MLP's gate and up gradients 2 × 4,096 × 11,008 × 2 B
    = 180,355,072 B: 213,909,504 B); 696,811,520 + 213,909,504 = 910,721,024 B."""
    peak = model.stages[3].peak
    assert peak.activations == 2 * 33_554_432 + 629_702_656 + 33_554_432 + 2 * 4_096 * 11_008 * 2 == 910_721_024
    assert peak.activations_formula.text == (
        "at the backward at layer 1: activations of layers 0 … 1 and layer 1's recomputed set: 2 × 33,554,432 B + "
        "629,702,656 B = 696,811,520 B + layer 1's backward: the activation gradient and the widest pair of op "
        "gradients: s·b·h × 2 B = 33,554,432 B + 2·s·b·i × 2 B = 2·4,096·1·11,008 × 2 B (the MLP's gate and up "
        "gradients) = 213,909,504 B; total 910,721,024 B"
    )


def test_one_entry_has_no_total(model: Ledger) -> None:
    """Stage 0's worst instant is the optimizer step: its only activation-part entry is AdamW's two temporaries
    of the largest tensor (the 32,000 × 4,096 embedding) in FP32: 2 × 131,072,000 × 4 = 1,048,576,000 B."""
    peak = model.stages[0].peak
    assert peak.activations == 1_048_576_000
    assert peak.activations_formula.text == (
        "at the optimizer step: the optimizer's temporaries for its largest tensor (model.embed_tokens.weight): sqrt "
        "of the second moment and the update's denominator: 2 × 131,072,000 elements × 4 B = 1,048,576,000 B"
    )
    assert peak.gather_formula.text == "stages 0–2 hold full parameters: nothing to gather"


def test_an_instant_without_the_part_says_so(model: Ledger) -> None:
    """Stage 3's optimizer step holds nothing unsharded; an instant with no entries holds no activations."""
    st = model.stages[3]
    walk = st.peak.schedule
    assert walk is not None
    step = next(i for i in walk.instants if i.key == "optimizer-step")
    at_step = dataclasses.replace(st.peak, schedule=dataclasses.replace(walk, peak=step))
    assert at_step.gather_formula.text == "nothing unsharded at the optimizer step"
    bare = Instant("x", "moment x", "backward", 0, step.sums, lambda index: ())
    at_bare = dataclasses.replace(st.peak, schedule=dataclasses.replace(walk, peak=bare))
    assert at_bare.activations_formula.text == "no activations at the moment x"


# --------------------------------------------------------------------------- the schedule-aware peak's verdict


def test_the_worst_instant_fits_a_device_of_exactly_its_size() -> None:
    """The reference's stage-3 worst instant is 16,549,787,648 B (frozen by hand): a device of exactly that
    fits with 0 B to spare, one byte less does not."""
    exact = compute_ledger(FROZEN_MODEL_SCENARIO.with_(capacity_bytes=16_549_787_648)).stages[3].peak
    assert (exact.total, exact.fits, exact.headroom) == (16_549_787_648, True, 0)
    short = compute_ledger(FROZEN_MODEL_SCENARIO.with_(capacity_bytes=16_549_787_647)).stages[3].peak
    assert (short.fits, short.headroom) == (False, -1)


def test_the_contingency_is_on_top_of_the_worst_instant() -> None:
    """10 %: ⌈16,549,787,648 × 10 ÷ 100⌉ = ⌈1,654,978,764.8⌉ = 1,654,978,765 B; total 18,204,766,413 B."""
    peak = compute_ledger(FROZEN_MODEL_SCENARIO.with_(contingency_pct=10)).stages[3].peak
    assert (peak.subtotal, peak.contingency, peak.total) == (16_549_787_648, 1_654_978_765, 18_204_766_413)
    assert peak.instant is not None and peak.instant.key == "backward-layer-1"


def test_a_schedule_peak_keeps_what_its_rules_say() -> None:
    """The flags the declared formulas read are the rules', on the schedule-aware peak too."""
    rules = Rules(gather_peak=False, activations_divided_by_dp=True)
    ledger = compute_ledger(FROZEN_MODEL_SCENARIO, rules)
    three, two = ledger.stages[3].peak, ledger.stages[2].peak
    assert three.kind == "schedule"
    assert (three.gather_counted, three.activations_divided) == (False, True)
    assert (two.gather_counted, two.activations_divided) == (True, True)
    assert three.declared is not None and three.declared.kind == "declared"
    production = compute_ledger(FROZEN_MODEL_SCENARIO).stages[3].peak
    assert (production.gather_counted, production.activations_divided) == (True, False)
