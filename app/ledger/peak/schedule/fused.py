"""Stage 3 with ``loss = fused``: Liger Kernel 0.8.5's fused linear cross-entropy on Accelerate's carved units.

The HF Trainer's ``use_liger_kernel=True`` replaces the model's forward with Liger's ``lce_forward``
(``liger_kernel/transformers/model/<family>.py``): after the decoder it reads ``self.lm_head.weight`` (the tail unit,
unsharded since the final norm's forward) and calls ``LigerFusedLinearCrossEntropyFunction``, which runs the head
and the loss chunk by chunk **in forward** and computes there the gradients of the hidden state and of the head's
weight (``ops/fused_linear_cross_entropy.py`` ``fused_linear_cross_entropy_forward``, the CUDA branch for one dtype
under no grad, compute capability ≥ 8):

- ``grad_input`` = zeros_like(hidden): T × h in the activation width (T = s·b tokens);
- ``grad_weight`` = zeros_like(weight): V × h in the unsharded head's width, accumulated in place (``addmm``);
- ``loss_1d``: T in FP32, and ``target != ignore_index``: T bytes, for the loss's length;
- one chunk's logits at a time, ``logits_storage`` (chunk × V, activation width) reused across chunks: chunk =
  min(next_pow2(⌈T ÷ ⌈V ÷ h⌉⌉), T); the cross-entropy kernel turns them into their gradient in place;
- ``LigerForCausalLMLoss`` shifts the labels: ``pad`` (b·(s + 1) int64) and a contiguous slice (b·s int64).

The Function keeps ``grad_input`` and ``grad_weight`` for backward and returns them as the gradients (its backward
only scales them in place). The head's forward never runs, so FSDP2 runs the tail's hooks for the final norm only:
its pre-backward (the tail already unsharded) prefetches the last layer, its post-backward reduce-scatters the head's
and the norm's gradients together, whose input stays in flight through the last layer's backward. Held to a trace of
the same step (``tests/trace/test_fused_loss_traced.py``), Liger's Python run as it is with its two Triton kernels,
``.item()`` and ``torch.equal`` stood in for (:mod:`app.trace.liger`).
"""

from __future__ import annotations

from app.ledger.arithmetic import n
from app.ledger.peak.schedule.carved import CarvedStep
from app.ledger.peak.schedule.sinks import Sink
from app.ledger.peak.schedule.step import Moment, Step

_REPLACED = ("end-of-forward", "loss-forward", "loss-backward", "head-backward", "tail-head-reduce", "tail-regather")


