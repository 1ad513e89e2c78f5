"""The persistent ledger line by line: every field of :class:`LedgerLine` and its formula, per layout.

The totals are held elsewhere (the oracle, the worked example); here each line is held whole — width, copies,
owners, elements, bytes, the note that says why a class is empty, the parts of an expert split and hpZ's
secondary partition — because the page and the receipts show each of them. The expected values are by hand
from the spec's table: bytes = ⌈N ÷ owners⌉ × width × copies.
"""

from __future__ import annotations

import pytest

from app.ledger.scenario import DEFAULT_SCENARIO, Scenario, parse_scenario
from app.ledger.state.persistent import LedgerLine, ledger_line, offloaded, persistent_lines, shard, shard_elements
from app.ledger.state.rules import EVIDENCE_REPLICATED, EVIDENCE_SHARDED, PRODUCTION, SHARDED_FROM, Rules

N = 7_000_000_000  # the seed: D = 8, BF16 parameters and gradients, an FP32 master, two FP32 Adam moments
SHARD = 875_000_000  # ⌈7e9 ÷ 8⌉
NO_MASTER = "no separate master copy (master_bytes = 0): the optimizer updates the parameters"
HPZ_NOTE = "ZeRO++ hpZ: a secondary 1 ÷ 4 partition, which backward all-gathers within its group"


def line(tensor_class: str, width: int, copies: int, owners: int, elements: int, **more: object) -> LedgerLine:
    """The expected line; ``bytes`` is spelled out by the caller where it is not elements × width × copies."""
    fields: dict[str, object] = {"bytes": elements * width * copies, "params": N, "sharded": owners > 1, "note": ""}
    fields.update(more)
    return LedgerLine(tensor_class, width, copies, owners, elements, **fields)  # type: ignore[arg-type]


def test_stage_0_replicates_every_class(seed: Scenario) -> None:
    assert persistent_lines(seed, 0, PRODUCTION) == (
        line("parameters", 2, 1, 1, N),  # 7e9 × 2 = 14e9
        line("gradients", 2, 1, 1, N),  # 14e9
        line("master_weights", 4, 1, 1, N),  # 28e9
        line("optimizer_states", 4, 2, 1, N),  # 7e9 × 4 × 2 = 56e9
    )


def test_stage_3_shards_every_class(seed: Scenario) -> None:
    lines = persistent_lines(seed, 3, PRODUCTION)
    assert lines == (
        line("parameters", 2, 1, 8, SHARD),  # 875e6 × 2 = 1.75e9
        line("gradients", 2, 1, 8, SHARD),
        line("master_weights", 4, 1, 8, SHARD),  # 3.5e9
        line("optimizer_states", 4, 2, 8, SHARD),  # 875e6 × 4 × 2 = 7e9
    )
    assert [ln.formula.text for ln in lines] == [
        "⌈7,000,000,000 ÷ 8⌉ = 875,000,000 elements × 2 B × 1 copy = 1,750,000,000 B",
        "⌈7,000,000,000 ÷ 8⌉ = 875,000,000 elements × 2 B × 1 copy = 1,750,000,000 B",
        "⌈7,000,000,000 ÷ 8⌉ = 875,000,000 elements × 4 B × 1 copy = 3,500,000,000 B",
        "⌈7,000,000,000 ÷ 8⌉ = 875,000,000 elements × 4 B × 2 copies = 7,000,000,000 B",
    ]
    assert [ln.evidence for ln in lines] == [EVIDENCE_SHARDED[ln.tensor_class] for ln in lines]


@pytest.mark.parametrize(("stage", "sharded"), [(1, ("master_weights", "optimizer_states")),
                                                (2, ("gradients", "master_weights", "optimizer_states"))])  # fmt: skip
def test_stages_1_and_2_shard_what_the_table_says(seed: Scenario, stage: int, sharded: tuple[str, ...]) -> None:
    for ln in persistent_lines(seed, stage, PRODUCTION):
        assert ln.sharded == (ln.tensor_class in sharded)
        assert ln.owners == (8 if ln.sharded else 1)
        assert ln.evidence == (EVIDENCE_SHARDED if ln.sharded else EVIDENCE_REPLICATED)[ln.tensor_class]


def test_a_replicated_line_is_spelled_without_a_division(seed: Scenario) -> None:
    assert ledger_line(seed, 0, "optimizer_states", PRODUCTION).formula.text == (
        "7,000,000,000 elements × 4 B × 2 copies = 56,000,000,000 B"
    )


