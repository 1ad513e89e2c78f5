"""The mutation kill lists: seven one-rule mutants, each killed by a named check.

On the frozen references (the seed's scenario and the model reference) all seven die, always. On a
user's scenario a mutant may survive only where it is equivalent, and the kill list says why: the
two that break the schedule-aware peak are equivalent on any scenario without a model.
"""

from __future__ import annotations

import pytest

from app.ledger.estimate import estimate
from app.ledger.ledger import compute_ledger
from app.ledger.scenario import DEFAULT_SCENARIO, Scenario, parse_scenario
from app.ledger.state.rules import PRODUCTION, Rules
from app.ledger.verify.checks import run_checks
from app.ledger.verify.frozen import FROZEN_MODEL_SCENARIO, FROZEN_SCENARIO
from app.ledger.verify.mutants import MUTANTS, Mutant, MutationResult, kill_list, reference_kill_list, try_mutant
from app.ledger.verify.results import ALL_CHECKS, FROZEN_CHECKS, SCENARIO_CHECKS

SPEC_IDS = [
    "replicate-optimizer-stage1",
    "shard-params-stage2",
    "omit-master-copy",
    "divide-activations-by-dp",
    "erase-gather-peak",
]
SCHEDULE_IDS = ["drop-reduce-scatter-buffer", "keep-all-grads-at-activation-peak"]
HOST_IDS = ["forget-pinned-buffers"]
LAYOUT_IDS = ["flatten-shard-groups"]
ALL_IDS = [*SPEC_IDS, *SCHEDULE_IDS, *LAYOUT_IDS, *HOST_IDS]
NO_SCHEDULE = (
    "the declared peak has no schedule to break (no model: without the layer structure there is no schedule to walk)"
)

# On the frozen scenario (7e9 params, D = 8, widths 2/2/4/2×4, U = 400M, 20e9 activations), by hand:
# (killing check, stage, class, mutant's number, correct number)
FROZEN_KILLS: dict[str, tuple[str, str, str, str, str]] = {
    # stage 1 master left whole: 7e9 × 4 = 28e9 instead of 875e6 × 4 = 3.5e9
    "replicate-optimizer-stage1": ("oracle-agreement", "stage 1", "master_weights", "28,000,000,000", "3,500,000,000"),
    # stage 2 parameters sharded: 875e6 × 2 = 1.75e9 instead of 7e9 × 2 = 14e9
    "shard-params-stage2": ("oracle-agreement", "stage 2", "parameters", "1,750,000,000", "14,000,000,000"),
    # master dropped: 0 at stage 0 instead of 7e9 × 4 = 28e9
    "omit-master-copy": ("oracle-agreement", "stage 0", "master_weights", "0 B", "28,000,000,000"),
    # activations ÷ 8: 20e9 ÷ 8 = 2.5e9 instead of 20e9
    "divide-activations-by-dp": ("activation-invariance", "stage 0", "activations", "2,500,000,000", "20,000,000,000"),
    # gather erased: 0 instead of (400M − 50M) × 2 = 700e6 remote bytes
    "erase-gather-peak": ("gather-presence", "stage 3", "parameters", "0 B", "700,000,000"),
    # On the model reference (Llama-2-7B, FSDP2 layout, D = 8): the root (embedding 32,000 × 4,096 + final norm
    # 4,096 + head 32,000 × 4,096 = 262,148,096 parameters) reduce-scattered from an FP32 buffer: 1,048,592,384 B,
    # first held at stage 2's root post-backward
    "drop-reduce-scatter-buffer": ("reduce-scatter-presence", "stage 2", "root post-backward", "0 B",
                                   "1,048,592,384"),
    # every gradient kept: stage 0 holds 6,738,415,616 × 4 B = 26,953,662,464 B at the loss backward, where 0 B
    "keep-all-grads-at-activation-peak": ("gradient-filling", "stage 0", "loss backward", "26,953,662,464",
                                          "expected 0 B"),
    # both offloads to the CPU, stage 1 per node: 8 × (875e6 × (4 + 8 + 4) B) = 112e9 without the pinned 16-bit
    # staging copy (875e6 × 2 B) and the largest parameter's gradient buffer (400e6 × 2 B): 132.4e9 with them
    # split over all 8 ranks instead of the shard group's 4: stage 1 master 875e6 × 4 = 3.5e9 instead of
    # ⌈7e9 ÷ 4⌉ × 4 = 7e9
    "flatten-shard-groups": ("oracle-agreement", "stage 1", "master_weights in shard groups of 4", "3,500,000,000",
                             "7,000,000,000"),
    "forget-pinned-buffers": ("host-agreement", "stage 1", "host with both offloads", "112,000,000,000",
                              "132,400,000,000"),
}  # fmt: skip


