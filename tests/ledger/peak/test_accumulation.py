"""Gradient accumulation: ``grad_accum`` micro batches a step, reduced after each (``grad_sync every``) or only after
the last (``last``). What each holds and sends, what the checks and mutants say about it, and how a bad value is
refused. The peaks themselves are held to real FSDP2 traces in ``tests/trace/test_accumulation_traced.py``."""

from __future__ import annotations

import pytest

from app.ledger.estimate import estimate
from app.ledger.ledger import compute_ledger
from app.ledger.scenario import ScenarioError, parse_scenario
from app.ledger.state.communication import communication
from app.ledger.verify.mutants import kill_list

FSDP2 = {"param_bytes": 4, "master_bytes": 0, "grad_bytes": 4, "opt_bytes": 4, "gather_bytes": 2, "reduce_bytes": 4}
RUN = {"model": "llama-2-7b", "dp": 8, "seq_len": 2048, **FSDP2}


def _stage(stage: int, **raw: object) -> object:
    return compute_ledger(parse_scenario({**RUN, **raw})).stages[stage]


def _at_loss(stage: int, *categories: str, **raw: object) -> int:
    st = _stage(stage, **raw)
    schedule = st.peak.schedule  # type: ignore[attr-defined]
    assert schedule is not None
    return int(next(i for i in schedule.instants if i.key == "loss-backward").bytes_of(*categories))


def test_one_micro_batch_is_the_step_as_before() -> None:
    assert _stage(3).peak.total == _stage(3, grad_accum=1, grad_sync="last").peak.total  # type: ignore[attr-defined]


def test_synced_every_micro_batch_every_gradient_shard_is_resident_from_the_second() -> None:
    st = _stage(3, grad_accum=4, grad_sync="every")
    assert _at_loss(3, "gradients") == 0
    assert _at_loss(3, "gradients", grad_accum=4, grad_sync="every") == st.bytes_of("gradients") > 0  # type: ignore[attr-defined]
    assert _at_loss(3, "unsharded_grads", grad_accum=4, grad_sync="every") == 0


@pytest.mark.parametrize("stage", [2, 3])
def test_without_sync_every_unit_is_held_unsharded_in_the_reduce_width(stage: int) -> None:
    s = parse_scenario(RUN)
    assert _at_loss(stage, "gradients", grad_accum=2, grad_sync="last") == 0  # no shard before the last reduces
    held = _at_loss(stage, "unsharded_grads", grad_accum=2, grad_sync="last")
    assert held == s.params * 4  # every parameter, FP32 (reduce_bytes 4)
    assert _at_loss(stage, "unsharded_grads", grad_accum=2, grad_sync="last", reduce_bytes=2) == s.params * 2


@pytest.mark.parametrize("stage", [0, 1])
def test_at_stages_0_and_1_the_gradients_are_whole_either_way(stage: int) -> None:
    every = _stage(stage, grad_accum=2, grad_sync="every").peak.total  # type: ignore[attr-defined]
    assert every == _stage(stage, grad_accum=2, grad_sync="last").peak.total  # type: ignore[attr-defined]


def test_the_peak_does_not_grow_after_the_second_micro_batch() -> None:
    totals = {(sync, k): _stage(3, grad_accum=k, grad_sync=sync).peak.total  # type: ignore[attr-defined]
              for sync in ("every", "last") for k in (2, 3, 64)}  # fmt: skip
    assert len(set(totals.values())) == 2


def test_the_declared_peak_without_a_model_adds_the_unsharded_gradients() -> None:
    base = {"params": 7_000_000_000, "dp": 8, "reduce_bytes": 4}
    one = compute_ledger(parse_scenario(base)).stages
    many = compute_ledger(parse_scenario({**base, "grad_accum": 8, "grad_sync": "last"})).stages
    assert [b.peak.total - a.peak.total for a, b in zip(one, many, strict=True)] == [0, 0, 28e9, 28e9]
    assert many[3].peak.buckets == 7_000_000_000 * 4


def test_the_communication_counts_each_micro_batchs_collectives() -> None:
    s1 = parse_scenario({"params": 8_000, "dp": 8})
    every = parse_scenario({"params": 8_000, "dp": 8, "grad_accum": 4, "grad_sync": "every"})
    last = parse_scenario({"params": 8_000, "dp": 8, "grad_accum": 4, "grad_sync": "last"})
    psi_p, psi_g = 8_000 * 2, 8_000 * 2  # BF16 parameters and gradients
    assert communication(s1, 3).volume == 2 * psi_p + psi_g
    assert communication(every, 3).volume == 4 * (2 * psi_p + psi_g)  # gathers and reduce-scatters each time
    assert communication(last, 3).volume == 4 * 2 * psi_p + psi_g  # gathers each time, one reduce-scatter
    assert communication(last, 2).volume == psi_g + psi_p  # one reduce-scatter, one gather of the update
    assert communication(every, 0).volume == 4 * 2 * psi_g  # an all-reduce per micro batch
    assert "4 micro batches" in communication(last, 3).collectives


