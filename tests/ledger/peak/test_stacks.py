"""The training stack as an input: its presets, and where the loss runs as the schedule walks it.

Hand numbers on the model reference (Llama-2-7B, FSDP2 layout, D = 8, full recomputation): one decoder
layer is 202,383,360 parameters, all-gathered in BF16. The rule is checked against transformers' own
``LlamaForCausalLM`` traced under FSDP2 in ``tests/trace/test_stacks_traced.py``.
"""

from __future__ import annotations

from typing import Any

import pytest

from app.ledger.ledger import compute_ledger
from app.ledger.scenario import ScenarioError, parse_scenario
from app.ledger.scenario.links import canonical_query
from app.ledger.scenario.stacks import STACK_CHOICES, STACKS, preset
from app.ledger.verify.frozen import FROZEN_MODEL_INPUTS, FROZEN_MODEL_INSTANTS

LAYER_GATHERED = 202_383_360 * 2  # one decoder layer's all-gather output in BF16


def _instants(**raw: Any) -> dict[str, int]:
    walk = compute_ledger(parse_scenario({**FROZEN_MODEL_INPUTS, **raw})).stages[3].peak.schedule
    assert walk is not None
    return {i.key: i.total for i in walk.instants}


def test_the_default_stack_keeps_todays_numbers() -> None:
    assert _instants() == FROZEN_MODEL_INSTANTS
    assert _instants(stack="plain-fsdp2", loss="outside") == FROZEN_MODEL_INSTANTS


@pytest.mark.parametrize(("prefetch", "layers"), [(0, 1), (1, 1), (2, 2), (3, 3)])
def test_a_loss_inside_the_model_holds_the_roots_prefetch_at_the_loss_backward(prefetch: int, layers: int) -> None:
    """The loss runs inside the root module's forward, so the root's pre-backward (which prefetches the last
    max(1, P) layers) runs before the loss's backward, not after it: only the loss-backward instant grows."""
    outside, inside = _instants(prefetch=prefetch), _instants(prefetch=prefetch, loss="inside")
    assert inside["loss-backward"] == outside["loss-backward"] + layers * LAYER_GATHERED
    assert {k: v for k, v in inside.items() if k != "loss-backward"} == {
        k: v for k, v in outside.items() if k != "loss-backward"
    }


@pytest.mark.parametrize("raw", [{"dp": 1}, {"reshard_after_forward": 0}])
def test_without_a_reshard_there_is_nothing_to_prefetch(raw: dict[str, Any]) -> None:
    assert _instants(**raw, loss="inside") == _instants(**raw)


# Llama-2-7B's carved units by hand: the embedding E (32,000 × 4,096) and the tail T (final norm + untied head)
H, V, LAYERS, D = 4096, 32_000, 32, 8
E, T = V * H, H + V * H
LAYER = 202_383_360


