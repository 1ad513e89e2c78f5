"""The terminal rendering of an estimate: readable in 100 columns, GB and GiB side by side."""

from __future__ import annotations

from collections.abc import Iterator

from app.interop.deepspeed.estimator import compare
from app.ledger.estimate import Estimate
from app.ledger.scenario import Scenario
from app.ledger.state.rules import CLASSES
from app.ledger.verify.mutants import MutationResult
from app.receipts.disclaimer import DISCLAIMER
from app.receipts.display import gb, gib, integer
from app.receipts.sections.parallelism import parallelism_shown


def _row(cells: list[str], widths: list[int]) -> str:
    first, *rest = cells
    return "  ".join([first.ljust(widths[0]), *(c.rjust(w) for c, w in zip(rest, widths[1:], strict=True))])


def _table(header: list[str], body: list[list[str]]) -> Iterator[str]:
    widths = [max(len(r[i]) for r in [header, *body]) for i in range(len(header))]
    yield _row(header, widths)
    yield "  ".join("-" * w for w in widths)
    for cells in body:
        yield _row(cells, widths)


def _kills(title: str, results: tuple[MutationResult, ...]) -> Iterator[str]:
    yield title
    for m in results:
        if m.killed:
            yield f"  {m.id:<28} killed by {m.check}: {m.message}"
        else:
            yield f"  {m.id:<28} SURVIVED — {m.message.removeprefix('survived: ')}"


def _model_lines(e: Estimate) -> Iterator[str]:
    if e.model is None:
        return
    ref = e.model.model
    inv = ref.inventory
    s = e.scenario
    yield ""
    yield (f"Model {ref.title} ({ref.architecture.family}): {integer(inv.params)} params, {ref.architecture.layers} "
           f"layers; largest unit {inv.largest_unit.name} = {integer(inv.largest_unit.params)} params")  # fmt: skip
    yield f"  params {s.source_of('params')}, largest unit {s.source_of('unit_params')}; source: {ref.source}"
    a = e.model.activations
    if e.activation_source == "modelled":
        local = f" ÷ cp {s.cp} = {s.seq_len // s.cp:,} per rank" if s.cp > 1 else ""
        yield (f"  activations modelled ({a.policy}, s = {s.seq_len:,}{local}, b = {s.micro_batch:,}, t = {s.tp}): "
               f"{gb(a.total_bytes)} = {a.layers} × {integer(a.per_layer_bytes)} B per layer + working set, "
               f"embedding, head and logits ({integer(a.logits_bytes)} B); recompute "
               f"+{a.recompute_fraction_text(3)} of a step")  # fmt: skip
    else:
        yield f"  activations measured: {gb(s.activation_bytes)} (the model would give {gb(a.total_bytes)})"
    if e.fsdp2 is not None:
        f = e.fsdp2
        extra = integer(f.padded_elements - f.lower_bound_elements)
        yield (f"  FSDP2 shard at D = {s.dp:,}: {integer(f.padded_elements)} elements per rank with dim-0 "
               f"padding vs {integer(f.lower_bound_elements)} = ⌈N ÷ D⌉ (+{extra})")  # fmt: skip


def _schedule_lines(e: Estimate) -> Iterator[str]:
    """With a model: each stage's worst instant, the seed's declared peak beside it, and stage 3's instants."""
    yield "  schedule-aware peak (the worst named instant of one step) against the seed's declared peak:"
    for st in e.ledger.stages:
        p = st.peak
        d = p.declared_peak
        where = p.instant.name if p.instant else "declared"
        yield (
            f"    stage {st.stage}: {gb(p.total)} at the {where}; declared {gb(d.total)} "
            f"({'+' if p.total >= d.total else '−'}{gb(abs(p.total - d.total))})"
        )
    schedule = e.ledger.stages[3].peak.schedule
    assert schedule is not None
    yield "  stage-3 instants:"
    for i in schedule.instants:
        yield f"    {i.name:<34} {integer(i.total):>22} B  {gb(i.total)}"
    yield f"  {schedule.note}"


def _host_lines(e: Estimate) -> Iterator[str]:
    """The host ledger per node, shown when something is offloaded at some stage, or the run's stage loads or saves
    a whole model on the host."""
    host, s = e.ledger.host, e.scenario
    run = host.stages[s.stage]
    if not any(st.lines for st in host.stages) and not run.load_peak and not run.save_peak:
        return
    yield ""
    yield (f"Host memory per node ({host.ranks_per_node} ranks; offload_optimizer {s.offload_optimizer}, "
           f"offload_param {s.offload_param}) against {gb(host.capacity)} / {gib(host.capacity)}")  # fmt: skip
    body = [
        [f"stage {st.stage}", gb(st.per_node), integer(st.per_node), gb(st.nvme_per_node), gb(st.load_peak),
         gb(st.save_peak), gb(st.peak), "fits" if st.fits else "DOES NOT FIT"]
        for st in host.stages
    ]  # fmt: skip
    yield from _table(["", "RAM", "RAM (bytes)", "NVMe", "loading", "saving", "peak", "verdict"], body)
    for x in run.lines:
        yield f"  stage {s.stage}, per rank: {x.what} ({x.where}{', pinned' if x.pinned else ''}): {x.formula.text}"
    for phase, note, formula in (
        ("loading", run.load_note, run.load_formula),
        ("saving", run.save_note, run.save_formula),
    ):
        yield f"  {phase} ({s.load_path if phase == 'loading' else s.save_path}): {note}" + (
            f": {formula.text}" if formula.text else ""
        )
    ds = compare(e.ledger, host)
    if ds is not None:
        yield f"  DeepSpeed's estimator prints: {ds.printed}"
        for diff in ds.differences:
            yield f"    - {diff}"


