"""One layout's traffic per step and its lower-bound time: which link each group crosses, and the busier link's
time. H100 links: 450 GB/s within a node, 50 GB/s across, each way."""

from __future__ import annotations

from app.ledger.arithmetic import ceil_div
from app.ledger.layouts.traffic import crosses, step_traffic
from app.ledger.scenario import parse_scenario
from app.ledger.scenario.presets import DEVICE_BY_ID, Links
from app.ledger.state.communication import communication, group_bytes
from app.ledger.state.parallel_traffic import tensor_parallel


def _h100() -> Links:
    links = DEVICE_BY_ID["h100-80gb"].links
    assert links is not None
    return links


LINKS = _h100()


def test_a_span_crosses_nodes_when_it_does_not_fit_one_or_straddles_two() -> None:
    assert not crosses(8, 8) and not crosses(4, 8) and not crosses(1, 8)
    assert crosses(16, 8)
    assert crosses(3, 8)  # 8 ranks a node hold no whole number of groups of 3: one straddles two nodes


def test_group_bytes_sum_to_the_communication_ledger() -> None:
    s = parse_scenario({"model": "llama-2-7b", "dp": 16, "shard_group": 8, "grad_accum": 2})
    for stage in range(4):
        c = communication(s, stage)
        assert sum(group_bytes(c.terms).values()) == c.bytes


def test_one_node_runs_at_nvlink() -> None:
    """D = 8 on 8 ranks a node: every collective stays in the node."""
    s = parse_scenario({"model": "llama-2-7b", "dp": 8})
    t = step_traffic(s, LINKS)
    assert t.bytes == communication(s, 3).bytes
    assert t.inter_ns == 0 and t.intra_ns == ceil_div(t.bytes * 10**9, 450 * 10**9) == t.lower_bound_ns


def test_sixty_four_ranks_cross_the_network() -> None:
    s = parse_scenario({"model": "llama-2-7b", "dp": 64})
    t = step_traffic(s, LINKS)
    assert t.intra_ns == 0 and t.lower_bound_ns == ceil_div(communication(s, 3).bytes * 10**9, 50 * 10**9)


def test_tensor_parallel_in_the_node_and_data_parallel_across() -> None:
    """tp = 8, D = 8: the all-reduces stay on NVLink, the ZeRO collectives span tp × D = 64 ranks; the bound is the
    busier link's time, not the sum (the two links work at once)."""
    s = parse_scenario({"model": "llama-2-7b", "dp": 8, "tp": 8})
    t = step_traffic(s, LINKS)
    tp = tensor_parallel(s)
    assert tp is not None
    zero = communication(s, 3).bytes
    assert t.bytes == zero + tp.bytes
    assert t.intra_ns == ceil_div(tp.bytes * 10**9, 450 * 10**9)
    assert t.inter_ns == ceil_div(zero * 10**9, 50 * 10**9)
    assert t.lower_bound_ns == max(t.intra_ns, t.inter_ns) < t.intra_ns + t.inter_ns


def test_hsdp_shard_group_within_a_node() -> None:
    """HSDP with a shard group of 8: its all-gathers and reduce-scatter stay in the node, the replicas' all-reduce
    of the gradient shard crosses it."""
    s = parse_scenario({"model": "llama-2-7b", "dp": 64, "shard_group": 8})
    t = step_traffic(s, LINKS)
    inside = [p for p in t.parts if not p.across_nodes]
    across = [p for p in t.parts if p.across_nodes]
    assert [p.span for p in inside] == [8] and [p.span for p in across] == [64]
    assert "across HSDP groups" in across[0].what