def by_id(results: tuple[MutationResult, ...]) -> dict[str, MutationResult]:
    return {m.id: m for m in results}


def test_mutant_ids_are_the_spec_ids() -> None:
    assert [m.id for m in MUTANTS] == ALL_IDS
    assert all(m.rules != PRODUCTION for m in MUTANTS)
    assert len({m.rule for m in MUTANTS}) == 9


@pytest.mark.parametrize("mutant_id", ALL_IDS)
def test_reference_kill_list_kills_every_mutant_by_a_named_check(mutant_id: str) -> None:
    check, stage, where, got, want = FROZEN_KILLS[mutant_id]
    result = by_id(reference_kill_list())[mutant_id]
    assert result.killed is True
    assert result.check == check
    assert result.check in ALL_CHECKS
    for fragment in (stage, where, got, want):
        assert fragment in result.message
    assert result.failed_checks[0] == check
    # a frozen check (5: the seed's hand-computed values; 8: the model reference's) kills each as well
    frozen = "frozen-model-scenario" if mutant_id in SCHEDULE_IDS else "frozen-scenario"
    assert frozen in result.failed_checks
    if mutant_id in SCHEDULE_IDS:
        assert result.message.startswith("on the model reference (Llama-2-7B, FSDP2 layout, D = 8")


@pytest.mark.parametrize("mutant", MUTANTS, ids=lambda m: m.id)
def test_frozen_checks_alone_kill_each_mutant(mutant: Mutant) -> None:
    result = try_mutant(mutant, FROZEN_SCENARIO, FROZEN_CHECKS)
    assert result.killed
    assert result.check == ("frozen-model-scenario" if mutant.id in SCHEDULE_IDS else "frozen-scenario")
    assert "hand-computed" in result.message


@pytest.mark.parametrize("mutant_id", SCHEDULE_IDS)
def test_schedule_mutants_die_on_the_model_reference_by_their_check(mutant_id: str) -> None:
    check = FROZEN_KILLS[mutant_id][0]
    result = by_id(kill_list(FROZEN_MODEL_SCENARIO))[mutant_id]
    assert result.killed and result.check == check


def test_schedule_mutants_are_equivalent_without_a_schedule() -> None:
    """Typed params detach the model's layer structure: the declared peak again, nothing to break."""
    s = parse_scenario({"model": "llama-2-7b", "params": "7B"})
    for mutant_id in SCHEDULE_IDS:
        result = by_id(kill_list(s))[mutant_id]
        assert result.killed is False
        assert "params or unit_params typed" in result.message


def test_reference_kill_list_in_order_and_unchanged_by_the_users_scenario() -> None:
    assert [m.id for m in reference_kill_list()] == ALL_IDS
    for s in (DEFAULT_SCENARIO.with_(dp=1), DEFAULT_SCENARIO.with_(activation_bytes=0, master_bytes=0)):
        assert estimate(s).reference_mutations == reference_kill_list()
        assert all(m.killed for m in estimate(s).reference_mutations)


