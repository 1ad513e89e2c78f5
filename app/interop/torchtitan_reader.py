"""A torchtitan 0.3.0 command line read into a scenario: every flag named back as read, ignored or refused.

torchtitan 0.3.0 reads no TOML job file: a run is ``python -m torchtitan.train --module … --config …`` with tyro
flags over the registered config, activation checkpointing a subcommand that comes last
(``activation-checkpoint:selective``). This reader takes that command (or just its flags), bounded, and sets the
scenario fields its flags decide; a value torchtitan would refuse (a reduction other than float32, a flag after the
subcommand, a degree that is not an integer) is refused naming the flag. Flags the lab does not read are named
back as ignored. The stack becomes ``torchtitan``: its presets fill what the flags leave.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Literal, get_args

from app.interop.torchtitan import AC_SUBCOMMANDS, DTYPES
from app.ledger.bounds import OptimizerImpl

__all__ = ["MAX_COMMAND_CHARS", "TitanFlag", "TorchtitanCommandError", "read_torchtitan_command"]

MAX_COMMAND_CHARS = 16 * 1024
MAX_TOKENS = 256
Status = Literal["sets", "ignored"]
# act_policy ← torchtitan 0.3.0's activation-checkpoint subcommand: the writer's table, read backwards
_AC = {subcommand: policy for policy, subcommand in AC_SUBCOMMANDS.items()}
# Flags that set one positive-integer field (its range is the field's, checked when the scenario is read);
# the replicate degree only multiplies D, with the shard degree.
_INTEGERS = {
    "training.local-batch-size": "micro_batch",
    "training.seq-len": "seq_len",
    "parallelism.data-parallel-shard-degree": "shard_group",
    "parallelism.data-parallel-replicate-degree": "_replicate",
    "parallelism.tensor-parallel-degree": "tp",
    "parallelism.pipeline-parallel-degree": "pp",
    "parallelism.expert-parallel-degree": "ep",
    "parallelism.context-parallel-degree": "cp",
    "loss.num-chunks": "loss_chunks",  # the llama3 configs' ChunkedLossWrapper.Config.num_chunks
    "training.global-batch-size": "_global",  # ÷ (local batch × D): the gradient accumulation steps
}
_IMPLEMENTATIONS: tuple[str, ...] = get_args(OptimizerImpl)
_RESHARD = {"default": 1, "always": 1, "never": 0}  # "default" is not pp_enabled: pp = 1 here resharding


class TorchtitanCommandError(ValueError):
    """A flag torchtitan would refuse, or the lab cannot read: ``flag`` names it."""

    def __init__(self, flag: str, message: str) -> None:
        self.flag, self.message = flag, message
        super().__init__(f"{flag}: {message}")


@dataclass(frozen=True, slots=True)
class TitanFlag:
    """One flag as written, and what the lab did with it."""

    flag: str
    written: str
    effect: str
    status: Status


def _tokens(command: str) -> list[str]:
    if len(command) > MAX_COMMAND_CHARS:
        raise TorchtitanCommandError("command", f"{len(command):,} characters; at most {MAX_COMMAND_CHARS:,}")
    try:
        tokens = shlex.split(command.replace("\\\n", " "))
    except ValueError as exc:
        raise TorchtitanCommandError("command", f"not a shell command line ({exc})") from None
    if len(tokens) > MAX_TOKENS:
        raise TorchtitanCommandError("command", f"{len(tokens):,} words; at most {MAX_TOKENS}")
    # the launcher before the flags: python -m torchtitan.train, torchrun … -m torchtitan.train, ./run_train.sh
    if "torchtitan.train" in tokens:
        tokens = tokens[tokens.index("torchtitan.train") + 1 :]
    return tokens


def _pairs(tokens: list[str]) -> list[tuple[str, str]]:
    """(flag without dashes, normalised to hyphens; value) in order; the subcommand as ("activation-checkpoint",
    name). tyro refuses a parent flag after a subcommand: so does this."""
    out: list[tuple[str, str]] = []
    i, after_subcommand = 0, ""
    while i < len(tokens):
        token = tokens[i]
        if token.startswith("activation-checkpoint:") or token.startswith("activation_checkpoint:"):
            out.append(("activation-checkpoint", token.partition(":")[2]))
            after_subcommand = token
        elif token.startswith("--"):
            if after_subcommand:
                raise TorchtitanCommandError(token, f"a flag after the subcommand {after_subcommand}: torchtitan's "
                                             "parser (tyro) takes parent flags before it")  # fmt: skip
            name, eq, value = token[2:].partition("=")
            if not eq:
                if i + 1 < len(tokens) and not tokens[i + 1].startswith("--") and ":" not in tokens[i + 1]:
                    value, i = tokens[i + 1], i + 1
                else:
                    value = "true"  # a boolean flag
            out.append((name.replace("_", "-"), value))
        else:
            raise TorchtitanCommandError(token, "not a flag (--section.name value) or the activation-checkpoint "
                                         "subcommand")  # fmt: skip
        i += 1
    return out


def _integer(flag: str, value: str) -> int:
    """A positive integer as written (its range is the scenario field's, checked when the scenario is read)."""
    if not (value.isascii() and value.isdigit()) or len(value) > 9 or int(value) < 1:
        raise TorchtitanCommandError("--" + flag, f"{value!r} is not a positive integer")
    return int(value)


def _dtype(flag: str, value: str) -> int:
    if value not in DTYPES.values():
        raise TorchtitanCommandError("--" + flag, f"{value!r}: torchtitan takes bfloat16 or float32")
    return next(width for width, name in DTYPES.items() if name == value)


def _read(flag: str, value: str, fields: dict[str, object]) -> str | None:
    """Set the fields ``flag`` decides; the effect in words, or None for a flag the lab does not read."""
    if flag == "module":
        if value != "llama3":
            raise TorchtitanCommandError("--module", f"{value!r}: the lab models torchtitan's llama3 only")
        fields["stack"] = "torchtitan"
        return "stack torchtitan (its Llama 3 model, checkpointing and wrapping)"
    if flag == "training.global-batch-size" and value.lstrip("-").isdigit() and int(value) < 0:
        fields["grad_accum"] = 1
        return "grad_accum 1 (torchtitan's default -1: the local batch × the data-parallel degree, one micro batch)"
    if flag in _INTEGERS:
        fields[_INTEGERS[flag]] = _integer(flag, value)
        return f"{_INTEGERS[flag].lstrip('_').replace('_', ' ')} {value}"
    if flag == "training.dtype":
        width = _dtype(flag, value)
        fields.update(param_bytes=width, grad_bytes=width, opt_bytes=width, master_bytes=0)
        return f"param_bytes, grad_bytes, opt_bytes {width} (the sharded state's dtype; no master copy)"
    if flag == "training.mixed-precision-param":
        fields["gather_bytes"] = _dtype(flag, value)
        return f"gather_bytes {fields['gather_bytes']}"
    if flag == "training.mixed-precision-reduce":
        if value != "float32":
            raise TorchtitanCommandError("--" + flag, f"{value!r}: torchtitan 0.3.0 allows only float32")
        fields["reduce_bytes"] = 4
        return "reduce_bytes 4"
    if flag == "parallelism.fsdp-reshard-after-forward":
        if value not in _RESHARD:
            raise TorchtitanCommandError("--" + flag, f"{value!r}: one of default, always, never")
        fields["reshard_after_forward"] = _RESHARD[value]
        return f"reshard_after_forward {_RESHARD[value]}"
    if flag == "optimizer.implementation":
        if value not in _IMPLEMENTATIONS:
            raise TorchtitanCommandError("--" + flag, f"{value!r}: the lab models {', '.join(_IMPLEMENTATIONS)}")
        fields["optimizer_impl"] = value
        return f"optimizer_impl {value}"
    if flag == "activation-checkpoint":
        if value not in _AC:
            raise TorchtitanCommandError("activation-checkpoint:" + value, "not modelled (memory-budget needs the "
                                         "compiler's partitioner); one of selective, full, none")  # fmt: skip
        fields["act_policy"] = _AC[value]
        return f"act_policy {_AC[value]}"
    return None


def read_torchtitan_command(command: str) -> tuple[dict[str, object], tuple[TitanFlag, ...]]:
    """The scenario fields ``command`` sets and one line per flag; raises :class:`TorchtitanCommandError`."""
    fields: dict[str, object] = {"stack": "torchtitan"}
    lines: list[TitanFlag] = []
    for flag, value in _pairs(_tokens(command)):
        effect = _read(flag, value, fields)
        name = flag if flag == "activation-checkpoint" else "--" + flag
        if effect is None:
            why = "--config picks a registered model: give the model with --model" if flag == "config" else (
                "not read by the lab (no memory effect it models)")  # fmt: skip
            lines.append(TitanFlag(name, value, why, "ignored"))
        else:
            lines.append(TitanFlag(name, value, effect, "sets"))
    shard, replicate = fields.pop("shard_group", None), fields.pop("_replicate", None)
    if replicate is not None and shard is None:
        why = "needs --parallelism.data-parallel-shard-degree (the world size is the launcher's)"
        raise TorchtitanCommandError("--parallelism.data-parallel-replicate-degree", why)
    if isinstance(shard, int):
        fields["dp"] = shard * (replicate if isinstance(replicate, int) else 1)
        fields["shard_group"] = shard
    _accumulation(fields)
    return fields, tuple(lines)


def _accumulation(fields: dict[str, object]) -> None:
    """torchtitan 0.3.0 trainer.py: gradient_accumulation_steps = global_batch_size ÷ (local_batch_size × the
    data-parallel degree), refused unless it divides."""
    total = fields.pop("_global", None)
    if not isinstance(total, int):
        return
    flag, local, dp = "--training.global-batch-size", fields.get("micro_batch"), fields.get("dp")
    if not isinstance(local, int) or not isinstance(dp, int):
        why = "needs --training.local-batch-size and --parallelism.data-parallel-shard-degree to give the steps"
        raise TorchtitanCommandError(flag, why)
    if total % (local * dp):
        raise TorchtitanCommandError(flag, f"{total:,} is not a multiple of local batch {local} × data-parallel "
                                     f"degree {dp:,} (torchtitan refuses it)")  # fmt: skip
    fields["grad_accum"] = total // (local * dp)
