"""The page's first lines (issue 28, "lead with the run"): the run as the user described it, its peak at the stage
it runs, fits or not, what sets the peak and, when it does not fit, the smallest change that does, in the stack's
own terms. The stage comparison and the least complex stage that fits come after it (:mod:`.answer`).

The change comes from the fit finder (:attr:`app.ledger.estimate.Estimate.fit`), whose searches walk the schedule
dozens of times: a live update that defers the sections below the peak defers it too, and the page asks
``/run-change`` for it at once (``partials/_run_change.html``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from app.ledger.estimate import Estimate, run_stage_peak
from app.ledger.peak.schedule.instants import CATEGORIES
from app.ledger.scenario import Scenario, parse_scenario
from app.ledger.state.host import host_ledger
from app.web.views.answer import device_names

# What each category of an instant holds, as the run's line names its largest part.
PART_NAMES: dict[str, str] = {
    "state": "parameters, master weights and optimizer states",
    "gradients": "gradients",
    "unsharded_params": "unsharded parameters",
    "all_gather": "all-gather outputs in flight",
    "unsharded_grads": "whole gradients awaiting their reduce-scatter",
    "reduce_scatter": "the reduce-scatter input",
    "buckets": "communication buckets",
    "activations": "saved activations",
    "temporaries": "the temporaries of the op at hand",
    "overhead": "runtime overhead",
    # the declared peak's parts (no model: no schedule)
    "persistent": "persistent state",
    "gather": "the all-gathered unit",
}
STACK_NAMES: dict[str, str] = {
    "plain-fsdp2": "a plain FSDP2 loop",
    "hf-fsdp2": "the HF Trainer / Accelerate with FSDP2",
    "torchtitan": "torchtitan",
}


@dataclass(frozen=True, slots=True)
class RunChange:
    """The smallest changes that fit at the run's stage, each also in the stack's terms: a smaller micro batch at
    the same D; more ranks at the same micro batch; full recomputation (when the run does not use it already), at
    the same D (None: that change does not fit)."""

    micro_batch: int | None
    micro_batch_says: str
    dp: int | None
    dp_says: str
    recompute_dp: int | None = None
    recompute_says: str = ""
    sync_says: str = ""  # accumulating without sync: reduce-scatter each micro batch instead, when that fits


@dataclass(frozen=True, slots=True)
class Run:
    """The run as described and its verdict at the stage it runs."""

    model: str  # the model's title, or its parameter count
    stack: str
    stage: int
    dp: int
    micro_batch: int
    capacity: int
    devices: tuple[str, ...]
    peak: int  # allocated
    reserve: int
    overhead: int  # the declared runtime overhead (0: none declared, and the verdict says so)
    fits: bool
    headroom: int
    instant: str  # what sets the peak: the worst instant's name, or the declared sum
    part: str  # its largest part
    part_bytes: int
    change: RunChange | None  # None: it fits, or the change is deferred (``change_pending``)
    change_pending: bool
    host: HostVerdict
    frozen: str = ""  # what of the model's own is frozen, in words ("" for LoRA, a typed count, or nothing)


@dataclass(frozen=True, slots=True)
class HostVerdict:
    """Host memory per node at the run's stage: its peak, when it comes, fits or not and, when loading does not
    fit, the least loading path that does, in the stack's terms ("" when none does, or it fits)."""

    peak: int
    capacity: int
    fits: bool
    when: str
    change: str


def _frozen_what(e: Estimate) -> str:
    """What of the model's own is frozen, in words, where the model says what trains (not a typed count)."""
    freezes = e.model.freezes if e.model is not None else None
    typed = e.scenario.source_of("trainable_params") != "from config"
    return freezes.what if freezes is not None and not typed else ""


def host_verdict(e: Estimate) -> HostVerdict:
    s = e.scenario
    st = e.ledger.host.stages[s.stage]
    when = "while loading" if st.load_peak >= st.per_node + st.save_peak else "while saving" if st.save_peak else (
        "in training")  # fmt: skip
    change = ""
    if not st.fits and when == "while loading":
        # The least change first: one copy per node, then nothing whole (stage 3); HF's from_pretrained cannot
        # load partitioned under FSDP2.
        paths = ("rank0",) if s.stack == "hf-fsdp2" else ("rank0", "partitioned")
        for path in paths[paths.index(s.load_path) + 1 if s.load_path in paths else 0 :]:
            if host_ledger(s.with_(load_path=path)).stages[s.stage].fits:
                change = _LOAD_SAYS[s.stack if s.stack == "hf-fsdp2" else "other"][path]
                break
    return HostVerdict(st.peak, e.ledger.host.capacity, st.fits, when, change)


