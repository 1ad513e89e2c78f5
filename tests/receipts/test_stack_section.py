"""The answer names the training stack and, for each choice it decides, whether the run takes the stack's value
(with the stack's evidence) or sets another: in the JSON receipt, the CSV and the comparison."""

from __future__ import annotations

import csv
import io

from app.ledger.estimate import estimate
from app.ledger.scenario import parse_scenario
from app.receipts.compare import compare, comparison_json
from app.receipts.compare_out import ComparisonOut
from app.receipts.csv_rows import csv_text
from app.receipts.receipt import receipt


def _choices(query: dict[str, str]) -> dict[str, dict[str, object]]:
    section = receipt(estimate(parse_scenario(query), with_kill_lists=False))["stack"]
    return {c["name"]: c for c in section["choices"]}


def test_every_choice_of_the_hf_stack_is_the_stacks_until_set() -> None:
    choices = _choices({"model": "llama-2-7b", "stack": "hf-fsdp2"})
    assert set(choices) == {"loss", "wrap", "buffers", "act_policy", "norms", "gqa", "optimizer_impl", "grad_sync",
                            "save_path", "load_path", "param_bytes", "grad_bytes", "master_bytes", "opt_bytes",
                            "gather_bytes", "reduce_bytes", "frozen_bytes"}  # fmt: skip
    assert all(c["source"] == "stack" and c["value"] == c["stack_value"] for c in choices.values())
    assert "transformers 5.23.0" in str(choices["loss"]["evidence"])
    assert "accelerate 1.15.0" in str(choices["wrap"]["evidence"])
    assert choices["load_path"]["value"] == "every-rank" and "cpu_ram_efficient_loading" in str(
        choices["load_path"]["evidence"]
    )


def test_a_choice_set_over_the_stack_says_so_and_keeps_the_stacks_value_beside() -> None:
    choices = _choices({"model": "llama-2-7b", "stack": "hf-fsdp2", "loss": "outside", "param_bytes": "2"})
    assert (choices["loss"]["value"], choices["loss"]["source"], choices["loss"]["stack_value"]) == (
        "outside", "set", "inside")  # fmt: skip
    assert (choices["param_bytes"]["value"], choices["param_bytes"]["source"]) == (2, "set")
    assert choices["wrap"]["source"] == "stack"


def test_a_typed_value_equal_to_the_stacks_is_the_stacks() -> None:
    """The link drops a value equal to its default, so typing the stack's own value is the stack's."""
    assert _choices({"stack": "hf-fsdp2", "loss": "inside"})["loss"]["source"] == "stack"


def test_the_plain_stack_decides_the_loss_the_wrapping_the_kernels_and_the_seed_layout() -> None:
    choices = _choices({})
    assert [c["value"] for c in choices.values()] == [
        "outside", "root", "none", "none", "unfused", "native", "for-loop", "every", "sharded", "partitioned",
        2, 2, 4, 4]  # fmt: skip


def test_the_csv_input_rows_say_where_each_choice_came_from() -> None:
    s = parse_scenario({"model": "llama-2-7b", "stack": "hf-fsdp2", "loss": "outside"})
    rows = {r["category"]: r for r in csv.DictReader(io.StringIO(csv_text(estimate(s, with_kill_lists=False))))
            if r["ledger"] == "input"}  # fmt: skip
    assert rows["loss"]["detail"].endswith("set over the stack (hf-fsdp2), which sets inside")
    assert "set by the stack (hf-fsdp2): accelerate 1.15.0" in rows["wrap"]["detail"]
    assert "stack" not in rows["dp"]["detail"]


def test_the_comparison_says_which_side_took_its_stacks_value() -> None:
    a = parse_scenario({"model": "llama-2-7b"})
    b = parse_scenario({"model": "llama-2-7b", "stack": "hf-fsdp2", "loss": "outside"})
    data = comparison_json(compare(a, b))
    ComparisonOut.model_validate(data)  # the schema /openapi.json documents
    changes = {i["name"]: i for i in data["diff"]["inputs"]}
    assert changes["wrap"] == {"name": "wrap", "a": "root", "b": "embed-tail", "a_source": "stack",
                               "b_source": "stack", "peak_alone_bytes": None, "alone_error": None}  # fmt: skip
    # wrap only follows the stack (B never typed it): the stack is the edit, and moves the peak by itself
    assert changes["stack"]["peak_alone_bytes"] is not None
    assert "loss" not in changes  # outside on both sides: plain's by its stack, B's set over hf-fsdp2's
    assert changes["param_bytes"]["b_source"] == "stack"
    assert changes["stack"]["a_source"] is None
    assert data["b"]["stack"]["name"] == "hf-fsdp2"


def test_the_trains_section_counts_what_trains_and_says_why() -> None:
    def trains(query: dict[str, str]) -> dict[str, object]:
        section: dict[str, object] = receipt(estimate(parse_scenario(query), with_kill_lists=False))["trains"]
        return section

    everything = trains({"model": "llama-3.1-8b"})
    assert (everything["frozen"], everything["source"], everything["lora"]) == (0, "all", None)
    lora = trains({"model": "llama-3.1-8b", "lora_rank": "8"})
    assert (lora["trainable"], lora["frozen"], lora["source"]) == (3_407_872, 8_030_261_248, "lora")
    assert isinstance(lora["lora"], dict) and lora["lora"]["params"] == 3_407_872
    assert trains({"model": "llama-3.1-8b", "frozen_layers": "16"})["source"] == "frozen modules"
    assert trains({"params": "7B", "trainable_params": "1B"})["source"] == "declared"
