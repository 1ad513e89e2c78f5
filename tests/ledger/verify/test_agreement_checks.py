"""Oracle agreement (1), host agreement (9) and the frozen scenario (5), layout by layout.

Each check must pass on the production ledger of every layout it reads (dense and mixture-of-experts models,
tensor and pipeline parallelism, HSDP, hpZ, offloads), with its exact message, and fail, naming what broke,
on a ledger (or an oracle) changed where it guards. The parameter counts are by hand from the models'
configs, so the oracle's own count is held to a number, not only to the ledger's.
"""

from __future__ import annotations

import pytest

from app.ledger.ledger import Ledger, compute_ledger
from app.ledger.scenario import Scenario, parse_scenario
from app.ledger.state.host import HostLedger, host_ledger
from app.ledger.state.rules import Rules
from app.ledger.verify.checks import (
    activation_invariance,
    frozen_scenario,
    gather_presence,
    host_agreement,
    monotonic_lower_bounds,
    oracle_agreement,
    run_checks,
)
from app.ledger.verify.oracle import rank_params
from app.ledger.verify.results import ALL_CHECKS, CheckResult
from tests.ledger.verify.perturb import with_class_bytes, with_host_per_node, with_stage

HOST_OK = CheckResult(
    "host-agreement", True, "every stage's host RAM per node equals the oracle's, as given and offloaded"
)
ORACLE_OK = "all 16 (stage, class) cells equal the oracle's"