def test_seed_kill_list_kills_the_spec_five_with_checks_1_to_4(seed: Scenario) -> None:
    results = kill_list(seed)
    assert [m.id for m in results] == ALL_IDS
    for m in results:
        if m.id in SCHEDULE_IDS:  # the seed has no model: no schedule to break
            assert (m.killed, m.message) == (False, f"survived: {NO_SCHEDULE}")
            continue
        assert m.killed, m.message
        assert m.check == FROZEN_KILLS[m.id][0]
        assert m.failed_checks == (m.check,)  # on the user's scenario the checks stop at the killing one


@pytest.mark.parametrize(
    ("changes", "survivors"),
    [
        (
            {"dp": 1},
            {
                "replicate-optimizer-stage1": "dp = 1: sharding is the identity",
                "shard-params-stage2": "dp = 1: sharding is the identity",
                "divide-activations-by-dp": "dp = 1: dividing by D is the identity",
                "erase-gather-peak": "dp = 1: the rank already holds every unit whole",
                "flatten-shard-groups": "dp = 1: sharding is the identity",
            },
        ),
        ({"activation_bytes": 0}, {"divide-activations-by-dp": "activation_bytes = 0: nothing to divide"}),
        ({"master_bytes": 0}, {"omit-master-copy": "master_bytes = 0: the scenario has no master copy to omit"}),
        ({"unit_params": 0}, {"erase-gather-peak": "unit_params = 0: no unit to gather"}),
        ({"unit_params": 1}, {"erase-gather-peak": "unit_params = 1: the rank's own shard is the whole unit"}),
        (
            {"params": 1, "unit_params": 1},
            {
                "replicate-optimizer-stage1": "params = 1: ⌈1 ÷ D⌉ = 1, one element cannot be split",
                "shard-params-stage2": "params = 1: ⌈1 ÷ D⌉ = 1, one element cannot be split",
                "erase-gather-peak": "unit_params = 1: the rank's own shard is the whole unit",
                "flatten-shard-groups": "params = 1: ⌈1 ÷ D⌉ = 1, one element cannot be split",
            },
        ),
        (
            {"master_bytes": 0, "opt_states": 0},
            {
                "replicate-optimizer-stage1": "master_bytes = 0 and opt_states = 0: "
                "there is no optimizer state to replicate",
                "omit-master-copy": "master_bytes = 0: the scenario has no master copy to omit",
            },
        ),
    ],
    ids=["dp1", "no-activations", "no-master", "u0", "u1", "params1", "no-optimizer-state"],
)
def test_equivalent_mutants_survive_with_the_reason(changes: dict[str, int], survivors: dict[str, str]) -> None:
    s = DEFAULT_SCENARIO.with_(**changes)
    survivors = {**survivors, **dict.fromkeys(SCHEDULE_IDS, NO_SCHEDULE)}  # no model on any of these
    results = by_id(kill_list(s))
    for mutant_id, result in results.items():
        if mutant_id in survivors:
            assert result.killed is False, result.message
            assert result.check == ""
            assert result.failed_checks == ()
            assert result.message == f"survived: {survivors[mutant_id]}"
        else:
            assert result.killed is True, f"{mutant_id}: {result.message}"
            assert result.check in ALL_CHECKS


def test_master_bytes_zero_still_kills_replicate_optimizer_on_optimizer_states() -> None:
    """No master, but stage 1 optimizer states still differ: 7e9 × 2 × 4 = 56e9 vs 7e9 = ⌈7e9 ÷ 8⌉ × 8."""
    result = by_id(kill_list(DEFAULT_SCENARIO.with_(master_bytes=0)))["replicate-optimizer-stage1"]
    assert result.killed
    assert result.check == "oracle-agreement"
    assert "stage 1 optimizer_states" in result.message
    assert "56,000,000,000" in result.message
    assert "7,000,000,000" in result.message


