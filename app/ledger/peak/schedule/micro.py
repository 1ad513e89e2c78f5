"""Gradient accumulation in the walk: which micro batch an instant is walked for, and what that one holds.

A step of ``grad_accum`` micro batches runs the same instants in each; they differ in what earlier micro batches
left behind and in whether this one reduces. :data:`roles` names the ones worth walking, as (after the first, the
last): one micro batch is the step; of two, the first and the last; of more, a middle one (the first holds no more
than it) and the last. :meth:`MicroBatches.worst` walks an instant for each and keeps the larger, so the peak is the
worst instant of the worst micro batch. What each holds (torch 2.13 FSDP2, ``_fsdp_param.py``,
``_fsdp_param_group.py``):

- ``grad_sync every`` (or stages 0–1, whose gradients are whole): after the first, every gradient is resident.
- ``grad_sync last`` at stages 2–3 (``set_requires_gradient_sync(False)`` on all but the last): each unit's
  gradient stays unsharded, cast to ``reduce_dtype`` at its post-backward (``to_accumulated_grad_if_needed``) and
  added to by the next micro batch. The first holds those of the units its backward has done, a middle one every
  unit's, the last those not yet reduced; only the last reduce-scatters.
- ``reshard_after_backward 0`` at stage 3 (``set_reshard_after_backward(False)`` on all but the last): a unit
  stays unsharded after its backward, so a micro batch but the last keeps the units its backward has done, and the
  next one's forward finds them gathered.
"""

from __future__ import annotations

from collections.abc import Callable

from app.ledger.arithmetic import n
from app.ledger.peak.schedule.layout import Layout
from app.ledger.peak.schedule.sinks import Sink, SumSink
from app.ledger.scenario import Scenario

Role = tuple[bool, bool]  # (after the first micro batch, the last one)


def roles(accum: int) -> tuple[Role, ...]:
    """The micro batches worth walking, the last last (see the module's docstring)."""
    if accum == 1:
        return ((False, True),)
    return ((False, False), (True, True)) if accum == 2 else ((True, False), (True, True))


def role_name(role: Role, accum: int) -> str:
    after_first, last = role
    if last:
        return f"micro batch {accum} of {accum}, the last" if accum > 1 else ""
    if not after_first:
        return f"micro batch 1 of {accum}"
    return f"micro batch 2 of {accum}" if accum == 3 else f"micro batch 2 … {accum - 1} of {accum}"


class MicroBatches:
    """The accumulation state of a walk (mixed into :class:`app.ledger.peak.schedule.pieces.Pieces`)."""

    s: Scenario
    u: Layout
    g: Layout  # what trains of each unit (:mod:`.trained`)
    fsdp2: bool
    reduce: int

    def init_micro_batches(self, stage: int) -> None:
        s = self.s
        self.roles = roles(s.grad_accum)
        self.sync_last = s.accumulates_unsharded(stage)
        self.rab_keeps = self.fsdp2 and s.keeps_units_gathered
        u = self.g  # what trains; read only without sync: the fit finder walks hundreds of steps that never do
        self.model_params = u.root_params + sum(u.params_of(k) for k in range(u.layers)) if self.sync_last else 0
        self.tail_done = 0  # Accelerate's tail unit: parameters whose post-backward has run at the instant walked
        self.set_role(self.roles[-1])

    def set_role(self, role: Role) -> None:
        self.role = role
        self.after_first, self.is_last = role
        self.shards_all = self.after_first and not self.sync_last  # every gradient resident since an earlier one
        self.reducing = self.is_last or not self.sync_last  # this micro batch reduce-scatters
        self.keeps_forward = self.rab_keeps and self.after_first  # units kept since the last micro batch's backward
        self.keeps_backward = self.rab_keeps and not self.is_last  # units kept after this one's backward

    def worst(self, fill: Callable[[Sink], None]) -> Callable[[Sink], None]:
        """``fill`` walked for each role, the one holding the most kept: the instant of the worst micro batch (asked
        only with two roles: one micro batch is the step, and :attr:`tail_done` is read only without sync)."""

        def filled(out: Sink) -> None:
            totals = []
            for role in self.roles:
                self.set_role(role)
                self.tail_done = 0
                probe = SumSink()
                fill(probe)
                totals.append(sum(probe.sums))
            self.set_role(self.roles[totals.index(max(totals))])  # of equals, the first (the earlier)
            self.tail_done = 0
            fill(out)

        return filled

    def done_params(self, layers_done: int, head_done: bool, head_params: int) -> int:
        """Parameters of the units this micro batch's backward has done: the top ``layers_done`` layers and, when
        ``head_done``, the head's unit (what trains of them)."""
        u = self.g
        dense = u.last_dense(layers_done)
        layers = (layers_done - dense) * u.layer_params + dense * u.dense_params
        return layers + (head_params if head_done else 0) + self.tail_done

    def accumulated_gradients(self, out: Sink, done: int) -> None:
        """grad_sync last: the unsharded gradients held in the reduce width, ``done`` the parameters of the units
        this micro batch's backward has done (see the module's docstring)."""
        accum, r = self.s.grad_accum, self.reduce
        if not self.after_first:
            elements, what = done, "the unsharded gradients of the units done so far (no sync)"
        elif self.is_last:
            elements, what = self.model_params - done, "the unsharded gradients of the units not yet reduced"
        else:
            elements, what = self.model_params, "every unit's unsharded gradient, accumulated without sync"
        value = elements * r
        where = role_name(self.role, accum)
        out.add("unsharded_grads", f"{what} ({where})", value, lambda: f"{n(elements)} elements × {r} B = {n(value)} B")
