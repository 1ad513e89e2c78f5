"""The layout search: every row valid, fitting by the lab's own estimate (read back from its link), sorted as
documented, bounded; and its pruning loses nothing against an exhaustive search of a small space."""

from __future__ import annotations

from urllib.parse import parse_qsl

import pytest

from app.ledger.estimate import estimate
from app.ledger.layouts import LayoutSearch, read_search, search_layouts
from app.ledger.layouts.query import GPUS
from app.ledger.layouts.search import MAX_PROBES, POLICY_COST
from app.ledger.layouts.traffic import slowest_rank, step_traffic
from app.ledger.pipeline import other_end
from app.ledger.scenario import Scenario, ScenarioError, parse_scenario
from app.ledger.scenario.links import canonical_query
from app.ledger.scenario.presets import DEVICE_BY_ID

BIG = parse_scenario({"model": "llama-3.1-70b"})


@pytest.fixture(scope="module")
def big() -> LayoutSearch:
    """The issue's case: a 70B model on 512 H100s, 1,024 sequences a step."""
    return search_layouts(BIG, read_search({"gpus": "512"}))


def fits_by_its_own_estimate(s: Scenario) -> tuple[bool, int]:
    """The scenario read back from its canonical link and estimated whole: does its stage fit, at both ends of a
    pipeline? And its peak (the budgeted end's)."""
    again = parse_scenario(dict(parse_qsl(canonical_query(s))))
    assert again == s
    e = estimate(again, with_kill_lists=False)
    stage = e.ledger.stages[again.stage]
    ends_fit = e.pipeline is None or (len(e.pipeline.ends) == 2 and all(end.fits for end in e.pipeline.ends))
    return stage.peak.fits and ends_fit, stage.peak.total


def test_seventy_b_on_512_gpus_lists_rows(big: LayoutSearch) -> None:
    assert len(big.rows) == 20 and not big.cut_short
    assert big.layouts > 0 and big.pruned > 0  # the bound closed the search before every candidate was searched
    assert big.searched + big.pruned == big.candidates and big.probes <= MAX_PROBES


def test_every_row_is_a_valid_layout_of_the_gpus_and_the_batch(big: LayoutSearch) -> None:
    for row in big.rows:
        s = row.scenario
        assert s.dp * s.tp * s.pp * s.cp == 512 == s.world
        assert s.micro_batch * s.grad_accum * s.dp == 1_024
        assert s.grad_accum >= s.pp  # 1F1B's fill
        assert s.capacity_bytes == DEVICE_BY_ID["h100-80gb"].capacity_bytes
        assert s.model == "llama-3.1-70b"


def test_every_row_fits_by_its_own_estimate(big: LayoutSearch) -> None:
    for row in big.rows:
        fits, peak = fits_by_its_own_estimate(row.scenario)
        assert fits, canonical_query(row.scenario)
        assert peak <= row.peak <= row.scenario.allocatable_bytes  # the row shows the busier end's
        assert row.headroom == row.scenario.allocatable_bytes - row.peak >= 0


def test_rows_are_sorted_by_bytes_then_time(big: LayoutSearch) -> None:
    keys = [(r.traffic.bytes, r.traffic.lower_bound_ns, POLICY_COST[r.scenario.act_policy],
             -r.scenario.reshard_after_forward, r.peak, r.scenario.tp, r.scenario.pp, r.scenario.stage)
            for r in big.rows]  # fmt: skip
    assert keys == sorted(keys)
    for row in big.rows:  # the traffic shown is the scenario's own, at the end whose traffic is larger
        assert row.traffic == slowest_rank(row.scenario, big.links)
        if row.scenario.pp > 1:
            other = step_traffic(other_end(row.scenario), big.links)
            assert (row.traffic.bytes, row.traffic.lower_bound_ns) >= (other.bytes, other.lower_bound_ns)


def test_ranked_by_time() -> None:
    r = search_layouts(BIG, read_search({"gpus": 512, "rank": "time", "rows": 10}))
    keys = [(row.traffic.lower_bound_ns, row.traffic.bytes) for row in r.rows]
    assert len(keys) == 10 and keys == sorted(keys)


def test_a_pipeline_row_budgets_its_busier_end(big: LayoutSearch) -> None:
    piped = [r for r in big.rows if r.scenario.pp > 1]
    assert piped
    for row in piped:
        e = estimate(row.scenario, with_kill_lists=False)
        assert e.pipeline is not None and e.pipeline.budgeted_is_busier


def test_no_layout_when_no_degree_divides_the_batch() -> None:
    """3 GPUs and a batch of 1,024: D is 1 or 3 and only 1 divides it, tp = 3 and pp = 3 the model refuses."""
    r = search_layouts(parse_scenario({"model": "llama-3.2-1b"}), read_search({"gpus": 3}))
    assert r.rows == () and r.layouts <= 1


def test_work_is_bounded_at_the_largest_gpu_count() -> None:
    r = search_layouts(BIG, read_search({"gpus": GPUS[1], "global_batch": 1_048_576}))
    assert r.probes <= MAX_PROBES and len(r.rows) <= 20


