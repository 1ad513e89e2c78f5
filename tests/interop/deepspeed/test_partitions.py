"""hpZ and MiCS read from a config (``app.interop.deepspeed.partitions``): stage 3's, refused by name where
DeepSpeed or the lab's own inputs refuse them."""

from __future__ import annotations

import pytest

from app.interop.deepspeed.reader import import_deepspeed
from app.interop.deepspeed.report import DeepSpeedConfigError
from app.ledger.ledger import compute_ledger
from tests.interop.deepspeed.configs import assert_every_key_accounted, lines_of


def test_hpz_at_stage_3_adds_the_secondary_partition() -> None:
    """ZeRO++ hpZ: a 7B model (N = 7,000,000,000) on D = 64 with ``zero_hpz_partition_size`` 8, bf16.

    * hpz = 8 (8 divides 64): beside its primary shard of ⌈N ÷ 64⌉ = 109,375,000 parameters each rank
      keeps a secondary ⌈N ÷ 8⌉ = 875,000,000, so stage 3's parameters are
      (109,375,000 + 875,000,000) × 2 B = 1,968,750,000 B.
    * the rest of stage 3's persistent state is over D: 109,375,000 × (2 gradients + 4 master + 2 × 4 Adam)
      = 1,531,250,000 B; in all 3,500,000,000 B.
    """
    cfg = {"bf16": {"enabled": True}, "zero_optimization": {"stage": 3, "zero_hpz_partition_size": 8}}
    result = import_deepspeed(cfg, {"params": "7B", "dp": 64})
    s = result.scenario
    assert (s.hpz, s.shard_group, s.stage) == (8, 64, 3)
    (line,) = lines_of(result, "zero_optimization.zero_hpz_partition_size")
    assert line.startswith("sets: hpz = 8: ZeRO++ hpZ") and "within 8 ranks (8 groups)" in line
    assert result.origin["hpz"] == "zero_optimization.zero_hpz_partition_size"
    stage3 = compute_ledger(s).stages[3]
    assert stage3.bytes_of("parameters") == 1_968_750_000
    assert stage3.persistent == 3_500_000_000


def test_mics_at_stage_3_is_the_shard_group() -> None:
    """MiCS: a 7B model on D = 32 with ``mics_shard_size`` 8 (and the hierarchical gather, a comm detail).

    * shard_group = 8: state sharded over 8 ranks, replicated across 32 ÷ 8 = 4 groups.
    * stage 3's persistent state is over the group: ⌈N ÷ 8⌉ = 875,000,000 × (2 + 2 + 4 + 8) B
      = 14,000,000,000 B.
    """
    cfg = {
        "bf16": {"enabled": True},
        "zero_optimization": {"stage": 3, "mics_shard_size": 8, "mics_hierarchical_params_gather": True},
    }
    result = import_deepspeed(cfg, {"params": "7B", "dp": 32})
    s = result.scenario
    assert (s.shard_group, s.hpz) == (8, 1)
    (line,) = lines_of(result, "zero_optimization.mics_shard_size")
    assert line.startswith("sets: shard_group = 8: MiCS: state sharded over 8 ranks, replicated across 4 groups")
    (gather,) = lines_of(result, "zero_optimization.mics_hierarchical_params_gather")
    assert gather.startswith("no memory effect")
    assert compute_ledger(s).stages[3].persistent == 14_000_000_000
    assert_every_key_accounted(cfg, result)
    # a shard group of all D is plain ZeRO-3; off (-1, 0) too
    for size, group in ((32, 32), (-1, 32), (0, 32), (1, 1)):
        cfg = {"zero_optimization": {"stage": 3, "mics_shard_size": size}}
        assert import_deepspeed(cfg, {"params": "7B", "dp": 32}).scenario.shard_group == group


def test_hpz_and_mics_below_stage_3_are_ignored_as_deepspeed_ignores_them() -> None:
    """Stages 1–2's optimizer takes neither (DeepSpeed's _configure_zero_optimizer): the lines say
    ignored and the scenario shards over all D; a shard group the inputs carried is reset."""
    cfg = {"zero_optimization": {"stage": 2, "zero_hpz_partition_size": 8, "mics_shard_size": 4}}
    result = import_deepspeed(cfg, {"params": "7B", "dp": 32, "shard_group": 4}, typed=frozenset({"params", "dp"}))
    assert (result.scenario.hpz, result.scenario.shard_group) == (1, 32)
    for key in ("zero_optimization.zero_hpz_partition_size", "zero_optimization.mics_shard_size"):
        (line,) = lines_of(result, key)
        assert line.startswith("ignored: read only at stage 3 (this is stage 2")
    absent = import_deepspeed({"zero_optimization": {"stage": 3}}, {"dp": 32, "hpz": 8}, typed=frozenset({"dp"}))
    assert absent.scenario.hpz == 1  # DeepSpeed's default when the key is absent
    assert lines_of(absent, "zero_optimization.zero_hpz_partition_size")[0].startswith("sets: hpz = 1")


@pytest.mark.parametrize(
    ("zero", "inputs", "key", "words"),
    [
        ({"zero_hpz_partition_size": 3}, {"dp": 8}, "zero_optimization.zero_hpz_partition_size",
         "3 does not divide D = 8"),
        ({"zero_hpz_partition_size": 16}, {"dp": 8}, "zero_optimization.zero_hpz_partition_size",
         "16 does not divide D = 8"),
        ({"mics_shard_size": 3}, {"dp": 8}, "zero_optimization.mics_shard_size", "3 does not divide D = 8"),
        ({"zero_hpz_partition_size": 4, "mics_shard_size": 2}, {"dp": 8}, "zero_optimization.zero_hpz_partition_size",
         "MiCS together are not modelled"),
        ({"zero_hpz_partition_size": "auto"}, {}, "zero_optimization.zero_hpz_partition_size", "whole number of ranks"),
        ({"zero_hpz_partition_size": -1}, {}, "zero_optimization.zero_hpz_partition_size", "between 0"),
        ({"mics_shard_size": 2.5}, {}, "zero_optimization.mics_shard_size", "whole number"),
        ({"zero_hpz_partition_size": 4}, {"dp": 8, "shard_group": 4}, "zero_optimization.zero_hpz_partition_size",
         "not modelled"),
        ({"mics_shard_size": 4}, {"model": "mixtral-8x7b-v0.1", "dp": 8, "ep": 8},
         "zero_optimization.mics_shard_size", "_validate_zero3_moe_compatibility"),
    ],
)  # fmt: skip
def test_a_bad_partition_is_refused_by_name(
    zero: dict[str, object], inputs: dict[str, object], key: str, words: str
) -> None:
    with pytest.raises(DeepSpeedConfigError) as refused:
        import_deepspeed({"zero_optimization": {"stage": 3, **zero}}, inputs)
    assert refused.value.key == key
    assert words in refused.value.message
