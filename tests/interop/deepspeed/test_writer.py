"""A scenario written as a ds_config.json (``app.interop.deepspeed.writer``) and read back: the round trip,
and the notes that name what DeepSpeed cannot express."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.interop.deepspeed.keys import DEEPSPEED_FIELDS
from app.interop.deepspeed.reader import import_deepspeed
from app.interop.deepspeed.writer import deepspeed_config
from app.ledger.scenario import Scenario, parse_scenario
from app.ledger.scenario.links import canonical_query
from tests.interop.deepspeed.configs import config
from tests.support.strategies import scenarios


def reimported(s: Scenario) -> Scenario:
    """``s`` written as a ds_config.json and read back beside its inputs the config does not carry."""
    cfg, _ = deepspeed_config(s)
    others = {name: value for name, value in s.non_default_items() if name not in DEEPSPEED_FIELDS}
    return import_deepspeed(json.loads(json.dumps(cfg)), others).scenario


@pytest.mark.parametrize(
    ("name", "inputs"),
    [
        ("llava-zero3", {"model": "llama-2-13b"}),
        ("llava-zero2", {"model": "llama-2-13b"}),
        ("axolotl-zero3-bf16-cpuoffload-all", {"model": "mixtral-8x7b-v0.1"}),
        ("deepspeed-chat-step1-zero3", {"model": "llama-2-7b"}),
        ("bloom-176b-tr11", {"dp": 8}),
    ],
)
def test_config_scenario_config_is_stable(name: str, inputs: dict[str, object]) -> None:
    """config → scenario → config → scenario: the same canonical link, and the written config reads
    back to itself."""
    first = import_deepspeed(config(name), inputs).scenario
    again = reimported(first)
    assert canonical_query(again) == canonical_query(first)
    assert deepspeed_config(again) == deepspeed_config(first)


def divisors(number: int) -> list[int]:
    small = [d for d in range(1, int(number**0.5) + 1) if number % d == 0]
    return sorted({*small, *(number // d for d in small)})


@settings(max_examples=150, deadline=None)
@given(
    s=scenarios(),
    micro_batch=st.integers(1, 64),
    act_policy=st.sampled_from(["none", "full"]),
    reduce_bytes=st.sampled_from([2, 4]),
    layout=st.sampled_from(["plain", "hpz", "shard_group"]),
    pick=st.integers(0, 2**20),
)
def test_every_expressible_input_survives_the_round_trip(
    s: Scenario, micro_batch: int, act_policy: str, reduce_bytes: int, layout: str, pick: int
) -> None:
    """A scenario written as a config and read back keeps every DeepSpeed input the notes do not name
    as inexpressible, and its config reads back to the same config. The layout draws ZeRO++'s hpz or a
    shard group (MiCS) among D's divisors (not modelled together): at stage 3 they are written and read back,
    below it a note names them."""
    s = s.with_(micro_batch=micro_batch, act_policy=act_policy, reduce_bytes=reduce_bytes, name="")
    if layout != "plain":
        size = divisors(s.dp)[pick % len(divisors(s.dp))]
        s = s.with_(**{layout: size})
        assert parse_scenario(dict(s.non_default_items())) == s  # a valid scenario
    cfg, notes = deepspeed_config(s)
    back = reimported(s)
    said = " ".join(notes)
    # a field is exempt only where a note begins with its name (the note says it is not written)
    named = {name for name in DEEPSPEED_FIELDS for note in notes if note.startswith(name + " ")}
    named |= {"param_bytes", "master_bytes"} if any(note.startswith("param_bytes ") for note in notes) else set()
    named |= {"opt_bytes"} if any(note.startswith("opt_states ") for note in notes) else set()
    for name in sorted(DEEPSPEED_FIELDS):
        if name not in named and not (name == "prefetch" and s.unit_params == 0):
            assert getattr(back, name) == getattr(s, name), (name, notes)
    written = deepspeed_config(back)
    if not any(name in said for name in DEEPSPEED_FIELDS) and s.unit_params:
        assert written[0] == cfg  # wholly expressible: the same config
    if not any("not expressible" in note for note in written[1]):
        assert deepspeed_config(reimported(back)) == written  # and from a config, the trip is stable


def test_the_round_trip_keeps_hpz_and_the_shard_group() -> None:
    """At stage 3 hpz and a shard group are written (zero_hpz_partition_size, mics_shard_size) and read
    back; a shard group equal to D, and hpz 1, are DeepSpeed's defaults and are not written."""
    for fields in ({"hpz": 8}, {"shard_group": 8}, {"shard_group": 1}, {"shard_group": 64}, {"hpz": 1}):
        s = parse_scenario({"params": "7B", "dp": 64, **fields})
        zero = deepspeed_config(s)[0]["zero_optimization"]
        assert isinstance(zero, dict)
        assert zero.get("zero_hpz_partition_size") == (s.hpz if s.hpz > 1 else None)
        assert zero.get("mics_shard_size") == (s.shard_group if s.shard_group < s.dp else None)
        back = reimported(s)
        assert (back.hpz, back.shard_group) == (s.hpz, s.shard_group)
        assert deepspeed_config(back) == deepspeed_config(s)


def test_below_stage_3_hpz_and_a_shard_group_are_notes() -> None:
    s = parse_scenario({"params": "7B", "dp": 64, "stage": 2, "shard_group": 8})
    cfg, notes = deepspeed_config(s)
    assert "mics_shard_size" not in json.dumps(cfg)
    assert any(note.startswith("shard_group 8: DeepSpeed has no such layout below stage 3") for note in notes)
    hpz = parse_scenario({"params": "7B", "dp": 64, "stage": 1, "hpz": 8})
    cfg, notes = deepspeed_config(hpz)
    assert "zero_hpz_partition_size" not in json.dumps(cfg)
    assert any(note.startswith("hpz 8: ") and "not written" in note for note in notes)


def test_pipeline_and_expert_parallelism_are_notes() -> None:
    pp = parse_scenario({"model": "llama-2-7b", "pp": 4})
    assert any("PipelineModule(num_stages=4)" in note for note in deepspeed_config(pp)[1])
    ep = parse_scenario({"model": "mixtral-8x7b-v0.1", "dp": 8, "ep": 8, "stage": 2})
    assert any("deepspeed.moe.layer.MoE(ep_size=8)" in note for note in deepspeed_config(ep)[1])