@pytest.mark.parametrize(
    ("raw", "field"),
    [({"gpus": GPUS[1] + 1}, "gpus"), ({"gpus": 0}, "gpus"), ({"global_batch": 0}, "global_batch"),
     ({"device": "seed-80gb"}, "device"), ({"rows": 51}, "rows"), ({"rank": "peak"}, "rank"),
     ({"gpus": "lots"}, "gpus")],
)  # fmt: skip
def test_bad_search_input_names_its_field(raw: dict[str, object], field: str) -> None:
    with pytest.raises(ScenarioError) as caught:
        read_search(raw)
    assert [e.field for e in caught.value.errors] == [field]
    assert caught.value.errors[0].allowed


def test_more_gpus_than_the_bound_says_why() -> None:
    with pytest.raises(ScenarioError) as caught:
        read_search({"gpus": "70000"})
    (e,) = caught.value.errors
    assert "70,000 is more GPUs than the search's bound" in e.message and e.allowed == "1 … 65,536"


@pytest.mark.parametrize(
    ("raw", "field"),
    [({}, "model"), ({"model": "llama-2-7b", "params": "7B"}, "params"),
     ({"model": "llama-2-7b", "activation_bytes": "20GB"}, "activation_bytes")],
)  # fmt: skip
def test_a_scenario_that_cannot_start_a_search(raw: dict[str, object], field: str) -> None:
    with pytest.raises(ScenarioError) as caught:
        search_layouts(parse_scenario(raw), read_search({}))
    assert [e.field for e in caught.value.errors] == [field]


# --------------------------------------------------------------------------- against an exhaustive search


