"""Every writer of a scenario in a framework's own words, once: its name (the CLI's ``--format``), its title, the
file it downloads as and its media type (the page, the download routes and the CLI read this table)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from app.interop.deepspeed.writer import deepspeed_snippet
from app.interop.fsdp2 import fsdp2_snippet
from app.interop.hf_trainer import hf_trainer_snippet
from app.interop.snippet import Snippet
from app.interop.torchtitan import torchtitan_snippet
from app.ledger.scenario import Scenario

__all__ = ["WRITERS", "Writer"]


@dataclass(frozen=True, slots=True)
class Writer:
    name: str
    title: str
    filename: str
    media_type: str
    write: Callable[[Scenario], Snippet]


WRITERS: dict[str, Writer] = {
    w.name: w
    for w in (
        Writer("deepspeed", "DeepSpeed: ds_config.json", "ds_config.json", "application/json", deepspeed_snippet),
        Writer("fsdp2", "PyTorch FSDP2: fully_shard", "fsdp2.py", "text/x-python; charset=utf-8", fsdp2_snippet),
        Writer("torchtitan", "torchtitan 0.3.0: the trainer's command line", "torchtitan.sh",
               "text/x-shellscript; charset=utf-8", torchtitan_snippet),
        Writer("hf-trainer", "HF Trainer: TrainingArguments with FSDP2", "hf_trainer.py",
               "text/x-python; charset=utf-8", hf_trainer_snippet),
    )
}  # fmt: skip