def test_the_checks_pass_and_the_mutants_say_why_they_survive() -> None:
    keep, drop = "keep-all-grads-at-activation-peak", "drop-reduce-scatter-buffer"
    for sync, survivor, killed, why in (("every", keep, drop, "from the second micro batch"),
                                        ("last", drop, keep, "only the last micro batch reduce-scatters")):  # fmt: skip
        e = estimate(parse_scenario({**RUN, "grad_accum": 2, "grad_sync": sync}))
        assert all(c.passed for c in e.checks), [c for c in e.checks if not c.passed]
        results = {m.id: m for m in kill_list(e.scenario)}
        assert not results[survivor].killed and why in results[survivor].message
        assert results[killed].killed, results[killed].message


def test_the_stacks_preset_their_sync_with_evidence() -> None:
    assert parse_scenario({}).grad_sync == "every"
    assert parse_scenario({"stack": "hf-fsdp2"}).grad_sync == "last"
    assert parse_scenario({"stack": "torchtitan"}).grad_sync == "every"
    assert parse_scenario({"stack": "hf-fsdp2", "grad_sync": "every"}).grad_sync == "every"  # typed wins


@pytest.mark.parametrize(("raw", "field"), [
    ({"grad_accum": 0}, "grad_accum"),
    ({"grad_accum": 1_025}, "grad_accum"),
    ({"grad_sync": "never"}, "grad_sync"),
])  # fmt: skip
def test_a_bad_accumulation_is_refused_naming_the_field(raw: dict[str, object], field: str) -> None:
    with pytest.raises(ScenarioError) as caught:
        parse_scenario(raw)
    assert set(caught.value.by_field()) == {field}


def test_the_api_and_the_cli_refuse_it_naming_the_field() -> None:
    from fastapi.testclient import TestClient

    from app.web.app import create_app
    from tests.support.cli_run import run_cli

    with TestClient(create_app()) as client:
        answer = client.get("/api/estimate", params={"grad_accum": "0"})
        ok = client.get("/api/estimate", params={"model": "llama-2-7b", "grad_accum": "4", "grad_sync": "last"})
    assert answer.status_code == 422 and [d["field"] for d in answer.json()["detail"]] == ["grad_accum"]
    assert ok.status_code == 200 and ok.json()["scenario"]["grad_accum"] == 4
    cli = run_cli("estimate", "--grad-accum", "1025")
    assert cli.returncode == 2 and "--grad-accum: 1,025 is out of range (allowed: 1 … 1,024)" in cli.stderr


def test_units_kept_after_backward_are_gathered_once_in_forward() -> None:
    raw = {"params": 8_000, "dp": 8, "grad_accum": 4, "grad_sync": "last"}
    psi_p, psi_g = 8_000 * 2, 8_000 * 2
    kept = communication(parse_scenario({**raw, "reshard_after_backward": 0}), 3)
    assert kept.volume == psi_p + 4 * psi_p + psi_g  # the forward's once, the backward's each time, one sync
    assert "reshard_after_backward 0" in kept.collectives


def test_the_fsdp2_snippet_loops_over_the_micro_batches() -> None:
    from app.interop.fsdp2 import fsdp2_snippet

    text = fsdp2_snippet(parse_scenario({**RUN, "grad_accum": 4, "grad_sync": "last", "reshard_after_backward": 0}))
    compile(text.text, "fsdp2.py", "exec")  # valid Python
    assert "model.set_requires_gradient_sync(last)" in text.text
    assert "model.set_reshard_after_backward(last)" in text.text
    assert "last = i == 3" in text.text
    plain = fsdp2_snippet(parse_scenario({**RUN, "grad_accum": 4})).text
    assert "micro_batches" in plain and "set_requires_gradient_sync" not in plain


def test_the_page_and_the_table_say_the_run_accumulates() -> None:
    from fastapi.testclient import TestClient

    from app.receipts.table import render_table
    from app.web.app import create_app

    with TestClient(create_app()) as client:
        page = client.get("/", params={"model": "llama-2-7b", "grad_accum": "4", "grad_sync": "last"}).text
    assert "micro batch 1 × 4 accumulated (no sync before the last)." in page
    e = estimate(parse_scenario({**RUN, "grad_accum": 4, "reshard_after_backward": 0}), with_kill_lists=False)
    assert "4 micro batches a step, gradients reduced after each, units kept gathered between them" in render_table(e)


def test_the_declared_peak_keeps_every_unit_gathered_between_micro_batches() -> None:
    """No model (the declared peak): with reshard_after_backward 0 over several micro batches, stage 3 holds every
    unit's remote shards, (N − ⌈N ÷ D⌉) × the gather width, in place of the largest unit's."""
    base = {"params": 7_000_000_000, "dp": 8}
    one = compute_ledger(parse_scenario(base)).stages[3].peak
    kept = compute_ledger(parse_scenario({**base, "grad_accum": 4, "reshard_after_backward": 0})).stages[3].peak
    assert one.gather == (400_000_000 - 50_000_000) * 2
    assert kept.gather == (7_000_000_000 - 875_000_000) * 2 and "kept gathered" in kept.gather_formula.text