def _exhaustive(base: Scenario, gpus: int, batch: int, device: str) -> list[tuple[int, ...]]:
    """Every (tp, pp, cp, policy, stage, reshard) the scenario accepts at its largest micro batch that fits, each micro
    batch tried from the largest down and its fit checked by a whole estimate at both ends; kept as the search
    documents it: per (D, tp, pp, cp, traffic) the least recomputation, then reshard after forward, then the lowest
    peak; sorted by (bytes, time, …)."""
    links = DEVICE_BY_ID[device].links
    assert links is not None
    typed = dict(base.non_default_items())
    best: dict[tuple[int, ...], tuple[int, ...]] = {}
    # every (tp, pp, cp) whose product divides the GPUs: the scenario's own rules refuse what cannot be (cp with pp,
    # 2 × cp not dividing the sequence), so none is filtered here
    sizes = [n for n in range(1, gpus + 1) if gpus % n == 0]
    for tp, pp, cp in ((t, p, c) for t in sizes for p in sizes for c in sizes if gpus % (t * p * c) == 0):
        dp = gpus // (tp * pp * cp)
        if batch % dp:
            continue
        for policy in POLICY_COST:
            for stage, raf in ((0, 1), (1, 1), (2, 1), (3, 1), (3, 0)):
                for b in (b for b in range(batch // dp, 0, -1) if (batch // dp) % b == 0):
                    ga = batch // dp // b
                    if ga < pp:
                        continue
                    raw = {**typed, "dp": dp, "tp": tp, "pp": pp, "cp": cp, "act_policy": policy, "stage": stage,
                           "reshard_after_forward": raf, "micro_batch": b, "grad_accum": ga,
                           "capacity_bytes": DEVICE_BY_ID[device].capacity_bytes}  # fmt: skip
                    try:
                        s = parse_scenario(raw)
                    except ScenarioError:
                        continue
                    e = estimate(s, with_kill_lists=False)
                    peaks = [e.ledger.stages[stage].peak.total]
                    if e.pipeline is not None:
                        if len(e.pipeline.ends) < 2:
                            continue
                        peaks = [end.peak for end in e.pipeline.ends]
                    if max(peaks) > s.allocatable_bytes:
                        continue
                    t = step_traffic(s, links)
                    if pp > 1:  # the step waits for the end whose traffic is larger
                        t = max(t, step_traffic(other_end(s), links), key=lambda x: (x.bytes, x.lower_bound_ns))
                    key = (t.bytes, t.lower_bound_ns, POLICY_COST[policy], -raf, max(peaks))
                    shape = (dp, tp, pp, cp, t.bytes, t.lower_bound_ns)
                    best[shape] = min(best.get(shape, key), key)
                    break  # the largest micro batch that fits: the candidate's row
    return sorted(best.values())


@pytest.mark.parametrize(
    ("scenario", "gpus", "batch", "device"),
    [({"model": "llama-3.2-1b"}, 4, 16, "rtx4090"), ({"model": "qwen3-0.6b"}, 8, 32, "l40s"),
     ({"model": "llama-3.2-3b"}, 8, 16, "a100-40gb"),
     # hf-fsdp2 accumulates without sync (grad_sync last): every unit's unsharded gradient held from the second micro
     # batch on, so one micro batch a step can fit where two do not, and the peak does not grow with b across ga = 1
     ({"model": "llama-3.2-3b", "stack": "hf-fsdp2"}, 8, 64, "l40s"),
     # … as here: at D = 8, micro batch 8 × 1 peaks at 19.2 GiB, 4 × 2 at 31.1 GiB, 1 × 8 at 28.9 GiB (act full)
     ({"model": "llama-3.1-8b", "stack": "hf-fsdp2", "seq_len": "512"}, 8, 64, "rtx4090")],
)  # fmt: skip
def test_the_pruned_search_finds_what_an_exhaustive_one_finds(
    scenario: dict[str, str], gpus: int, batch: int, device: str
) -> None:
    """Spaces small enough to estimate whole (Llama-3.2-1B on 4 RTX 4090s …): the search's table is the exhaustive
    one's first rows, so its bound pruned nothing that belonged there, and its bisection over the micro batch found
    each candidate's largest that fits."""
    base = parse_scenario(scenario)
    expected = _exhaustive(base, gpus, batch, device)
    for rows in (12, 50):  # the table's first rows, pruned hard; and the whole table where it holds every row
        r = search_layouts(base, read_search({"gpus": gpus, "global_batch": batch, "device": device, "rows": rows}))
        got = [(row.traffic.bytes, row.traffic.lower_bound_ns, POLICY_COST[row.scenario.act_policy],
                -row.scenario.reshard_after_forward, row.peak) for row in r.rows]  # fmt: skip
        assert got == expected[: len(got)] and len(got) == min(rows, len(expected)) > 0


def test_a_reserve_above_the_device_s_capacity_is_named() -> None:
    """No layout can lift it: the answer names the field rather than listing nothing."""
    base = parse_scenario({"model": "llama-3.1-8b", "reserve_bytes": "30GiB"})
    with pytest.raises(ScenarioError) as caught:
        search_layouts(base, read_search({"gpus": 8, "device": "rtx4090"}))
    assert [e.field for e in caught.value.errors] == ["reserve_bytes"]


def test_the_scenario_s_shard_group_is_kept() -> None:
    """HSDP within a node (shard_group 8): every layout keeps it, so D is a multiple of 8."""
    base = parse_scenario({"model": "llama-3.1-8b", "shard_group": 8, "dp": 64})
    r = search_layouts(base, read_search({"gpus": 64, "rows": 5}))
    assert r.rows and all(row.scenario.shard_group == 8 and row.scenario.dp % 8 == 0 for row in r.rows)


def test_the_counts_add_up() -> None:
    """GPT-2 (12 heads, 12 layers) on 8 GPUs: tp 8 divides no head count and is refused whatever its partner; op,
    torchtitan's per-op policy for Llama-style blocks, is refused on every accepted layout; cp > 1 is refused too
    (GPT-2's attention needs a mask, torch's ring attention is_causal)."""
    r = search_layouts(parse_scenario({"model": "gpt2"}), read_search({"gpus": 8}))
    # (tp, pp) with tp × pp dividing 8: 10; and with pp = 1, cp > 1 dividing 8 ÷ tp: tp 1 (cp 2, 4, 8), tp 2 (2, 4),
    # tp 4 (2): 6 more
    assert r.layouts + r.refused == 10 + 6
    assert all(row.scenario.cp == 1 for row in r.rows)
    assert all(row.scenario.tp != 8 for row in r.rows)
    assert r.policies_refused == r.layouts  # op on each
    assert r.candidates == r.layouts * 3 * 5  # none, selective, full × 4 stages and reshard 0


def test_context_parallelism_is_searched_where_the_sequence_allows_it() -> None:
    """Llama-3.1-8B at s = 65,536 on 8 GPUs, a global batch of 8: layouts with cp > 1 are among those that fit, each
    with 2 × cp dividing the sequence, pp = 1, and D × tp × cp = 8. Llama-3.2-1B on 12 GPUs, a batch of 12: at
    s = 2,400 = 2⁵ × 75 layouts with cp 3 and 6 fit; at s = 2,000 = 2⁴ × 125 (2 × 3 ∤ 2,000) none with cp 3, 6 or 12."""
    base = parse_scenario({"model": "llama-3.1-8b", "seq_len": "65536"})
    r = search_layouts(base, read_search({"gpus": 8, "global_batch": 8, "rows": 50}))
    with_cp = [row.scenario for row in r.rows if row.scenario.cp > 1]
    assert with_cp
    assert all(s.pp == 1 and s.seq_len % (2 * s.cp) == 0 and s.dp * s.tp * s.cp == 8 for s in with_cp)
    q = read_search({"gpus": 12, "global_batch": 12, "rows": 50})
    cps: dict[int, set[int]] = {}
    for s in (2400, 2000):
        found = search_layouts(parse_scenario({"model": "llama-3.2-1b", "seq_len": str(s)}), q)
        cps[s] = {row.scenario.cp for row in found.rows}
    assert {3, 6} <= cps[2400]
    assert 2 in cps[2000] and not cps[2000] & {3, 6, 12}
