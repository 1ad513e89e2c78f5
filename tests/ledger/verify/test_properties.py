"""Properties over generated scenarios that span every input's full bounds.

The ledger is compared with two independent models: ``app.ledger.verify.oracle`` (the spec's second
stage table) and ``tests.support.naive_peak`` (written for the tests, sharing no code with ``app``).
"""

from __future__ import annotations

import json
from urllib.parse import parse_qsl

from hypothesis import given
from hypothesis import strategies as st

from app.ledger.estimate import estimate
from app.ledger.ledger import Ledger, compute_ledger
from app.ledger.scenario import Scenario, parse_scenario
from app.ledger.scenario.links import canonical_query
from app.ledger.state.host import host_ledger
from app.ledger.state.rules import CLASSES
from app.ledger.verify.mutants import MUTANTS, kill_list
from app.ledger.verify.oracle import stage_table
from app.receipts.receipt import receipt
from tests.support import naive_peak
from tests.support.json_data import as_json_data, walk
from tests.support.strategies import scenarios

FALLBACK_REASON = "no check tells it apart"


def numbers(ledger: Ledger) -> tuple[int | bool, ...]:
    """Every computed figure of a ledger (bytes, peak parts, verdicts, communication), in order."""
    out: list[int | bool] = []
    for st_ in ledger.stages:
        out.extend(ln.bytes for ln in st_.lines)
        p = st_.peak
        out.extend(
            (p.persistent, p.gather, p.buckets, p.activations, p.overhead, p.contingency, p.total, p.fits, p.headroom)
        )
        out.append(st_.communication.bytes)
    for h in ledger.host.stages:
        out.extend((h.per_node, h.nvme_per_node, h.peak))
    # check 9 reads the host ledger with both offloads to the CPU too: its figures there count as the ledger's
    offloaded = ledger.scenario.with_(offload_optimizer="cpu", offload_param="cpu")
    out.extend(h.per_node for h in host_ledger(offloaded, ledger.rules).stages)
    # check 1 reads the persistent lines in two shard groups of D ÷ 2 too (even D, a flat layout)
    s = ledger.scenario
    if s.dp % 2 == 0 and s.shard_group == s.dp and s.ep == 1 and s.hpz == 1:
        split = compute_ledger(s.with_(shard_group=s.dp // 2), ledger.rules, schedule=False)
        out.extend(ln.bytes for st_ in split.stages for ln in st_.lines)
    return tuple(out)


@given(scenarios())
def test_ledger_equals_the_oracle_per_stage_and_class(s: Scenario) -> None:
    table = stage_table(
        s.params, s.dp, s.param_bytes, s.grad_bytes, s.master_bytes, s.opt_states, s.opt_bytes,
        optimizer_offloaded=s.offload_optimizer != "none", params_offloaded=s.offload_param != "none",
    )  # fmt: skip
    ledger = compute_ledger(s)
    for st_ in ledger.stages:
        assert {c: st_.bytes_of(c) for c in CLASSES} == table[st_.stage]
        assert st_.persistent == sum(table[st_.stage].values())


@given(scenarios())
def test_persistent_totals_are_monotonic(s: Scenario) -> None:
    p0, p1, p2, p3 = (st_.persistent for st_ in compute_ledger(s).stages)
    assert p3 <= p2 <= p1 <= p0


@given(scenarios(), st.integers(1, 131_072))
def test_activation_bytes_in_the_peak_do_not_depend_on_dp(s: Scenario, other_dp: int) -> None:
    for ledger in (compute_ledger(s), compute_ledger(s.with_(dp=other_dp))):
        assert [st_.peak.activations for st_ in ledger.stages] == [s.activation_bytes] * 4


@given(scenarios())
def test_peak_matches_the_naive_model(s: Scenario) -> None:
    raw = s.as_dict()
    for st_ in compute_ledger(s).stages:
        assert st_.persistent == naive_peak.persistent(raw, st_.stage)
        assert st_.peak.gather == naive_peak.gather(raw, st_.stage)
        assert st_.peak.total == naive_peak.peak(raw, st_.stage)
        assert st_.peak.fits is (naive_peak.peak(raw, st_.stage) <= s.capacity_bytes)
        assert st_.communication.bytes == naive_peak.communication(raw, st_.stage)


@given(scenarios())
def test_production_passes_every_check(s: Scenario) -> None:
    failed = [c for c in estimate(s).checks if not c.passed]
    assert failed == []


@given(scenarios())
def test_every_integer_in_the_json_receipt_is_exact(s: Scenario) -> None:
    data = receipt(estimate(s))
    parsed = json.loads(json.dumps(data))
    assert parsed == as_json_data(data)
    scalars = list(walk(data))
    assert not any(isinstance(v, float) for v in scalars)
    integers = [v for v in scalars if isinstance(v, int) and not isinstance(v, bool)]
    assert integers
    for v in integers:
        assert type(v) is int
        assert abs(v) < 2**53
    for stage in data["stages"]:
        assert isinstance(stage["fits"], bool)
        for part in ("persistent", "gather", "total"):
            assert type(stage["peak"][part]) is int


@given(scenarios())
def test_a_mutant_survives_iff_it_is_equivalent(s: Scenario) -> None:
    production = numbers(compute_ledger(s))
    results = {m.id: m for m in kill_list(s)}
    for mutant in MUTANTS:
        equivalent = numbers(compute_ledger(s, mutant.rules)) == production
        result = results[mutant.id]
        assert result.killed is not equivalent, (mutant.id, result.message)
        if result.killed:
            assert result.check
            assert result.failed_checks
        else:
            assert result.message.startswith("survived: ")
            assert FALLBACK_REASON not in result.message
            assert mutant.equivalent_because(s) is not None


@given(scenarios())
def test_canonical_link_round_trips(s: Scenario) -> None:
    query = canonical_query(s)
    pairs = parse_qsl(query, keep_blank_values=True, strict_parsing=bool(query))
    keys = [k for k, _ in pairs]
    assert keys == sorted(keys)
    assert parse_scenario(dict(pairs), allow_unknown=False) == s


@given(scenarios())
def test_every_byte_count_is_an_int(s: Scenario) -> None:
    """pint-style exactness: no figure of the ledger is ever anything but a Python int."""
    for v in numbers(compute_ledger(s)):
        assert type(v) in (int, bool)
    for c in estimate(s).checkpoint:
        assert type(c.device_bytes) is int
        assert type(c.host_bytes) is int