def _parallel_lines(e: Estimate) -> Iterator[str]:
    """The model-parallel layout, shown when it is more than plain data parallelism: the world size, this
    rank's share of the model and, with a pipeline, both ends' peaks and which is the busier."""
    s = e.scenario
    if not parallelism_shown(s):
        return
    yield ""
    yield (f"Parallelism: world size = D × tp × pp × cp = {s.dp:,} × {s.tp:,} × {s.pp:,} × {s.cp:,} = {s.world:,} "
           "GPUs")  # fmt: skip
    layout = [f"expert parallelism ep = {s.ep:,}: E ÷ ep of each MoE layer's experts per rank"] if s.ep > 1 else []
    if s.cp > 1:
        layout.append(f"context parallelism cp = {s.cp:,}: s ÷ cp tokens per rank; state sharded over D × cp = "
                      f"{s.dp * s.cp:,} ranks (torchtitan's dp_shard_cp)")  # fmt: skip
    if s.shard_group < s.dp:
        layout.append(f"state sharded over {s.shard_group:,} ranks, {s.dp // s.shard_group:,} replicas (HSDP / MiCS)")
    if s.hpz > 1:
        layout.append(f"ZeRO++ secondary parameter partition over {s.hpz:,} ranks")
    if layout:
        yield "  " + "; ".join(layout)
    yield f"  parameters per rank before ZeRO shards them: {integer(s.params)}" + (
        f" (of which {integer(s.expert_params)} expert, sharded over D ÷ ep = {max(1, s.dp // s.ep):,})"
        if s.expert_params
        else ""
    )
    if e.model is not None:
        for line in e.model.share.lines:
            yield f"  {line}"
    ends = e.pipeline
    if ends is None:
        return
    yield f"  both ends of the pipeline at stage {s.stage} (the ledger budgets the {ends.budgeted} stage):"
    body = []
    for end in ends.ends:
        marks = [m for m, on in (("budgeted", end.pp_stage == ends.budgeted), ("busier", end.pp_stage == ends.busier))
                 if on]  # fmt: skip
        label = f"{end.pp_stage} ({', '.join(marks)})" if marks else end.pp_stage
        body.append([label, integer(end.params), gb(end.activation_bytes), gb(end.peak), gib(end.peak),
                     "fits" if end.fits else "DOES NOT FIT"])  # fmt: skip
    yield from _table(["end", "params/rank", "activations", "peak", "peak (GiB)", "verdict"], body)
    if ends.other_problem:
        yield f"  the other end could not be budgeted: {ends.other_problem}"
    elif not ends.budgeted_is_busier:
        yield (f"  WARNING: the {ends.busier} stage is busier than the budgeted {ends.budgeted} stage; "
               f"budget it with --pp-stage {ends.busier}")  # fmt: skip


def render_table(e: Estimate) -> str:
    return "\n".join(_lines(e)) + "\n"


def _lines(e: Estimate) -> Iterator[str]:
    yield from _header_lines(e)
    yield from _persistent_lines(e)
    yield ""
    yield from _peak_lines(e)
    yield from _model_lines(e)
    yield from _parallel_lines(e)
    yield ""
    yield from _fit_lines(e)
    yield from _host_lines(e)
    yield ""
    yield from _communication_lines(e)
    yield ""
    yield from _checkpoint_lines(e)
    yield ""
    yield from _check_lines(e)
    yield DISCLAIMER


_SYNCED = {"every": "after each", "last": "after the last only (no_sync before)"}


def _header_lines(e: Estimate) -> Iterator[str]:
    s = e.scenario
    title = s.name or "scenario"
    quant = f", {s.base_quant} base" if s.base_quant != "none" else ""
    trains = ""
    if s.frozen_params:
        freezes = e.model.freezes if e.model is not None and s.source_of("trainable_params") == "from config" else None
        what = f": {freezes.what}" if freezes is not None else ""
        trains = f" ({integer(s.trainable_params)} train, {integer(s.frozen_params)} frozen{what}{quant})"
    yield f"zero3-lab — {title}: {integer(s.params)} params{trains}, D = {s.dp}, U = {integer(s.unit_params)}"
    yield (
        f"widths (B): param {s.param_bytes}, grad {s.grad_bytes}, master {s.master_bytes}, "
        f"optimizer {s.opt_states} × {s.opt_bytes}, gather {s.gather_bytes}; prefetch {s.prefetch}; "
        f"the run uses stage {s.stage}"
    )
    if s.grad_accum > 1:
        kept = "" if s.reshard_after_backward else ", units kept gathered between them"
        yield f"{s.grad_accum} micro batches a step, gradients reduced {_SYNCED[s.grad_sync]}{kept}"
    yield ""


