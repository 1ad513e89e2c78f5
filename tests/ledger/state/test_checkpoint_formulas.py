"""The checkpoint ledger's formulas, flag and save peaks (spec "Checkpoint ledger"), by hand on the seed.

The seed: N = 7e9, U = 400e6, BF16 parameters, an FP32 master, two FP32 Adam moments, 80e9 B per device.
"""

from __future__ import annotations

from app.ledger.scenario import DEFAULT_SCENARIO, Scenario
from app.ledger.state.checkpoint import DESCRIPTIONS, POLICIES, checkpoint_policies

PERSISTENT = (112_000_000_000, 38_500_000_000, 26_250_000_000, 14_000_000_000)  # the worked example


def test_each_policy_spelled_with_its_numbers(seed: Scenario) -> None:
    sharded, full_params, full_state = checkpoint_policies(seed, PERSISTENT)
    assert [p.policy for p in (sharded, full_params, full_state)] == list(POLICIES)
    assert [p.description for p in (sharded, full_params, full_state)] == [DESCRIPTIONS[p] for p in POLICIES]
    assert sharded.device_formula.text == "0 B beyond the rank's own shards"
    assert sharded.host_formula.text == "0 B: every rank writes its own shards"
    # U × param_bytes = 400e6 × 2; N × param_bytes = 7e9 × 2
    assert full_params.device_formula.text == "400,000,000 × 2 B = 800,000,000 B (one unit at a time)"
    assert full_params.host_formula.text == "7,000,000,000 × 2 B = 14,000,000,000 B"
    # N × (param + master + opt_states × opt) = 7e9 × (2 + 4 + 2 × 4) = 7e9 × 14
    assert full_state.device_formula.text == full_params.device_formula.text
    assert full_state.host_formula.text == "7,000,000,000 × (2 + 4 + 2 × 4) B = 98,000,000,000 B"


def test_full_state_on_one_rank_is_flagged_in_words(seed: Scenario) -> None:
    """98e9 B consolidated on rank 0 is more than one device's 80e9 B."""
    flagged = checkpoint_policies(seed, PERSISTENT)[2]
    assert flagged.flag == (
        "consolidates 98,000,000,000 B of full state on rank 0, more than one device's 80,000,000,000 B: the plan "
        "fits only because state is sharded, so save sharded checkpoints instead"
    )


def test_the_flag_is_strictly_more_than_one_device() -> None:
    """Full state of exactly the capacity (7e9 × 14 = 98e9 B on a 98e9 B device) is not flagged; one byte less
    of capacity is; full_params is never flagged, however large."""
    at = checkpoint_policies(DEFAULT_SCENARIO.with_(capacity_bytes=98_000_000_000), PERSISTENT)
    assert [p.flagged for p in at] == [False, False, False]
    assert at[2].flag == ""
    over = checkpoint_policies(DEFAULT_SCENARIO.with_(capacity_bytes=97_999_999_999), PERSISTENT)
    assert [p.flagged for p in over] == [False, False, True]
    tiny = checkpoint_policies(DEFAULT_SCENARIO.with_(capacity_bytes=1), PERSISTENT)
    assert [p.flagged for p in tiny] == [False, False, True]  # 14e9 B of full_params on the host is not flagged


def test_save_peaks_add_the_unit_and_the_overhead() -> None:
    """Per stage: persistent + the device transient (0, or U × 2 = 800e6) + overhead (here 5 B)."""
    s = DEFAULT_SCENARIO.with_(overhead_bytes=5)
    sharded, full_params, full_state = checkpoint_policies(s, PERSISTENT)
    assert sharded.save_peaks == tuple(p + 5 for p in PERSISTENT)
    assert full_params.save_peaks == tuple(p + 800_000_000 + 5 for p in PERSISTENT)
    assert full_state.save_peaks == full_params.save_peaks
    assert (full_state.device_bytes, full_state.host_bytes) == (800_000_000, 98_000_000_000)


def test_no_master_and_sgd() -> None:
    """master_bytes = 0, one FP32 momentum: 7e9 × (2 + 0 + 1 × 4) = 42e9 B."""
    s = DEFAULT_SCENARIO.with_(master_bytes=0, opt_states=1)
    full_state = checkpoint_policies(s, PERSISTENT)[2]
    assert full_state.host_bytes == 42_000_000_000
    assert full_state.host_formula.text == "7,000,000,000 × (2 + 0 + 1 × 4) B = 42,000,000,000 B"