_LOAD_SAYS: dict[str, dict[str, str]] = {
    "hf-fsdp2": {"rank0": 'fsdp_config={"cpu_ram_efficient_loading": True} (one copy per node, broadcast)'},
    "other": {
        "rank0": "the checkpoint loaded on one rank per node and broadcast (set_model_state_dict with "
        "broadcast_from_rank0)",
        "partitioned": "the model built on the meta device and each rank's shards loaded "
        "(torch.distributed.checkpoint)",
    },
}


def _largest_part(e: Estimate) -> tuple[str, str, int]:
    """The peak's instant (or the declared sum) and its largest part with its bytes."""
    p = e.ledger.stages[e.scenario.stage].peak
    if p.schedule is not None:
        worst = p.schedule.peak
        category, value = max(zip(CATEGORIES, worst.sums, strict=True), key=lambda cv: cv[1])
        return worst.name, PART_NAMES[category], value
    parts = {"persistent": p.persistent, "gather": p.gather, "buckets": p.buckets, "activations": p.activations,
             "overhead": p.overhead}  # fmt: skip
    part = max(parts, key=lambda k: parts[k])
    return "the declared sum of maxima (no model, so no schedule)", PART_NAMES[part], parts[part]


def run_change(e: Estimate) -> RunChange:
    """From the fit finder, at the run's stage (this walks the schedule: see the module's docstring)."""
    s = e.scenario
    found = e.fit.stages[s.stage]
    b = found.largest_micro_batch
    micro = b if b is not None and b < s.micro_batch else None
    dp = found.smallest_dp if found.smallest_dp is not None and found.smallest_dp != s.dp else None
    change = RunChange(micro, _micro_batch_says(s, micro) if micro else "", dp, _dp_says(s, dp) if dp else "")
    if s.accumulates_unsharded(s.stage):
        synced = parse_scenario({**dict(s.non_default_items()), "grad_sync": "every"})
        if run_stage_peak(synced) <= synced.allocatable_bytes:
            change = replace(change, sync_says=_sync_says(s))
    if e.model is None or s.act_policy == "full":
        return change
    # The same run recomputing every layer, at the same D: its modelled activations read anew from the model (a new
    # scenario). One ledger, not a second fit finder: a live update with the fit finder on screen pays for this.
    full = parse_scenario({**dict(s.non_default_items()), "act_policy": "full"})
    if run_stage_peak(full) > full.allocatable_bytes:
        return change
    return replace(change, recompute_dp=s.dp, recompute_says=_recompute_says(s))


def _recompute_says(s: Scenario) -> str:
    if s.stack == "torchtitan":
        return "activation-checkpoint:full"
    if s.stack == "hf-fsdp2":
        return "gradient_checkpointing=True (or the FSDP plugin's activation_checkpointing: true)"
    return "torch.utils.checkpoint around every decoder layer"


def _sync_says(s: Scenario) -> str:
    if s.stack == "hf-fsdp2":
        return 'accelerator_config={"gradient_accumulation_kwargs": {"sync_each_batch": True}}'
    return "no set_requires_gradient_sync(False) / no_sync between the micro batches"


def _micro_batch_says(s: Scenario, b: int) -> str:
    steps = -(-s.micro_batch // b) * s.grad_accum  # accumulate to keep the batch
    if s.stack == "torchtitan":
        return f"--training.local-batch-size {b}, with --training.global-batch-size kept (it accumulates)"
    if s.stack == "hf-fsdp2":
        return f"per_device_train_batch_size={b}, gradient_accumulation_steps={steps}"
    return f"a micro batch of {b}, accumulating {steps} to keep the batch"


def _dp_says(s: Scenario, dp: int) -> str:
    if s.stack == "torchtitan":
        return f"--parallelism.data-parallel-shard-degree {dp} on {dp:,} GPUs"
    if s.stack == "hf-fsdp2":
        return f"accelerate launch --num_processes {dp}"
    return f"torchrun with a world size of {dp:,}"


def run(e: Estimate, *, with_change: bool) -> Run:
    s = e.scenario
    p = e.ledger.stages[s.stage].peak
    instant, part, part_bytes = _largest_part(e)
    search = not p.fits
    return Run(
        model=e.model.model.title if e.model is not None else f"{s.params:,} parameters",
        stack=STACK_NAMES.get(s.stack, s.stack),
        stage=s.stage,
        dp=s.dp,
        micro_batch=s.micro_batch,
        capacity=s.capacity_bytes,
        devices=device_names(s.capacity_bytes),
        peak=p.total,
        reserve=s.reserve_bytes,
        overhead=s.overhead_bytes,
        fits=p.fits,
        headroom=p.headroom,
        instant=instant,
        part=part,
        part_bytes=part_bytes,
        change=run_change(e) if search and with_change else None,
        change_pending=search and not with_change,
        host=host_verdict(e),
        frozen=_frozen_what(e),
    )