# Per-rank parameters by hand (the layer sums are spelled in tests/ledger/models/test_parallel.py):
# Llama-2-7B: 32 layers × 202,383,360 + embedding and head 2 × 131,072,000 + final norm 4,096.
LLAMA = 32 * 202_383_360 + 2 * 131_072_000 + 4_096
# tp = 2: each matmul halved, the norms whole: 32 × (202,375,168 ÷ 2 + 8,192) + 2 × 16,000 × 4,096 + 4,096.
LLAMA_TP2 = 32 * (202_375_168 // 2 + 8_192) + 2 * 16_000 * 4_096 + 4_096
# pp = 4, the last stage: 8 layers + the final norm + the head.
LLAMA_PP4_LAST = 8 * 202_383_360 + 4_096 + 131_072_000
# Qwen2-0.5B (q, k, v biases; tied head): per layer q 896² + 896, k and v 2 × (896 × 128 + 128), o 896²,
# the MLP 3 × 896 × 4,864, two norms 2 × 896 = 14,912,384; × 24 + the embedding 151,936 × 896 + final norm 896.
QWEN = 24 * (896**2 + 896 + 2 * (896 * 128 + 128) + 896**2 + 3 * 896 * 4_864 + 2 * 896) + 151_936 * 896 + 896
# GPT-2 (LayerNorm, learned positions, biases, tied head): 12 layers × 7,087,872 + wte 50,257 × 768
# + wpe 1,024 × 768 + ln_f 2 × 768.
GPT2 = 12 * 7_087_872 + 50_257 * 768 + 1_024 * 768 + 2 * 768
# Mixtral-8x7B: dense 1,605,636,096; each expert 3 × 4,096 × 14,336 = 176,160,768 per layer; ep splits the 8.
MIXTRAL_DENSE, EXPERT = 1_605_636_096, 3 * 4_096 * 14_336
assert (LLAMA, LLAMA_TP2, LLAMA_PP4_LAST, QWEN, GPT2) == (
    6_738_415_616, 3_369_340_928, 1_750_142_976, 494_032_768, 124_439_808
)  # fmt: skip

MODELS: list[tuple[dict[str, object], int, int]] = [
    # (scenario, parameters per rank, of them experts)
    ({"model": "llama-2-7b"}, LLAMA, 0),
    # tp × pp = 4 GPUs per data-parallel rank, 16 ranks per node: the host ledger's node holds all 8
    ({"model": "llama-2-7b", "tp": 2, "pp": 2, "dp": 2, "ranks_per_node": 16}, 0, 0),
    ({"model": "llama-2-7b", "tp": 2}, LLAMA_TP2, 0),
    ({"model": "llama-2-7b", "pp": 4, "pp_stage": "last"}, LLAMA_PP4_LAST, 0),
    ({"model": "qwen2-0.5b"}, QWEN, 0),
    ({"model": "gpt2"}, GPT2, 0),
    ({"model": "mixtral-8x7b-v0.1", "ep": 2, "dp": 8}, MIXTRAL_DENSE + 32 * 4 * EXPERT, 32 * 4 * EXPERT),
    ({"model": "mixtral-8x7b-v0.1", "ep": 4, "dp": 8}, MIXTRAL_DENSE + 32 * 2 * EXPERT, 32 * 2 * EXPERT),
]
LAYOUTS: list[dict[str, object]] = [
    {},  # the seed
    {"dp": 9},  # an odd D: no split into two shard groups
    {"shard_group": 4},  # HSDP: two groups of 4
    {"hpz": 4},  # ZeRO++'s secondary partition
    {"offload_optimizer": "nvme", "offload_param": "cpu"},
    {"dp": 16, "ranks_per_node": 8},  # two nodes
    {"params": 7, "unit_params": 7, "dp": 8},  # uneven: ⌈7 ÷ 8⌉ = 1
]


@pytest.mark.parametrize(("raw", "params", "experts"), MODELS)
def test_a_models_own_parameters_pass_both_agreements(raw: dict[str, object], params: int, experts: int) -> None:
    s = parse_scenario(raw)
    ledger = compute_ledger(s, schedule=False)
    if params:  # the scenario holds the hand count, and the oracle's own count says so
        assert (s.params, s.expert_params) == (params, experts)
        assert oracle_agreement(ledger) == CheckResult(
            "oracle-agreement", True, f"{ORACLE_OK}, from the oracle's own {params:,} parameters per rank"
        )
    else:
        assert oracle_agreement(ledger).passed
    assert host_agreement(ledger) == HOST_OK


@pytest.mark.parametrize("changes", LAYOUTS)
def test_every_layout_passes_both_agreements(changes: dict[str, object]) -> None:
    ledger = compute_ledger(parse_scenario(changes), schedule=False)
    assert oracle_agreement(ledger) == CheckResult("oracle-agreement", True, ORACLE_OK)
    assert host_agreement(ledger) == HOST_OK


def test_typed_parameters_are_not_recounted() -> None:
    """With params typed beside a model the ledger counts what was typed: the oracle does not recount it."""
    s = parse_scenario({"model": "llama-2-7b", "params": 7_000_000_000})
    assert oracle_agreement(compute_ledger(s, schedule=False)).message == ORACLE_OK


@pytest.mark.parametrize(
    ("raw", "layout", "ledger_says", "oracle_says"),
    [
        # pp = 2, the last stage: 16 layers + the final norm + the head = 16 × 202,383,360 + 4,096 + 131,072,000
        ({"model": "llama-2-7b", "pp": 2, "pp_stage": "last"}, "tp = 1, pp = 2 (last stage), ep = 1",
         "3,369,209,856 (0 expert)", "3,369,209,857 (0 expert)"),
        ({"model": "mixtral-8x7b-v0.1", "ep": 4, "dp": 8}, "tp = 1, pp = 1, ep = 4",
         "12,879,925,248 (11,274,289,152 expert)", "12,879,925,250 (11,274,289,153 expert)"),
    ],
)  # fmt: skip
def test_an_oracle_count_that_differs_fails_naming_the_layout(
    monkeypatch: pytest.MonkeyPatch, raw: dict[str, object], layout: str, ledger_says: str, oracle_says: str
) -> None:
    """The oracle counting one more parameter of each kind than the ledger's model: the check fails before it
    compares any cell, and says which count differs."""

    def one_more(*args: object, **latent: int) -> tuple[int, ...]:
        return tuple(c + 1 if c else 0 for c in rank_params(*args, **latent))  # type: ignore[arg-type]

    monkeypatch.setattr("app.ledger.verify.checks.rank_params", one_more)
    result = oracle_agreement(compute_ledger(parse_scenario(raw), schedule=False))
    assert result == CheckResult(
        "oracle-agreement", False, f"params per rank ({layout}): ledger {ledger_says} ≠ oracle {oracle_says}"
    )


def test_a_ledger_that_ignores_the_shard_group_fails_in_two_groups(seed: Scenario) -> None:
    """On a flat mesh (one group of all 8) every layout agrees, so the check also evaluates the scenario in two
    shard groups of 4: split over 8 instead, stage 1's master copy is ⌈7e9 ÷ 8⌉ × 4 = 3.5e9 B, where the oracle's
    groups of 4 hold ⌈7e9 ÷ 4⌉ × 4 = 7e9 B."""
    flat = Rules(hierarchical_groups=False)
    assert oracle_agreement(compute_ledger(seed, flat, schedule=False)) == CheckResult(
        "oracle-agreement",
        False,
        "stage 1 master_weights in shard groups of 4: ledger 3,500,000,000 B ≠ oracle 7,000,000,000 B",
    )
    # an odd D has no two equal groups to try: the flat rules are then indistinguishable
    assert oracle_agreement(compute_ledger(seed.with_(dp=9), flat, schedule=False)).passed


def test_a_wrong_host_figure_fails(seed: Scenario) -> None:
    """Without offload nothing of the seed lives on the host: 0 B per node at every stage."""
    ledger = compute_ledger(seed, schedule=False)
    assert [h.per_node for h in ledger.host.stages] == [0, 0, 0, 0]
    assert host_agreement(with_host_per_node(ledger, 2, 1)) == CheckResult(
        "host-agreement", False, "stage 2 host: ledger 1 B ≠ oracle 0 B per node"
    )


def test_forgotten_pinned_buffers_fail_once_offloaded(seed: Scenario) -> None:
    """Offloaded, stage 1 per node: 8 × 875e6 × (4 + 2 × 4 + 4) B = 112e9 without the pinned 16-bit staging copy
    (875e6 × 2 B) and the largest tensor's gradient buffer (400e6 × 2 B): 8 × 16.55e9 = 132.4e9 with them."""
    result = host_agreement(compute_ledger(seed, Rules(pinned_buffers=False), schedule=False))
    assert result == CheckResult(
        "host-agreement",
        False,
        "stage 1 host with both offloads to the CPU: ledger 112,000,000,000 B ≠ oracle 132,400,000,000 B per node",
    )


def test_a_wrong_cell_fails_naming_its_stage_and_class(seed: Scenario) -> None:
    """The seed's stage 2 gradients are sharded: 7e9 ÷ 8 × 2 B = 1.75e9 B; a ledger that says 1 B fails there."""
    wrong = with_class_bytes(compute_ledger(seed, schedule=False), 2, "gradients", 1)
    assert oracle_agreement(wrong) == CheckResult(
        "oracle-agreement", False, "stage 2 gradients: ledger 1 B ≠ oracle 1,750,000,000 B"
    )


def test_a_host_ledger_that_forgets_the_offloaded_parameters_fails(
    seed: Scenario, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check offloads the parameters too, so that a host ledger whose parameter-offload path is wrong fails.
    Here it forgets them: stage 3 with both offloads holds 8 ranks × 875e6 parameters × 2 B = 14e9 B per node less
    than the oracle."""

    def forgetting(s: Scenario, rules: Rules) -> HostLedger:
        return host_ledger(s.with_(offload_param="none"), rules)

    monkeypatch.setattr("app.ledger.verify.checks.host_ledger", forgetting)
    result = host_agreement(compute_ledger(seed, schedule=False))
    assert not result.passed
    ledger_says, oracle_says = (
        int(x.removesuffix(" B").replace(",", ""))
        for x in result.message.removeprefix("stage 3 host with both offloads to the CPU: ledger ")
        .removesuffix(" per node")
        .split(" ≠ oracle ")
    )
    assert oracle_says - ledger_says == 8 * 875_000_000 * 2


# --------------------------------------------------------------------------- 5. the frozen scenario


def test_the_frozen_scenario_passes_with_its_message() -> None:
    assert frozen_scenario(compute_ledger) == CheckResult(
        "frozen-scenario",
        True,
        "the seed's example reproduces 112 / 38.5 / 26.25 / 14 GB, a 0.7 GB gather, offloaded its host RAM, and in "
        "shard groups of 4 112 / 49 / 38.5 / 28 GB",
    )


def test_the_frozen_host_ram_is_checked() -> None:
    """Both offloads to the CPU, stage 3: 8 × 875e6 × (4 + 2 × 4 + 4 + 2 + 2) B = 140e9 per node; one more fails."""

    def evaluate(s: Scenario) -> Ledger:
        ledger = compute_ledger(s)
        return with_host_per_node(ledger, 3, 140_000_000_001) if s.offload_param == "cpu" else ledger

    assert frozen_scenario(evaluate) == CheckResult(
        "frozen-scenario",
        False,
        "stage 3 host, both offloads to the CPU: got 140,000,000,001 B per node, hand-computed 140,000,000,000 B",
    )


def test_the_frozen_shard_groups_are_checked() -> None:
    """In two groups of 4, stage 1: 14e9 + 14e9 + ⌈7e9 ÷ 4⌉ × 12 = 49e9; the flat mesh's 38.5e9 fails."""

    def evaluate(s: Scenario) -> Ledger:
        ledger = compute_ledger(s)
        return with_stage(ledger, 1, persistent=38_500_000_000) if s.shard_group == 4 else ledger

    assert frozen_scenario(evaluate) == CheckResult(
        "frozen-scenario",
        False,
        "stage 1 persistent in shard groups of 4: got 38,500,000,000 B, hand-computed 49,000,000,000 B",
    )


# --------------------------------------------------------------------------- running them


def test_run_checks_stops_at_the_first_failure_only_when_asked(seed: Scenario) -> None:
    """Stage 3 parameters at 200e9 B break oracle agreement (check 1) and monotonicity (check 2)."""
    wrong = with_class_bytes(compute_ledger(seed), 3, "parameters", 200_000_000_000)
    stopped = run_checks(wrong, compute_ledger, ALL_CHECKS, stop_at_failure=True)
    assert [(r.check, r.passed) for r in stopped] == [("oracle-agreement", False)]
    every = run_checks(wrong, compute_ledger, ALL_CHECKS)
    assert [r.check for r in every] == list(ALL_CHECKS)
    assert [r.check for r in every if not r.passed] == ["oracle-agreement", "monotonic-lower-bounds"]


def test_a_frozen_check_runs_under_the_rules_it_is_given(seed: Scenario) -> None:
    """The production answers of the frozen checks are kept once computed; another evaluator's are not."""
    ledger = compute_ledger(seed)
    assert run_checks(ledger, compute_ledger, ("frozen-scenario",))[0].passed
    wrong = with_class_bytes(ledger, 0, "gradients", 1)
    again = run_checks(ledger, lambda s: wrong, ("frozen-scenario",))
    assert again == (
        CheckResult("frozen-scenario", False, "stage 0 gradients: got 1 B, hand-computed 14,000,000,000 B"),
    )
    assert run_checks(ledger, compute_ledger, ("frozen-scenario",))[0].passed


# --------------------------------------------------------------------------- 2–4 on the declared peak, their words


def test_monotonic_lower_bounds_name_the_first_stage_that_grows(seed: Scenario) -> None:
    """The seed: 112e9 ≥ 38.5e9 ≥ 26.25e9 ≥ 14e9. A stage 1 above stage 0, or a stage 2 above stage 1, fails there."""
    ledger = compute_ledger(seed, schedule=False)
    assert monotonic_lower_bounds(ledger) == CheckResult(
        "monotonic-lower-bounds",
        True,
        "112,000,000,000 B ≥ 38,500,000,000 B ≥ 26,250,000,000 B ≥ 14,000,000,000 B",
    )
    assert monotonic_lower_bounds(with_stage(ledger, 1, persistent=112_000_000_001)) == CheckResult(
        "monotonic-lower-bounds", False, "stage 1 total: persistent 112,000,000,001 B > stage 0's 112,000,000,000 B"
    )
    assert monotonic_lower_bounds(with_stage(ledger, 2, persistent=38_500_000_001)).message == (
        "stage 2 total: persistent 38,500,000,001 B > stage 1's 38,500,000,000 B"
    )


def test_activation_invariance_on_the_declared_peak(seed: Scenario) -> None:
    assert activation_invariance(compute_ledger(seed, schedule=False)) == CheckResult(
        "activation-invariance", True, "20,000,000,000 B at dp = 8 and at dp = 1"
    )


@pytest.mark.parametrize("changes", [{}, {"bucket_bytes": 5, "overhead_bytes": 7, "contingency_pct": 50}])
def test_gather_presence_reads_the_gather_out_of_the_declared_peak(seed: Scenario, changes: dict[str, int]) -> None:
    """The peak less persistent, buckets, activations and overhead is the 700e6 B gather, whatever the others."""
    assert gather_presence(compute_ledger(seed.with_(**changes), schedule=False)) == CheckResult(
        "gather-presence", True, "stage 3 peak holds 700,000,000 B ≥ 700,000,000 B of remote shards"
    )


@pytest.mark.parametrize("changes", [{"dp": 1}, {"unit_params": 0}])
def test_gather_presence_without_a_remote_shard(seed: Scenario, changes: dict[str, int]) -> None:
    """One rank owns all of the unit, or there is no unit: nothing to gather, said so."""
    assert gather_presence(compute_ledger(seed.with_(**changes), schedule=False)) == CheckResult(
        "gather-presence", True, "not applicable: dp = 1 or unit_params = 0"
    )