def fused_chunk(tokens: int, vocab: int, hidden: int) -> int:
    """Liger 0.8.5's chunk of tokens: the logits bounded to about T × h elements (``chunk_mem_const`` 1)."""
    inc = -(-vocab // hidden)
    chunk = 1 << max(0, (-(-tokens // inc) - 1).bit_length())  # triton.next_power_of_2
    return min(chunk, tokens)


def _tokens(step: Step) -> int:
    return step.s.seq_len // step.s.cp * step.s.micro_batch


def kept_gradients(step: Step, out: Sink, head_kept: bool = True) -> None:
    """``grad_input`` and ``grad_weight``, made in forward and kept by the Function for its backward (``head_kept``
    False: the head's already added into the gradient accumulated without sync, as autograd adds a fresh gradient
    into an existing ``.grad``, and freed)."""
    a, s, w, g = step.a, step.s, step.s.act_bytes, step.gather
    hidden = _tokens(step) * a.hidden * w
    step.activations(
        out,
        "the hidden state's gradient, computed in forward (Liger's grad_input)",
        hidden,
        lambda: f"s·b·h × {w} B = {step.seq}·{s.micro_batch}·{n(a.hidden)} × {w} B = {n(hidden)} B",
    )
    if not head_kept:
        return
    head = a.vocab * a.hidden * g
    step.activations(out, "the head weight's gradient, computed in forward (Liger's grad_weight)", head,
                     lambda: f"V·h × {g} B = {n(a.vocab)}·{n(a.hidden)} × {g} B = {n(head)} B")  # fmt: skip


def loss_temporaries(step: Step, out: Sink) -> None:
    """The last chunk: its logits, the loss per token and its mask, the shifted labels."""
    a, s, w, t = step.a, step.s, step.s.act_bytes, _tokens(step)
    chunk = fused_chunk(t, a.vocab, a.hidden)
    logits = chunk * a.vocab * w
    out.add("temporaries", "one chunk's logits, turned into their gradient in place (logits_storage)", logits,
            lambda: f"{n(chunk)} tokens × V × {w} B = {n(chunk)}·{n(a.vocab)} × {w} B = {n(logits)} B "
            f"(chunk = min(next_pow2(⌈T ÷ ⌈V ÷ h⌉⌉), T), T = {n(t)})")  # fmt: skip
    rows = t * 4 + t + (t + s.micro_batch) * 8 + t * 8
    out.add("temporaries", "the loss per token (FP32), its mask, the shifted labels (int64, padded and sliced)",
            rows, lambda: f"T × (4 + 1) B + b·(s + 1) × 8 B + T × 8 B = {n(rows)} B")  # fmt: skip


def norm_backward(step: Step, out: Sink) -> None:
    """The final norm's backward at its widest. transformers' RMSNorm in eager ops (``norms`` unfused, and counted
    alike for composite) holds five FP32 s·b·h tensors at once and, below FP32, one in the activation width (read
    off traces at three shapes and both widths: 11·s·b·h·2 B at BF16, 5·s·b·h·4 B at FP32); a fused kernel its
    input's gradient."""
    s, w, h, tokens = step.s, step.s.act_bytes, step.a.hidden, _tokens(step)
    if s.norms == "fused":
        temps = tokens * h * w
        formula = f"s·b·h × {w} B = {n(tokens)}·{n(h)} × {w} B = {n(temps)} B"
    else:
        cast = w if w < 4 else 0
        temps = tokens * h * (5 * 4 + cast)
        plus = f" + {w} B" if cast else ""
        formula = f"s·b·h × (5 × 4 B{plus}) = {n(tokens)}·{n(h)} × {5 * 4 + cast} B = {n(temps)} B"
    out.add("temporaries", f"the final norm's backward ({s.norms}): its gradients in flight", temps, lambda: formula)


class FusedRootStep(Step):
    """Stages 0–2 with the fused loss, an approximation as their walks are (no FSDP units: the head's weight is
    whole, nothing is gathered): the loss's last chunk ends the forward, its two gradients are kept into the
    backward, where the head's becomes its gradient and the final norm's backward is the head's instant."""

    def end_of_forward(self, out: Sink) -> None:
        self.forward_done(out)
        kept_gradients(self, out)
        loss_temporaries(self, out)

    def loss_backward(self, out: Sink) -> None:
        self.forward_done(out)
        kept_gradients(self, out)

    def head_backward_temporaries(self, out: Sink) -> None:
        out.add("temporaries", "the hidden state's gradient (Liger's)", self.a.activation_grad,
                self.activation_grad_formula)  # fmt: skip
        norm_backward(self, out)


class FusedStep(CarvedStep):
    def plan(self) -> list[Moment]:
        plan = [m for m in super().plan() if m.key not in _REPLACED]
        at = next(i for i, m in enumerate(plan) if m.key == "forward-tail") + 1
        plan[at:at] = [
            Moment("loss-forward", "the fused loss's forward (the head and the loss, chunk by chunk)", "loss",
                   self.loss_forward),
            Moment("loss-backward", "loss backward (the gradients Liger kept since forward)", "loss",
                   self.loss_backward),
            Moment("tail-unshard", "the tail's pre-backward, for the final norm (the last layer prefetched)",
                   "backward", self.tail_unshard),
            Moment("tail-gradients", "backward at the final norm (the head's gradient, Liger's)", "backward",
                   self.tail_gradients_computed),
            Moment("tail-reduce", "the tail's post-backward (the head and the final norm)", "backward",
                   self.tail_reduce),
        ]  # fmt: skip
        return plan

    # ------------------------------------------------------------------ the loss, in forward
    def loss_forward(self, out: Sink) -> None:
        """The last chunk: the tail's all-gather output still held (the root's forward has not returned)."""
        self.tail(out, gathering=True)
        self.forward_done(out)
        kept_gradients(self, out)
        loss_temporaries(self, out)

    def loss_backward(self, out: Sink, head_kept: bool = True) -> None:
        self.tail(out)
        self.forward_done(out)
        kept_gradients(self, out, head_kept)

    def tail_unshard(self, out: Sink) -> None:
        """The final norm's pre-backward: the tail already unsharded (kept since forward), the last layer(s)
        prefetched."""
        self.loss_backward(out, head_kept=not self._accumulating)
        Step.root_prefetch(self, out, by="the final norm's")

    @property
    def _accumulating(self) -> bool:
        """A micro batch after the first without sync: the head's gradient from an earlier one is held, and Liger's
        is added into it as its backward returns."""
        return self.sync_last and self.after_first

    # ------------------------------------------------------------------ the tail's one backward
    def _norm_done(self, out: Sink, resharded: bool = False) -> None:
        """After the final norm's backward: the tail unsharded (until its post-backward reshards it), the last
        layer(s) prefetched, every layer's activations, the gradient entering the last layer."""
        u, a = self.g, self.a
        self.gradients_so_far(out, 0, False, "gradients (none reduced yet)")
        self.root_and_kept_layers(out, self.kept_after_forward())
        if not resharded:
            self.tail(out)
        Step.root_prefetch(self, out, by="the final norm's")
        value = a.saved_before(u.layers) + a.extra_residual  # the embedding's, and any mask the checkpoints keep
        self.activations(out, "activations saved by every layer and the embedding", value,
                         lambda: f"{a.saved_formula(u.layers)} + {n(a.extra_residual)} B = {n(value)} B")  # fmt: skip
        out.add("temporaries", "the gradient entering the last layer", a.activation_grad, self.activation_grad_formula)

    def tail_gradients_computed(self, out: Sink) -> None:
        """The final norm's backward, at its widest: its gradients beside the head's (Liger's), and its
        temporaries."""
        self.tail_done = 0
        self._norm_done(out)
        if self._accumulating:  # the head's is in the accumulated gradient already: the norm's fresh one alone
            self.whole_gradients(out, "the final norm's gradient (whole)", self.g.norm_params)
        else:
            self.whole_gradients(out, "the head's and final norm's gradients (whole; the head's is Liger's)",
                                 self.g.head_grad_params)  # fmt: skip
        norm_backward(self, out)

    def tail_reduce(self, out: Sink) -> None:
        """The tail's post-backward: resharded (its parameters freed), then its one reduce-scatter."""
        g = self.g
        self._norm_done(out, resharded=True)
        self.unit_reduce_scatter(out, "the tail's", g.head_params + g.norm_params, g.tail_unsharded, g.tail_shard)

    def head_gradients_held(self, out: Sink, k: int) -> None:
        """The tail's gradients sharded; during the last layer's backward the tail's reduce-scatter input (head and
        final norm at once) is the one in flight."""
        self.tail_gradients(out, head_only=False)
        if k == self.u.layers - 1:
            self.reduce_scatter_input(out, "the tail's reduce-scatter input (in flight until the next)",
                                      self.g.head_params + self.g.norm_params, self.g.tail_unsharded)  # fmt: skip
