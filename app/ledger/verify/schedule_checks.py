"""Checks 6 and 7: the schedule-aware peak held to how FSDP2 schedules gradients (a reduce-scatter input resident
after the last unit's backward; no gradient at the loss backward, every one at the optimizer step). Only what trains
has a gradient: LoRA's root has none, a frozen embedding's unit none. Without a model (no schedule) they do not
apply. Run by :func:`app.ledger.verify.checks.run_checks`."""

from __future__ import annotations

from app.ledger.arithmetic import n
from app.ledger.ledger import Ledger, StageLedger
from app.ledger.models.reference import resolve
from app.ledger.verify.results import CheckResult, fail, ok


def _scheduled(ledger: Ledger, check: str) -> tuple[list[StageLedger], CheckResult | None]:
    stages = [st for st in ledger.stages if st.peak.schedule is not None]
    if not stages:
        why = ledger.stages[3].peak.why_declared or "no model"
        return stages, ok(check, f"not applicable: the declared peak has no schedule ({why})")
    return stages, None


def reduce_scatter_presence(ledger: Ledger) -> CheckResult:
    """Stages 2–3 with a schedule: after the last unit's backward (the root: embedding, final norm, head; with
    Accelerate's units the embedding) its gradients are reduce-scattered from one buffer holding the whole unit
    in the reduce width."""
    stages, skip = _scheduled(ledger, "reduce-scatter-presence")
    if skip is not None:
        return skip
    s = ledger.scenario
    if s.accumulates_unsharded(3):
        return ok("reduce-scatter-presence", "not applicable: under grad_sync last only the last micro batch "
                  "reduce-scatters, and an instant may be another micro batch's")  # fmt: skip
    inv = resolve(s.model).inventory
    # what trains of the root: LoRA trains none of it, a frozen embedding leaves the final norm (and an untied head)
    embed = 0 if s.lora_rank or s.freeze_embed else inv.embed.params
    final = 0 if s.lora_rank else inv.final.params
    held_by: dict[str, int] = {}  # "root" or "embedding" → the bytes its post-backward must hold
    for st in stages:
        if st.stage < 2:
            continue
        assert st.peak.schedule is not None
        by_key = {i.key: i for i in st.peak.schedule.instants}
        # the last unit reduced: the root (embedding, final norm, head), or with Accelerate's units the embedding
        post = by_key.get("root-post-backward") or by_key["embedding-post-backward"]
        last, unit = ("root", embed + final) if post.key.startswith("root") else ("embedding", embed)
        need = unit * s.reduce_bytes
        held_by[last] = need
        held = post.bytes_of("reduce_scatter")
        if held < need:
            return fail(
                "reduce-scatter-presence",
                f"stage {st.stage} {post.name}: {n(held)} B of reduce-scatter input, fewer than the {last}'s "
                f"{n(unit)} elements × {s.reduce_bytes} B = {n(need)} B",
            )
    said = "; ".join(f"{last} post-backward ≥ {n(need)} B" for last, need in held_by.items())
    if list(held_by) == ["root"]:
        said = f"root post-backward hold ≥ {n(held_by['root'])} B"
    return ok("reduce-scatter-presence", f"stages 2–3 {said} of reduce-scatter input")


_FILL_WHY = "zero_grad(set_to_none=True): gradients appear during backward"


def gradient_filling(ledger: Ledger) -> CheckResult:
    """With a schedule: ``zero_grad(set_to_none=True)`` leaves no gradient at the loss backward (where every
    activation is saved; under the chunked loss the end of forward, since its slices run the head's backward
    before the loss ends); the optimizer step holds at least the stage's persistent gradients. Accumulating over
    micro batches, the one walked holds there every gradient shard (synced each micro batch, or at stages 0–1),
    or at stages 2–3 without sync no shard but every unit's unsharded gradient in the reduce width."""
    stages, skip = _scheduled(ledger, "gradient-filling")
    if skip is not None:
        return skip
    s = ledger.scenario
    for st in stages:
        assert st.peak.schedule is not None
        by_key = {i.key: i for i in st.peak.schedule.instants}
        loss, step = by_key["end-of-forward" if s.loss == "chunked" else "loss-backward"], by_key["optimizer-step"]
        early, line = loss.bytes_of("gradients"), st.bytes_of("gradients")
        unsynced = s.accumulates_unsharded(st.stage)
        expected = line if s.grad_accum > 1 and not unsynced else 0
        if early < expected or (early and not expected):
            why = "accumulated since the first micro batch" if expected else _FILL_WHY + (
                ", shards only in the last micro batch" if unsynced else "")  # fmt: skip
            return fail("gradient-filling", f"stage {st.stage} {loss.name} gradients: {n(early)} B resident, expected "
                        f"{n(expected)} B ({why})")  # fmt: skip
        held = loss.bytes_of("unsharded_grads")
        if unsynced and held < s.trainable_params * s.reduce_bytes:
            return fail("gradient-filling", f"stage {st.stage} {loss.name}: {n(held)} B of unsharded gradients, "
                        f"fewer than every unit's accumulated {n(s.trainable_params)} trained elements × "
                        f"{s.reduce_bytes} B")  # fmt: skip
        late = step.bytes_of("gradients")
        if late < line:
            return fail(
                "gradient-filling",
                f"stage {st.stage} {step.name} gradients: {n(late)} B, fewer than the persistent {n(line)} B",
            )
    return ok("gradient-filling", "no gradient at the loss backward, every one at the optimizer step")