def test_the_ownership_table_and_its_overrides() -> None:
    assert SHARDED_FROM == {"parameters": 3, "gradients": 2, "master_weights": 1, "optimizer_states": 1}
    assert [PRODUCTION.sharded("gradients", st) for st in range(4)] == [False, False, True, True]
    assert [PRODUCTION.sharded("master_weights", st) for st in range(4)] == [False, True, True, True]
    one_cell = Rules(overrides={("parameters", 2): True, ("optimizer_states", 1): False})
    assert [one_cell.sharded("parameters", st) for st in range(4)] == [False, False, True, True]
    assert [one_cell.sharded("optimizer_states", st) for st in range(4)] == [False, False, True, True]


# --------------------------------------------------------------------------- classes that are empty, and why


def test_no_master_copy(seed: Scenario) -> None:
    """master_bytes = 0: the optimizer updates the parameters; 0 B, said so."""
    got = ledger_line(seed.with_(master_bytes=0), 3, "master_weights", PRODUCTION)
    assert got == line("master_weights", 0, 0, 8, SHARD, note=NO_MASTER)
    assert got.formula.text == "⌈7,000,000,000 ÷ 8⌉ = 875,000,000 elements × 0 B × 0 copies = 0 B"


def test_a_dropped_master_copy_keeps_its_width(seed: Scenario) -> None:
    got = ledger_line(seed, 1, "master_weights", Rules(master_copy=False))
    assert got == line("master_weights", 4, 0, 8, SHARD, note="master copy not counted")


def test_no_optimizer_state(seed: Scenario) -> None:
    got = ledger_line(seed.with_(opt_states=0), 0, "optimizer_states", PRODUCTION)
    assert got == line("optimizer_states", 4, 0, 1, N, note="no optimizer state (opt_states = 0)")


# --------------------------------------------------------------------------- offload


ON_THE_HOST = "offloaded to {}: counted in the host ledger, not on the device"


def test_optimizer_offload_moves_master_and_states_from_stage_1_and_gradients_from_stage_2(seed: Scenario) -> None:
    s = seed.with_(offload_optimizer="cpu")
    where = {(c, st): offloaded(s, st, c) for c in ("parameters", "gradients", "master_weights",
                                                    "optimizer_states") for st in range(4)}  # fmt: skip
    assert {k for k, v in where.items() if v} == {
        ("master_weights", 1), ("master_weights", 2), ("master_weights", 3),
        ("optimizer_states", 1), ("optimizer_states", 2), ("optimizer_states", 3),
        ("gradients", 2), ("gradients", 3),
    }  # fmt: skip
    assert set(where.values()) == {"", "cpu"}
    # the width is kept (the host ledger counts it), the device copies are 0
    assert ledger_line(s, 1, "master_weights", PRODUCTION) == line("master_weights", 4, 0, 8, SHARD,
                                                                  note=ON_THE_HOST.format("cpu"))  # fmt: skip
    assert ledger_line(s, 2, "gradients", PRODUCTION) == line(
        "gradients", 2, 0, 8, SHARD, note=ON_THE_HOST.format("cpu")
    )
    assert ledger_line(s, 3, "optimizer_states", PRODUCTION) == line("optimizer_states", 4, 0, 8, SHARD,
                                                                    note=ON_THE_HOST.format("cpu"))  # fmt: skip
    assert ledger_line(s, 1, "gradients", PRODUCTION) == line("gradients", 2, 1, 1, N)
    # without offload every class of every stage is on the device
    assert {offloaded(seed, st, c) for c in ("parameters", "gradients", "master_weights", "optimizer_states")
            for st in range(4)} == {""}  # fmt: skip
    assert ledger_line(s, 0, "optimizer_states", PRODUCTION) == line("optimizer_states", 4, 2, 1, N)


def test_parameter_offload_is_stage_3_s_only(seed: Scenario) -> None:
    s = seed.with_(offload_param="nvme")
    assert [offloaded(s, st, "parameters") for st in range(4)] == ["", "", "", "nvme"]
    assert ledger_line(s, 3, "parameters", PRODUCTION) == line("parameters", 2, 0, 8, SHARD,
                                                              note=ON_THE_HOST.format("nvme"))  # fmt: skip
    assert offloaded(s, 3, "master_weights") == ""  # the optimizer stays on the device


# --------------------------------------------------------------------------- layouts: HSDP, hpZ, experts


def test_hsdp_shards_over_the_group(seed: Scenario) -> None:
    """Shard groups of 4: ⌈7e9 ÷ 4⌉ = 1.75e9 elements; with the groups flattened, over all 8."""
    s = seed.with_(shard_group=4)
    got = ledger_line(s, 3, "parameters", PRODUCTION)
    assert got == line("parameters", 2, 1, 4, 1_750_000_000)
    assert got.formula.text == "⌈7,000,000,000 ÷ 4⌉ = 1,750,000,000 elements × 2 B × 1 copy = 3,500,000,000 B"
    assert ledger_line(s, 3, "parameters", Rules(hierarchical_groups=False)) == line("parameters", 2, 1, 8, SHARD)


