"""The training stacks: for each, the choices it decides, the value it gives them and the evidence.

A stack is a named preset. A choice it decides (:data:`STACK_CHOICES`) takes the stack's value when the
scenario leaves it absent; typed, it wins, and the answer says which choices came from the stack
(:func:`set_by_stack`). Each preset cites the code of the version it follows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import get_args

from app.ledger.bounds import TrainingStack

STACKS: tuple[str, ...] = get_args(TrainingStack)


@dataclass(frozen=True, slots=True)
class Preset:
    """One choice a stack decides: its value there, and why (the project's code, with its version)."""

    value: str
    evidence: str


_PRESETS: dict[str, dict[str, Preset]] = {
    "plain-fsdp2": {
        "loss": Preset(
            "outside",
            "a plain FSDP2 loop computes the loss on the logits the root module returns "
            "(loss = cross_entropy(model(tokens), labels)), as torchtitan's train step does",
        ),
        "wrap": Preset(
            "root",
            "FSDP2's documented recipe (torch.distributed.fsdp.fully_shard): fully_shard on each decoder layer, "
            "then on the model, whose root unit keeps the embedding, the final norm and the head",
        ),
    },
    "hf-fsdp2": {
        "loss": Preset(
            "inside",
            "transformers 5.23.0: the HF Trainer's compute_loss calls model(**inputs) with labels "
            "(trainer.py), and LlamaForCausalLM.forward computes self.loss_function(logits, labels) "
            "(ForCausalLMLoss, loss/loss_utils.py) inside the root FSDP module",
        ),
        "wrap": Preset(
            "embed-tail",
            "accelerate 1.15.0 fsdp2_prepare_model (utils/fsdp_utils.py): the transformer-based wrap on "
            "_no_split_modules, then fully_shard(input_embed) and fully_shard([final_norm, output_embed], "
            "reshard_after_forward=False) (tied: norm, embedding and head in that one unit), the root last",
        ),
    },
}
STACK_CHOICES: tuple[str, ...] = ("loss", "wrap")  # the fields whose default is the stack's


def preset(stack: str, choice: str) -> Preset:
    """What ``stack`` gives ``choice`` (a name of :data:`STACK_CHOICES`)."""
    return _PRESETS[stack][choice]


def set_by_stack(stack: str, values: dict[str, int | str]) -> tuple[str, ...]:
    """The choices of ``values`` (a scenario's inputs) that hold the stack's own value."""
    return tuple(c for c in STACK_CHOICES if values.get(c) == _PRESETS[stack][c].value)