def test_accelerates_units_by_hand() -> None:
    """wrap = embed-tail (the hf-fsdp2 stack's), against the root recipe's frozen instants: the embedding is
    not held through the step, the tail's all-gather output is held to the end of the root's forward, and the
    root owns nothing to prefetch with before the loss's backward."""
    root = FROZEN_MODEL_INSTANTS
    carved = _instants(loss="inside", wrap="embed-tail")
    # the end of forward: the tail unsharded and its all-gather output, where the root recipe holds E + T unsharded
    assert carved["end-of-forward"] == root["end-of-forward"] - (E + T) * 2 + 2 * T * 2
    # the loss's backward: the tail alone unsharded, nothing prefetched
    assert carved["loss-backward"] == root["loss-backward"] - E * 2
    # forward at layer 0: no root unsharded; the embedding's all-gather output is the one held to this copy-out
    assert carved["forward-layer-0"] == root["forward-layer-0"] - (E + T) * 2 - (E + T) * 2 + E * 2
    # the embedding's post-backward: every shard so far, its own gradient shard, whole gradient and FP32
    # reduce-scatter input
    state = (LAYERS * LAYER + E + T) // D * (4 + 8)
    grads = LAYERS * (LAYER // D) * 4 + T // D * 4 + E // D * 4
    assert carved["embedding-post-backward"] == state + grads + E * 2 + E * 4
    # in BF16 (Accelerate's reduce width) the reduce-scatter's input, and its output before the cast to FP32
    bf16 = _instants(loss="inside", wrap="embed-tail", reduce_bytes=2)
    assert bf16["embedding-post-backward"] == state + grads + E * 2 + E * 2 + E // D * 2
    assert carved["optimizer-step"] == root["optimizer-step"]
    assert "root-post-backward" not in carved and "loss-forward" in carved


def test_the_walk_says_which_units_it_walks() -> None:
    carved = compute_ledger(parse_scenario({**FROZEN_MODEL_INPUTS, "stack": "hf-fsdp2"})).stages[3].peak.schedule
    assert carved is not None and "Units as Accelerate carves them" in carved.note
    plain = compute_ledger(parse_scenario(FROZEN_MODEL_INPUTS)).stages[3].peak.schedule
    assert plain is not None and "Accelerate" not in plain.note


def test_the_receipt_names_the_prefetch_at_the_loss_backward() -> None:
    walk = compute_ledger(parse_scenario({**FROZEN_MODEL_INPUTS, "loss": "inside"})).stages[3].peak.schedule
    assert walk is not None
    loss = next(i for i in walk.instants if i.key == "loss-backward")
    entry = next(e for e in loss.entries if "prefetched by the root's pre-backward" in e.what)
    assert entry.bytes == LAYER_GATHERED and entry.category == "all_gather"
    assert "the loss runs inside the root module" in entry.what


# --------------------------------------------------------------------------- the stack's presets


def test_each_stack_decides_its_choices_and_says_why() -> None:
    assert STACKS == ("plain-fsdp2", "hf-fsdp2", "torchtitan")
    for stack in STACKS:
        for choice in STACK_CHOICES:
            given = preset(stack, choice)
            # every choice but the widths that otherwise follow the parameter and gradient widths (the frozen
            # parameters' follows the parameters' where the whole model is built in one width)
            assert given is not None or (stack, choice) in {
                ("plain-fsdp2", "gather_bytes"),
                ("plain-fsdp2", "reduce_bytes"),
                ("plain-fsdp2", "frozen_bytes"),
                ("torchtitan", "frozen_bytes"),
            }
            assert given is None or given.evidence  # each preset says why, citing the project's code


def test_the_hf_stack_is_accelerates_fsdp2_precision_layout() -> None:
    """FP32 sharded parameters, gradients and AdamW states (no master copy), BF16 all-gather and reduce-scatter;
    the plain stack keeps the seed's layout, its all-gather and reduce widths following the parameters'."""
    hf, plain = parse_scenario({"stack": "hf-fsdp2"}), parse_scenario({})
    widths = ("param_bytes", "grad_bytes", "master_bytes", "opt_bytes", "gather_bytes", "reduce_bytes")
    assert [getattr(hf, w) for w in widths] == [4, 4, 0, 4, 2, 2]
    assert [getattr(plain, w) for w in widths] == [2, 2, 4, 4, 2, 2]
    assert parse_scenario({"param_bytes": 4}).gather_bytes == 4  # the plain stack's all-gather follows
    assert parse_scenario({"stack": "hf-fsdp2", "param_bytes": 2}).gather_bytes == 2  # the stack's own, typed over


PLAIN_WIDTHS = ("param_bytes", "grad_bytes", "master_bytes", "opt_bytes")
HF_WIDTHS = (*PLAIN_WIDTHS, "gather_bytes", "reduce_bytes")
KERNELS = ("buffers", "act_policy", "norms", "gqa", "optimizer_impl", "grad_sync", "save_path", "load_path")


@pytest.mark.parametrize(("raw", "loss", "wrap", "from_stack"), [
    ({}, "outside", "root", ("loss", "wrap", *KERNELS, *PLAIN_WIDTHS)),
    ({"stack": "hf-fsdp2"}, "inside", "embed-tail", ("loss", "wrap", *KERNELS, *HF_WIDTHS, "frozen_bytes")),
    ({"stack": "hf-fsdp2", "loss": "outside"}, "outside", "embed-tail",
     ("wrap", *KERNELS, *HF_WIDTHS, "frozen_bytes")),  # typed
    ({"loss": "inside", "wrap": "embed-tail"}, "inside", "embed-tail", (*KERNELS, *PLAIN_WIDTHS)),
    ({"stack": "torchtitan"}, "chunked", "embed-tail", ("loss", "wrap", *KERNELS, *HF_WIDTHS)),
    ({"stack": "torchtitan", "act_policy": "full"}, "chunked", "embed-tail",
     ("loss", "wrap", "buffers", "norms", "gqa", "optimizer_impl", "grad_sync", "save_path", "load_path",
      *HF_WIDTHS)),
])  # fmt: skip
def test_a_choice_left_empty_takes_the_stacks_value(
    raw: dict[str, str], loss: str, wrap: str, from_stack: tuple[str, ...]
) -> None:
    s = parse_scenario(raw)
    assert (s.loss, s.wrap) == (loss, wrap)
    given = {c: preset(s.stack, c) for c in STACK_CHOICES}
    assert tuple(c for c, p in given.items() if p is not None and getattr(s, c) == p.value) == from_stack


@pytest.mark.parametrize(("raw", "query"), [
    ({"stack": "hf-fsdp2"}, "stack=hf-fsdp2"),  # the stack's own value is not spelled again
    ({"stack": "hf-fsdp2", "loss": "inside"}, "stack=hf-fsdp2"),
    ({"stack": "hf-fsdp2", "loss": "outside"}, "loss=outside&stack=hf-fsdp2"),
    ({"loss": "inside"}, "loss=inside"),
    ({"stack": "hf-fsdp2", "wrap": "root"}, "stack=hf-fsdp2&wrap=root"),
])  # fmt: skip
def test_the_link_spells_only_what_differs_from_the_stack(raw: dict[str, str], query: str) -> None:
    assert canonical_query(parse_scenario(raw)) == query


@pytest.mark.parametrize(
    ("raw", "field"), [({"stack": "deepspeed"}, "stack"), ({"loss": "sampled"}, "loss"), ({"wrap": "auto"}, "wrap")]
)
def test_a_stack_or_loss_it_does_not_know_names_the_field(raw: dict[str, str], field: str) -> None:
    with pytest.raises(ScenarioError) as caught:
        parse_scenario(raw)
    (error,) = caught.value.errors
    assert error.field == field and error.allowed.startswith("one of ")


@pytest.mark.parametrize(("raw", "field", "says"), [
    ({"stack": "torchtitan", "seq_len": "1001"}, "loss_chunks", "8 does not divide seq_len (1,001)"),
    ({"loss": "chunked"}, "loss", "walked with torchtitan's units (wrap embed-tail"),
    ({"stack": "torchtitan", "model": "qwen2-0.5b"}, "loss", "tied embeddings"),
])  # fmt: skip
def test_a_chunked_loss_the_lab_cannot_walk_names_the_field(raw: dict[str, str], field: str, says: str) -> None:
    """torchtitan's ChunkedLossWrapper needs equal slices; the lab walks it on torchtitan's carved units of an
    untied model only, and says so rather than count whole logits."""
    with pytest.raises(ScenarioError) as caught:
        parse_scenario({"model": "llama-2-7b", **raw})
    errors = {e.field: e for e in caught.value.errors}
    assert says in errors[field].message, errors


def test_the_stack_s_chunked_loss_is_one_slice_of_logits_at_a_time() -> None:
    """Llama 2 7B under torchtitan, s 4,096: at every stage no instant of the walk holds s·b·V logits, and each loss
    instant holds one slice's, s ÷ 8 · V × 2 B; its loss holds less than the same run's with whole logits."""
    from app.ledger.ledger import compute_ledger

    chunked = compute_ledger(parse_scenario({"model": "llama-2-7b", "stack": "torchtitan", "dp": "8"}))
    whole = compute_ledger(parse_scenario({"model": "llama-2-7b", "stack": "torchtitan", "dp": "8", "loss": "outside"}))
    slice_logits = 4096 // 8 * 32_000 * 2
    for stage in range(4):
        walk, whole_walk = chunked.stages[stage].peak.schedule, whole.stages[stage].peak.schedule
        assert walk is not None and whole_walk is not None
        loss = [i for i in walk.instants if i.phase == "loss"]
        for instant in loss:
            assert all("logits" not in e.what or "slice" in e.what for e in instant.entries), (stage, instant.key)
        assert any(e.bytes == slice_logits for i in loss for e in i.entries if e.what.startswith("the slice's logits"))
        whole_loss = max(i.total for i in whole_walk.instants if i.phase == "loss")
        assert max(i.total for i in loss) < whole_loss, stage


@pytest.mark.parametrize(("raw", "says"), [
    ({"stack": "plain-fsdp2"}, "walked with Accelerate's units"),
    ({"model": "llama-3.2-1b"}, "tied embeddings"),
    ({"model": "gpt-neox-20b"}, "not gpt_neox"),
    ({"tp": "2"}, "one data-parallel mesh"),
])  # fmt: skip
def test_a_fused_loss_the_lab_cannot_walk_names_the_field(raw: dict[str, str], says: str) -> None:
    """Liger's fused loss is walked on Accelerate's units of an untied model of Liger's families, on one mesh;
    anything else says so, naming loss."""
    with pytest.raises(ScenarioError) as caught:
        parse_scenario({"model": "llama-3.1-8b", "stack": "hf-fsdp2", "loss": "fused", **raw})
    errors = {e.field: e for e in caught.value.errors}
    assert says in errors["loss"].message, errors


def test_the_fused_loss_keeps_the_head_s_gradient_and_no_logits() -> None:
    """Llama 3.1 8B under the HF stack, D 8, s 8,192: with Liger's fused loss no instant holds s·b·V logits; its loss
    forward holds the head weight's gradient (V·h in BF16) and the hidden state's (s·b·h), made in forward, and one
    chunk's logits (Liger's chunk: next_pow2(⌈8,192 ÷ ⌈128,256 ÷ 4,096⌉⌉) = 256 tokens); the peak falls below the
    same run's with transformers' loss on whole logits."""
    from app.ledger.ledger import compute_ledger

    raw = {"model": "llama-3.1-8b", "stack": "hf-fsdp2", "dp": "8", "seq_len": "8192"}
    fused_stages = compute_ledger(parse_scenario({**raw, "loss": "fused"})).stages
    whole_stages = compute_ledger(parse_scenario(raw)).stages
    fused = fused_stages[3].peak
    assert fused.schedule is not None
    loss = {i.key: i for i in fused.schedule.instants}["loss-forward"]
    got = {e.what: e.bytes for e in loss.entries}
    assert got["the head weight's gradient, computed in forward (Liger's grad_weight)"] == 128_256 * 4_096 * 2
    assert got["the hidden state's gradient, computed in forward (Liger's grad_input)"] == 8_192 * 4_096 * 2
    assert got["one chunk's logits, turned into their gradient in place (logits_storage)"] == 256 * 128_256 * 2
    for stage in range(4):  # stages 0–2 too: the loss ends their forward the same way
        walk = fused_stages[stage].peak.schedule
        assert walk is not None and fused_stages[stage].peak.total < whole_stages[stage].peak.total, stage
        for instant in walk.instants:
            assert all(e.bytes < 8_192 * 128_256 for e in instant.entries if "logits" in e.what), instant.key


def test_the_fit_finder_offers_torchtitan_only_a_d_it_can_shard() -> None:
    """Qwen3-30B-A3B under torchtitan past D > 128 experts: the experts go on dim 1 (1,536 and 2,048 rows), which
    only 256 and 512 of the degrees up to 512 divide. At 8.5 GB the peak first fits at D 158, which torchtitan's
    fully_shard refuses: the finder offers 256, a D the scenario takes and at which it fits."""
    from app.ledger.estimate import estimate

    raw = {"model": "qwen3-30b-a3b", "stack": "torchtitan", "dp": 64, "act_policy": "full", "capacity_bytes": "8.5GB"}
    found = next(f for f in estimate(parse_scenario(raw), with_kill_lists=False).fit.stages if f.stage == 3)
    assert found.smallest_dp == 256
    at = estimate(parse_scenario({**raw, "dp": 256}), with_kill_lists=False).ledger.stages[3]
    assert at.peak.fits