def _persistent_lines(e: Estimate) -> Iterator[str]:
    yield "Persistent state per busiest rank (bytes; GB = 10^9, GiB = 2^30)"
    body = []
    for tensor_class in CLASSES:
        body.append([tensor_class, *(gb(st.bytes_of(tensor_class)) for st in e.ledger.stages)])
    body.append(["total", *(gb(st.persistent) for st in e.ledger.stages)])
    body.append(["total (GiB)", *(gib(st.persistent) for st in e.ledger.stages)])
    body.append(["total (bytes)", *(integer(st.persistent) for st in e.ledger.stages)])
    yield from _table(["class", "stage 0", "stage 1", "stage 2", "stage 3"], body)


def _peak_lines(e: Estimate) -> Iterator[str]:
    s = e.scenario
    yield f"Training peak against capacity {gb(s.capacity_bytes)} / {gib(s.capacity_bytes)}"
    body = []
    for st in e.ledger.stages:
        p = st.peak
        body.append(
            [
                f"stage {st.stage}",
                gb(p.persistent),
                gb(p.gather),
                gb(p.buckets),
                gb(p.activations),
                gb(p.overhead),
                gb(p.contingency),
                gb(p.total),
                gib(p.total),
                "fits" if p.fits else "DOES NOT FIT",
                gb(p.headroom),
            ]
        )
    yield from _table(
        [
            "",
            "persistent",
            "gather",
            "buckets",
            "activations",
            "overhead",
            "contingency",
            "peak",
            "peak (GiB)",
            "verdict",
            "headroom",
        ],
        body,
    )
    yield f"  activations: {e.activation_source}; buckets and overhead: declared"
    yield f"  verdict: {compared_text(e.scenario)}"
    stage3 = e.ledger.stages[3].peak
    if stage3.schedule is None:
        yield f"  stage-3 gather: {stage3.gather_formula.text}"
    else:
        yield from _schedule_lines(e)


def _fit_lines(e: Estimate) -> Iterator[str]:
    s = e.scenario
    yield f"Fit finder against {gb(s.capacity_bytes)} / {gib(s.capacity_bytes)}"
    body = [
        [f"stage {st.stage}", "none fits" if st.smallest_dp is None else f"D = {st.smallest_dp:,}",
         "—" if not e.fit.micro_batch_modelled else ("none fits" if st.largest_micro_batch is None
                                                     else f"b = {st.largest_micro_batch:,}")]
        for st in e.fit.stages
    ]  # fmt: skip
    yield from _table(["", "smallest dp that fits", f"largest micro batch at D = {s.dp:,}"], body)
    o = e.offload_fit
    cheapest = (
        "none does" if o is None else "none needed" if o.offload_optimizer == "none"
        else f"optimizer {o.offload_optimizer}, parameters {o.offload_param}: device peak {gb(o.device_peak)}, "
        f"host {gb(o.host_peak)} per node"
    )  # fmt: skip
    yield f"  cheapest offload on which stage {s.stage} fits: {cheapest}"


def _communication_lines(e: Estimate) -> Iterator[str]:
    yield "Communication per rank per optimizer step"
    yield from _table(
        ["", "bytes", "GB", "collectives"],
        [
            [
                f"stage {st.stage}",
                integer(st.communication.bytes),
                gb(st.communication.bytes),
                st.communication.collectives,
            ]
            for st in e.ledger.stages
        ],
    )


def _checkpoint_lines(e: Estimate) -> Iterator[str]:
    yield "Checkpoint save on rank 0"
    body = []
    for c in e.checkpoint:
        body.append(
            [
                c.policy,
                gb(c.device_bytes),
                gb(c.host_bytes),
                gb(c.save_peaks[3]),
                "FLAGGED" if c.flagged else "",
            ]
        )
    yield from _table(["policy", "device extra", "host", "stage-3 save peak", ""], body)
    for c in e.checkpoint:
        if c.flagged:
            yield f"  {c.policy}: {c.flag}"


def _check_lines(e: Estimate) -> Iterator[str]:
    yield from _kills("Mutation kill list on this scenario (checks 1–4, 6, 7, 9)", e.mutations)
    yield from _kills("Reference kill list on the frozen references (checks 1–9)", e.reference_mutations)
    failed = [check for check in e.checks if not check.passed]
    if failed:
        yield ""
        for check in failed:
            yield f"CHECK FAILED {check.check}: {check.message}"
    yield ""


def compared_text(s: Scenario) -> str:
    """Which figure the verdict compares with the capacity: the allocated peak, or the reserved estimate."""
    if not s.reserve_bytes:
        return "the allocated peak against the capacity (no allocator reserve given)"
    return (f"the reserved estimate against the capacity: the allocated peak + the {s.reserve_source} allocator "
            f"reserve of {s.reserve_bytes:,} B")  # fmt: skip
