"""What the interop routes answer: a DeepSpeed config read into a scenario (``POST /api/deepspeed``), and the
frameworks' snippets for a scenario (``GET /api/snippets``)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from app.receipts.scenario_out import ScenarioOut
from app.receipts.strict import Strict


class DeepSpeedLine(Strict):
    """One key of the config and what the lab made of it."""

    key: str = Field(description="its dotted path in the config, e.g. zero_optimization.reduce_bucket_size")
    written: str = Field(description="what the config says; absent when DeepSpeed's default applies")
    effect: str = Field(description="what the lab does with it, with the numbers (elements × width = bytes)")
    status: Literal["sets", "checked", "no memory effect", "not modelled", "ignored", "unresolved"]


class DeepSpeedImportOut(Strict):
    """A DeepSpeed config read into a scenario: the scenario (an ordinary canonical link), one line per key."""

    link: str = Field(description="the imported scenario's canonical link, e.g. /?bucket_bytes=52428800&model=…")
    scenario: ScenarioOut
    lines: list[DeepSpeedLine]
    unresolved: list[str] = Field(description='"auto" keys the lab could not resolve, each with what it used')
    deepspeed: str = Field(description="whose documented defaults a missing key takes")
    transformers: str = Field(description='whose Trainer resolves "auto"')


class DeepSpeedSnippet(Strict):
    config: dict[str, object] = Field(description="a ds_config.json that reproduces the scenario")
    notes: list[str] = Field(description="what DeepSpeed cannot express, and what the launcher and script decide")


class Fsdp2Snippet(Strict):
    text: str = Field(description="Python: fully_shard per decoder layer and on the root, with the scenario's policy")
    notes: list[str]


class TextSnippet(Strict):
    text: str = Field(description="text to copy: a command line or Python")
    notes: list[str] = Field(description="what the framework cannot express, and what it decides elsewhere")


class SnippetsOut(Strict):
    deepspeed: DeepSpeedSnippet
    fsdp2: Fsdp2Snippet
    torchtitan: TextSnippet = Field(description="torchtitan 0.3.0's trainer command line (tyro flags)")
    hf_trainer: TextSnippet = Field(description="transformers 5.23.0 TrainingArguments with an FSDP2 fsdp_config")


class TorchtitanFlagOut(Strict):
    """One flag of a torchtitan command line and what the lab made of it."""

    flag: str = Field(description="as torchtitan names it, e.g. --training.local-batch-size, or activation-checkpoint")
    written: str
    effect: str
    status: Literal["sets", "ignored"]


class TorchtitanImportOut(Strict):
    link: str = Field(description="the imported scenario's canonical link")
    scenario: ScenarioOut
    lines: list[TorchtitanFlagOut]
    torchtitan: str = Field(description="the torchtitan version whose flags are read")