def test_survivor_is_equivalent_on_that_scenario() -> None:
    """Where dp = 1 every sharding mutant's ledger equals production's, byte for byte."""
    s = DEFAULT_SCENARIO.with_(dp=1)
    production = compute_ledger(s)
    for mutant in MUTANTS:
        if mutant.id == "omit-master-copy":
            continue
        ledger = compute_ledger(s, mutant.rules)
        for a, b in zip(ledger.stages, production.stages, strict=True):
            assert [ln.bytes for ln in a.lines] == [ln.bytes for ln in b.lines]
            assert a.peak.total == b.peak.total


def test_each_mutant_changes_exactly_one_rule() -> None:
    production = Rules()
    for mutant in MUTANTS:
        differing = [
            name
            for name in (
                "sharded_from",
                "overrides",
                "master_copy",
                "activations_divided_by_dp",
                "gather_peak",
                "reduce_scatter_buffer",
                "gradients_fill_during_backward",
                "pinned_buffers",
                "hierarchical_groups",
            )
            if getattr(mutant.rules, name) != getattr(production, name)
        ]
        assert len(differing) == 1, (mutant.id, differing)


def test_mutants_run_the_real_ledger_code() -> None:
    """The mutant ledger differs from production on exactly its rule's cell(s) on the seed."""
    production = compute_ledger(DEFAULT_SCENARIO)
    mutant = next(m for m in MUTANTS if m.id == "shard-params-stage2")
    ledger = compute_ledger(DEFAULT_SCENARIO, mutant.rules)
    diffs = [
        (a.stage, la.tensor_class)
        for a, b in zip(ledger.stages, production.stages, strict=True)
        for la, lb in zip(a.lines, b.lines, strict=True)
        if la.bytes != lb.bytes
    ]
    assert diffs == [(2, "parameters")]
    assert run_checks(ledger, compute_ledger, ("oracle-agreement",))[0].passed is False


FSDP2_LAYOUT = {"param_bytes": 4, "master_bytes": 0, "grad_bytes": 4, "gather_bytes": 2}


@pytest.mark.parametrize(
    "raw",
    [
        {"dp": 1},
        {"activation_bytes": 0},
        {"model": "llama-2-7b", "dp": 1, **FSDP2_LAYOUT},
        {"model": "llama-2-7b", "dp": 1},
        {"model": "llama-2-7b", "dp": 8, "activation_bytes": 0},
        {"model": "mixtral-8x7b-v0.1", "dp": 1, "activation_bytes": 0, **FSDP2_LAYOUT},
        {"model": "gpt2", "dp": 1, "seq_len": 1024, "master_bytes": 0},
    ],
    ids=[
        "seed-dp1",
        "seed-no-activations",
        "llama-dp1-fsdp2",
        "llama-dp1",
        "llama-measured-0",
        "mixtral-dp1-0",
        "gpt2-dp1-no-master",
    ],
)
def test_a_survivor_said_to_be_equivalent_is(raw: dict[str, object]) -> None:
    """A mutant that survives with a reason (not "no check tells it apart") claims equivalence: its ledger
    must then be production's, line by line and peak by peak. (Review: with a schedule, erase-gather-peak
    at dp = 1 still drops the unit's copy in the gather width, and divide-activations-by-dp divided the
    modelled activations instead of a typed 0.)"""
    s = parse_scenario(raw)
    production = compute_ledger(s)
    for mutant in MUTANTS:
        result = try_mutant(mutant, s, SCENARIO_CHECKS, first_failure=True)
        if result.killed or result.message == "survived: no check tells it apart on this scenario":
            continue
        ledger = compute_ledger(s, mutant.rules)
        for a, b in zip(ledger.stages, production.stages, strict=True):
            assert [ln.bytes for ln in a.lines] == [ln.bytes for ln in b.lines], (mutant.id, a.stage)
            assert a.peak.total == b.peak.total, (mutant.id, a.stage, result.message)