def test_hpz_adds_the_secondary_partition_to_stage_3_parameters(seed: Scenario) -> None:
    """hpz = 4: ⌈7e9 ÷ 8⌉ + ⌈7e9 ÷ 4⌉ = 875e6 + 1.75e9 = 2.625e9 elements × 2 B = 5.25e9 B."""
    s = seed.with_(hpz=4)
    got = ledger_line(s, 3, "parameters", PRODUCTION)
    assert got == line("parameters", 2, 1, 8, 2_625_000_000, secondary=1_750_000_000, hpz=4, note=HPZ_NOTE)
    assert got.formula.text == (
        "⌈7,000,000,000 ÷ 8⌉ + ⌈7,000,000,000 ÷ 4⌉ (hpZ secondary partition) = 2,625,000,000 elements × 2 B × 1 copy "
        "= 5,250,000,000 B"
    )
    # only stage 3's parameters, and only with the hierarchical layouts counted
    assert ledger_line(s, 3, "gradients", PRODUCTION) == line("gradients", 2, 1, 8, SHARD, hpz=4)
    assert ledger_line(s, 2, "parameters", PRODUCTION) == line("parameters", 2, 1, 1, N, hpz=4)
    assert ledger_line(s, 3, "parameters", Rules(hierarchical_groups=False)) == line("parameters", 2, 1, 8, SHARD,
                                                                                     hpz=4)  # fmt: skip


def test_hpz_of_two(seed: Scenario) -> None:
    """hpz = 2: ⌈7e9 ÷ 8⌉ + ⌈7e9 ÷ 2⌉ = 875e6 + 3.5e9 = 4.375e9 elements."""
    got = ledger_line(seed.with_(hpz=2), 3, "parameters", PRODUCTION)
    assert (got.elements, got.secondary, got.bytes) == (4_375_000_000, 3_500_000_000, 8_750_000_000)


def test_hpz_offloaded_says_where_the_parameters_are(seed: Scenario) -> None:
    got = ledger_line(seed.with_(hpz=4, offload_param="cpu"), 3, "parameters", PRODUCTION)
    assert (got.secondary, got.copies, got.bytes, got.note) == (1_750_000_000, 0, 0, ON_THE_HOST.format("cpu"))


def test_experts_split_over_d_over_ep() -> None:
    """Mixtral-8x7B, ep = 4, D = 8, BF16: the dense 1,605,636,096 over 8 and the rank's 11,274,289,152 expert
    parameters over 8 ÷ 4 = 2: ⌈1,605,636,096 ÷ 8⌉ + ⌈11,274,289,152 ÷ 2⌉ = 200,704,512 + 5,637,144,576
    = 5,837,849,088 elements × 2 B = 11,675,698,176 B."""
    s = parse_scenario({"model": "mixtral-8x7b-v0.1", "ep": 4, "dp": 8, "param_bytes": 2})
    dense, experts = 1_605_636_096, 11_274_289_152
    assert (s.params, s.expert_params) == (dense + experts, experts)
    got = ledger_line(s, 3, "parameters", PRODUCTION)
    assert got == LedgerLine("parameters", 2, 1, 8, 5_837_849_088, 11_675_698_176, dense + experts, True, "",
                             parts=((dense, 8), (experts, 2)))  # fmt: skip
    assert got.formula.text == (
        "⌈1,605,636,096 ÷ 8⌉ + ⌈11,274,289,152 ÷ 2⌉ (dense over D, experts over D ÷ ep) = 5,837,849,088 elements "
        "× 2 B × 1 copy = 11,675,698,176 B"
    )
    # replicated at stage 0: one part, all of it
    assert ledger_line(s, 0, "parameters", PRODUCTION).parts == ()
    assert ledger_line(s, 0, "parameters", PRODUCTION).elements == dense + experts
    # flattened, the experts split over all 8 too
    flat = ledger_line(s, 3, "parameters", Rules(hierarchical_groups=False))
    assert (flat.parts, flat.elements) == ((), 1_609_990_656)  # ⌈12,879,925,248 ÷ 8⌉


def test_the_busiest_rank_takes_the_ceiling() -> None:
    assert [shard(7, 8), shard(8, 8), shard(9, 8), shard(0, 8)] == [1, 1, 2, 0]
    assert shard_elements(((10, 4), (7, 2))) == 3 + 4
    tiny = DEFAULT_SCENARIO.with_(params=7, unit_params=7)
    assert ledger_line(tiny, 3, "optimizer_states", PRODUCTION).bytes == 1 * 4 * 2
