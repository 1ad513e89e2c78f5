"""The checks that read a schedule (3 per instant, 4, 6, 7 and 8) on the frozen model reference.

Each passes on the production ledger with its exact message, and fails on a copy broken where it guards,
naming the stage, the instant and both numbers. A check whose failure path no test drives may never fail.

The ledgers are fixtures, not module constants: a module is imported once for a whole mutation run, so a
ledger computed at import would be the unmutated code's.
"""

from __future__ import annotations

import pytest

from app.ledger.ledger import Ledger, compute_ledger
from app.ledger.scenario import DEFAULT_SCENARIO, Scenario, parse_scenario
from app.ledger.state.rules import Rules
from app.ledger.verify.checks import activation_invariance, frozen_model_scenario, gather_presence
from app.ledger.verify.frozen import FROZEN_MODEL_SCENARIO, FROZEN_MODEL_TITLE
from app.ledger.verify.results import CheckResult
from app.ledger.verify.schedule_checks import gradient_filling, reduce_scatter_presence
from tests.ledger.verify.perturb import with_instant, with_peak, without_instant

# Llama-2-7B by hand: a decoder layer is q, k, v, o (4 × 4,096²) + gate, up, down (3 × 4,096 × 11,008) + two
# norms (2 × 4,096) = 202,383,360 parameters; the root is the embedding and the head (32,000 × 4,096 each) and
# the final norm (4,096) = 262,148,096; the model 32 × 202,383,360 + 262,148,096 = 6,738,415,616.
LAYER = 4 * 4_096**2 + 3 * 4_096 * 11_008 + 2 * 4_096
ROOT = 2 * 32_000 * 4_096 + 4_096
assert (LAYER, ROOT, 32 * LAYER + ROOT) == (202_383_360, 262_148_096, 6_738_415_616)
# The root's reduce-scatter input in the FP32 reduce width: 262,148,096 × 4 = 1,048,592,384 B.
ROOT_REDUCE = ROOT * 4
# Gradients per rank in FP32: whole at stages 0–1 (6,738,415,616 × 4), ⌈6,738,415,616 ÷ 8⌉ × 4 from stage 2.
WHOLE_GRADS, SHARDED_GRADS = 6_738_415_616 * 4, 842_301_952 * 4
# Remote shards of one layer in the BF16 gather width: (202,383,360 − 202,383,360 ÷ 8) × 2 = 354,170,880 B.
REMOTE = (LAYER - LAYER // 8) * 2
TORCHTITAN: dict[str, object] = {"model": "llama-2-7b", "stack": "torchtitan", "dp": 8}


@pytest.fixture(scope="module")
def model() -> Ledger:
    return compute_ledger(FROZEN_MODEL_SCENARIO)


@pytest.fixture(scope="module")
def titan() -> Ledger:
    """torchtitan's stack: the chunked loss, and Accelerate-style units (the embedding alone is the last unit)."""
    return compute_ledger(parse_scenario(TORCHTITAN))


def instant_bytes(ledger: Ledger, stage: int, key: str, category: str) -> int:
    walk = ledger.stages[stage].peak.schedule
    assert walk is not None
    return next(i.bytes_of(category) for i in walk.instants if i.key == key)


# --------------------------------------------------------------------------- 8. the frozen model reference


def test_the_frozen_model_reference_passes(model: Ledger) -> None:
    assert frozen_model_scenario(compute_ledger) == CheckResult(
        "frozen-model-scenario", True, f"{FROZEN_MODEL_TITLE} reproduces its 21 stage-3 instants and every stage's peak"
    )


def test_a_peak_one_byte_off_fails_naming_the_stage(model: Ledger) -> None:
    wrong = with_peak(model, 2, total=39_027_396_609)
    assert frozen_model_scenario(lambda s: wrong) == CheckResult(
        "frozen-model-scenario",
        False,
        f"{FROZEN_MODEL_TITLE}, stage 2 peak: root-post-backward 39,027,396,609 B, hand-computed root-post-backward "
        "39,027,396,608 B",
    )


def test_the_right_total_at_the_wrong_instant_fails(model: Ledger) -> None:
    """Stage 1's peak without its schedule (the declared peak) but with the hand-computed total: the instant
    is part of what is frozen, not only the bytes."""
    wrong = with_peak(model, 1, schedule=None, total=60_776_812_544)
    result = frozen_model_scenario(lambda s: wrong)
    assert result == CheckResult(
        "frozen-model-scenario",
        False,
        f"{FROZEN_MODEL_TITLE}, stage 1 peak: declared 60,776,812,544 B, hand-computed optimizer-step 60,776,812,544 B",
    )


def test_a_stage_3_instant_one_byte_off_fails_naming_it(model: Ledger) -> None:
    wrong = with_instant(model, 3, "backward-layer-30", total=14_588_307_457)
    assert frozen_model_scenario(lambda s: wrong) == CheckResult(
        "frozen-model-scenario",
        False,
        f"{FROZEN_MODEL_TITLE}, stage 3 backward-layer-30: got 14,588,307,457 B, hand-computed 14,588,307,456 B",
    )


def test_a_missing_stage_3_instant_fails_as_0_bytes(model: Ledger) -> None:
    wrong = without_instant(model, 3, "head-backward")
    assert frozen_model_scenario(lambda s: wrong) == CheckResult(
        "frozen-model-scenario",
        False,
        f"{FROZEN_MODEL_TITLE}, stage 3 head-backward: got 0 B, hand-computed 12,735,404,032 B",
    )


# --------------------------------------------------------------------------- 7. gradient filling


def test_gradient_filling_passes_on_the_reference_and_under_the_chunked_loss(model: Ledger, titan: Ledger) -> None:
    """Under the chunked loss the head's backward runs inside the loss, so stages 0–1 hold the head's gradient
    (32,000 × 4,096 × 4 B) at the loss backward: the check reads the end of forward there instead."""
    passed = CheckResult("gradient-filling", True, "no gradient at the loss backward, every one at the optimizer step")
    assert gradient_filling(model) == passed
    assert instant_bytes(titan, 0, "loss-backward", "gradients") == 32_000 * 4_096 * 4
    assert gradient_filling(titan) == passed


def test_a_gradient_before_backward_fails(model: Ledger) -> None:
    wrong = with_instant(model, 0, "loss-backward", gradients=1)
    assert gradient_filling(wrong) == CheckResult(
        "gradient-filling",
        False,
        "stage 0 loss backward gradients: 1 B resident, expected 0 B (zero_grad(set_to_none=True): gradients appear "
        "during backward)",
    )


def test_a_gradient_before_backward_fails_at_a_later_stage(model: Ledger) -> None:
    """Every stage is read, not only the first."""
    wrong = with_instant(model, 3, "loss-backward", gradients=4)
    assert gradient_filling(wrong).message.startswith("stage 3 loss backward gradients: 4 B resident")


def test_under_the_chunked_loss_a_gradient_at_the_end_of_forward_fails(titan: Ledger) -> None:
    wrong = with_instant(titan, 2, "end-of-forward", gradients=2)
    result = gradient_filling(wrong)
    assert (result.check, result.passed) == ("gradient-filling", False)
    assert result.message.startswith("stage 2 end of forward gradients: 2 B resident, expected 0 B")


def test_a_missing_gradient_at_the_optimizer_step_fails(model: Ledger) -> None:
    """Stage 2 keeps ⌈6,738,415,616 ÷ 8⌉ × 4 = 3,369,207,808 B of sharded gradients; one byte fewer fails."""
    assert instant_bytes(model, 2, "optimizer-step", "gradients") == SHARDED_GRADS == 3_369_207_808
    wrong = with_instant(model, 2, "optimizer-step", gradients=SHARDED_GRADS - 1)
    assert gradient_filling(wrong) == CheckResult(
        "gradient-filling",
        False,
        "stage 2 optimizer step gradients: 3,369,207,807 B, fewer than the persistent 3,369,207,808 B",
    )
    assert instant_bytes(model, 0, "optimizer-step", "gradients") == WHOLE_GRADS


@pytest.mark.parametrize("check", [gradient_filling, reduce_scatter_presence])
def test_without_a_schedule_the_schedule_checks_do_not_apply(check: object, seed: Scenario) -> None:
    ledger = compute_ledger(seed)
    name = "gradient-filling" if check is gradient_filling else "reduce-scatter-presence"
    why = ledger.stages[3].peak.why_declared
    assert why  # the seed has no model: the declared peak says why
    assert check(ledger) == CheckResult(name, True, f"not applicable: the declared peak has no schedule ({why})")  # type: ignore[operator]
    # a declared peak that gives no reason reads as "no model"
    bare = with_peak(ledger, 3, why_declared="")
    assert check(bare).message == "not applicable: the declared peak has no schedule (no model)"  # type: ignore[operator]


# --------------------------------------------------------------------------- 6. the reduce-scatter input


def test_reduce_scatter_presence_passes_with_the_root_and_with_the_embedding(model: Ledger, titan: Ledger) -> None:
    """The root's 262,148,096 × 4 = 1,048,592,384 B; with the embedding as the last unit (torchtitan) its
    32,000 × 4,096 × 4 = 524,288,000 B at stage 3, the root's at stage 2."""
    assert reduce_scatter_presence(model) == CheckResult(
        "reduce-scatter-presence", True, "stages 2–3 root post-backward hold ≥ 1,048,592,384 B of reduce-scatter input"
    )
    assert reduce_scatter_presence(titan) == CheckResult(
        "reduce-scatter-presence",
        True,
        "stages 2–3 root post-backward ≥ 1,048,592,384 B; embedding post-backward ≥ 524,288,000 B of reduce-scatter "
        "input",
    )


@pytest.mark.parametrize("stage", [2, 3])
def test_a_short_reduce_scatter_input_fails(model: Ledger, stage: int) -> None:
    wrong = with_instant(model, stage, "root-post-backward", reduce_scatter=ROOT_REDUCE - 1)
    assert reduce_scatter_presence(wrong) == CheckResult(
        "reduce-scatter-presence",
        False,
        f"stage {stage} root post-backward: 1,048,592,383 B of reduce-scatter input, fewer than the root's "
        "262,148,096 elements × 4 B = 1,048,592,384 B",
    )


def test_stages_0_and_1_have_no_reduce_scatter_input_to_hold(model: Ledger) -> None:
    """ZeRO-0/1 reduce after backward, in the declared buckets: nothing is read there."""
    wrong = with_instant(with_instant(model, 0, None, reduce_scatter=0), 1, None, reduce_scatter=0)
    assert reduce_scatter_presence(wrong).passed


def test_a_short_embedding_reduce_scatter_input_fails(titan: Ledger) -> None:
    wrong = with_instant(titan, 3, "embedding-post-backward", reduce_scatter=0)
    assert reduce_scatter_presence(wrong) == CheckResult(
        "reduce-scatter-presence",
        False,
        "stage 3 the embedding's post-backward: 0 B of reduce-scatter input, fewer than the embedding's 131,072,000 "
        "elements × 4 B = 524,288,000 B",
    )


# --------------------------------------------------------------------------- 3. activations, instant by instant


def test_activation_invariance_counts_the_instants_it_compares(model: Ledger) -> None:
    """Stages 0–1 walk 12 instants (end of forward, loss and head backward, layers 31, 30, 1 and 0 early and
    done, the optimizer step), stage 2 two more (the root's gradients and post-backward), stage 3 the 21 of
    the frozen reference less its 4 all-gather copy-outs (…-unshard), which D = 1 does not have:
    12 + 12 + 14 + 17 = 55."""
    assert activation_invariance(model) == CheckResult(
        "activation-invariance", True, "the saved activations of all 55 instants are the same at dp = 8 and at dp = 1"
    )


def test_activations_one_byte_off_at_one_instant_fail(model: Ledger) -> None:
    here = instant_bytes(model, 2, "backward-layer-1", "activations")
    wrong = with_instant(model, 2, "backward-layer-1", activations=here + 1)
    assert activation_invariance(wrong) == CheckResult(
        "activation-invariance",
        False,
        f"stage 2 backward at layer 1 activations: {here + 1:,} B at dp = 8 but {here:,} B at dp = 1",
    )


def test_a_stage_without_a_schedule_is_skipped_not_the_rest(model: Ledger) -> None:
    """Stage 0 read as declared: stages 1–3 are still compared, 12 + 14 + 17 = 43 instants."""
    assert activation_invariance(with_peak(model, 0, schedule=None)).message == (
        "the saved activations of all 43 instants are the same at dp = 8 and at dp = 1"
    )


def test_a_copy_out_instant_is_not_compared(model: Ledger) -> None:
    """D = 1 gathers nothing, so it has no …-unshard instant to compare with."""
    wrong = with_instant(model, 3, "backward-layer-1-unshard", activations=1)
    assert activation_invariance(wrong).passed


def test_activations_divided_by_d_fail_at_d_2() -> None:
    """The rule that divides activations by D, at D = 2: the end of forward holds half of what it holds at
    D = 1 (the comparison is with D = 1 itself, not with another D)."""
    whole = instant_bytes(compute_ledger(FROZEN_MODEL_SCENARIO.with_(dp=1)), 0, "end-of-forward", "activations")
    divided = compute_ledger(FROZEN_MODEL_SCENARIO.with_(dp=2), Rules(activations_divided_by_dp=True))
    assert activation_invariance(divided) == CheckResult(
        "activation-invariance",
        False,
        f"stage 0 end of forward activations: {whole // 2:,} B at dp = 2 but {whole:,} B at dp = 1",
    )


# --------------------------------------------------------------------------- 4. the gather, with a schedule


def test_gather_presence_reads_the_instant_that_gathers_most(model: Ledger) -> None:
    walk = model.stages[3].peak.schedule
    assert walk is not None
    most = max(walk.instants, key=lambda i: i.part("gather"))
    assert most.part("gather") >= REMOTE == 354_170_880
    assert gather_presence(model) == CheckResult(
        "gather-presence",
        True,
        f"stage 3 {most.name} holds {most.part('gather'):,} B ≥ 354,170,880 B of remote shards",
    )


@pytest.mark.parametrize("held", [0, REMOTE - 1])
def test_a_schedule_that_gathers_less_than_one_unit_fails(model: Ledger, held: int) -> None:
    """Every stage-3 instant holding ``held`` B unsharded: the first of them (forward at layer 0) is named."""
    wrong = with_instant(model, 3, None, unsharded_params=held, all_gather=0)
    assert gather_presence(wrong) == CheckResult(
        "gather-presence",
        False,
        f"stage 3 parameters: the forward at layer 0 holds {held:,} B of unsharded parameters, fewer than the "
        "354,170,880 B of remote shards of one 202,383,360-parameter unit",
    )


def test_gather_presence_counts_the_all_gather_outputs_too(model: Ledger) -> None:
    """Half the remote bytes unsharded and half in flight still hold one unit's remote shards."""
    wrong = with_instant(model, 3, None, unsharded_params=REMOTE // 2, all_gather=REMOTE // 2)
    assert gather_presence(wrong).passed


def test_the_seed_has_no_schedule_to_read() -> None:
    assert gather_presence(compute_ledger(DEFAULT_SCENARIO)).message == (
        "stage 3 peak holds 700,000,000 B ≥ 700,000,000 B of remote shards"
    )
