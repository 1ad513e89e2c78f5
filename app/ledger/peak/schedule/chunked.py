"""Stage 3 with ``loss = chunked``: torchtitan 0.3.0's ``ChunkedLossWrapper`` (``components/loss.py``) on its carved
units (untied models), each rule read off that code and held to a trace of it (``docs/fidelity.md``, "The chunked
loss").

The model's forward stops at the final norm (``_skip_lm_head``). FSDP2 (torch 2.13
``_force_complete_incomplete_states``) then completes the forward of the tail unit whose head did not run, and
reshards it. The wrapper:

- splits the final norm's output and the labels into N slices along the sequence (``.contiguous()`` copies them
  when b > 1 and N > 1; otherwise a slice is already contiguous, a view), allocates a float32 buffer for the hidden
  state's gradient (``GradAccumulator``), and all-gathers the tail again (``lm_head.unshard()``) with resharding and the
  head's gradient sync turned off;
- per slice: the head's logits (activation width), the cross-entropy in float32 (its log-probabilities saved), and
  at once that slice's backward: the gradients of the log-probabilities and of the logits in the loss width, the
  head's whole gradient (gather width) which FSDP2 accumulates across slices in the reduce width (the unsharded
  accumulated gradient of ``set_requires_gradient_sync(False)``), the slice's input gradient copied into the buffer;
- on the last slice the sync is back on: the head's accumulated gradient is reduce-scattered (its input a new
  buffer of the whole padded head in the reduce width, beside the accumulation and the last slice's gradient);
- after the loop the buffer is cast to the activation width and handed to the decoder's backward, which all-gathers
  the tail a third time for the final norm;
- each slice's backward ends in FSDP2's root callback, which (``is_last_backward``) finalizes every group and clears
  the forward order its implicit backward prefetch reads (torch 2.13 ``_fsdp_state.py``
  ``_root_post_backward_final_callback``): the decoder's backward then prefetches nothing, each unit all-gathers
  itself in its own pre-backward (an explicit prefetch, ``prefetch`` ≥ 1, is kept).

No whole s·b·V tensor ever exists. The worst instant of the loop is the second slice's backward or the last
slice's reduce-scatter; which one depends on V·h against s·b·V ÷ N.

A trace of this loss counts one s·b·h tensor (activation width) more per traced step, which is the tracker's own:
torch 2.13's ``ModTracker`` (inside ``FSDPMemTracker``) registers a multi-grad hook on each module call's inputs, and
for the slices, which are leaves, the hook's closure holds their ``AccumulateGrad`` nodes, which hold the slices (with
b = 1 views of the final norm's output): a cycle through C++ that Python's garbage collector cannot break. It grows by
one s·b·h per step, which no real run does; a run without the tracker frees the slices when the wrapper returns. The
lab does not count it (``docs/fidelity.md``, "The chunked loss").
"""

from __future__ import annotations

from app.ledger.arithmetic import n
from app.ledger.peak.schedule.carved import CarvedStep
from app.ledger.peak.schedule.sinks import Sink
from app.ledger.peak.schedule.step import Moment, Step

LABEL_BYTES = 8  # the labels are int64
BUFFER_BYTES = 4  # GradAccumulator(..., dtype=torch.float32)


class ChunkedStep(CarvedStep):
    def plan(self) -> list[Moment]:
        carved = super().plan()
        # the carved walk's forward up to the tail, and its backward from the last layer on: the loss between them
        # is this loop's, and the tail's backward is one regather for the final norm
        head = [m for m in carved if m.phase == "forward" and m.key != "end-of-forward"]
        tail = [m for m in carved if m.key.startswith(("backward-layer-", "embedding-", "optimizer-"))]
        return [
            *head,
            Moment("end-of-forward", "end of forward (the final norm's output)", "forward", self.end_of_forward),
            Moment("loss-chunk-gather", "chunked loss: the tail all-gathered for the slices", "loss",
                   self.chunk_gather),
            Moment("loss-chunk-backward", f"chunked loss: backward of slice {min(2, self.chunks)} of {self.chunks}",
                   "loss", self.chunk_backward),
            Moment("loss-chunk-reduce", f"chunked loss: the head's reduce-scatter after slice {self.chunks}", "loss",
                   self.chunk_reduce),
            Moment("tail-regather", "the tail all-gathered again for the final norm", "backward", self.tail_regather),
            *tail,
        ]  # fmt: skip

    @property
    def chunks(self) -> int:
        return self.s.loss_chunks

    # ------------------------------------------------------------------ forward
    def end_of_forward(self, out: Sink) -> None:
        """The tail resharded (its head never ran in the model's forward); no logits."""
        self.forward_done(out)

    # ------------------------------------------------------------------ the loop
    def _loop(self, out: Sink) -> None:
        """What every instant of the loop holds: the forward's state and activations, the slices, the buffer of
        the hidden state's gradient and the tail unsharded."""
        self.forward_done(out)
        slices(self, out)
        self.unsharded(out, "tail unit unsharded (lm_head.unshard(); not resharded during the slices)", 1,
                       self.u.tail_unsharded)  # fmt: skip

    def _accumulated(self, out: Sink) -> None:
        """From the second slice: the head's unsharded gradient accumulated in the reduce width (without sync across
        micro batches it is one of the gradients accumulated since the first, counted there)."""
        if self.chunks < 2 or (self.sync_last and self.after_first):
            return
        u, r = self.g, self.reduce
        value = u.head_params * r
        out.add("unsharded_grads", "the head's gradient accumulated across slices (unsharded, reduce width)", value,
                lambda: f"{n(u.head_params)} elements × {r} B = {n(value)} B")  # fmt: skip

    def chunk_gather(self, out: Sink) -> None:
        self._loop(out)
        if self._gathered():
            self.unsharded(out, "the tail's all-gather output", 1, self.u.tail_unsharded, "all_gather")

    def chunk_backward(self, out: Sink) -> None:
        """A slice's cross-entropy backward (the second: the first has nothing accumulated yet)."""
        self._loop(out)
        self._accumulated(out)
        slice_logits(self, out)
        slice_loss_temporaries(self, out)

    def chunk_reduce(self, out: Sink) -> None:
        """The last slice's post-backward: the head's reduce-scatter input and output beside the accumulated
        gradient and the slice's own, whole."""
        s, u, a = self.s, self.g, self.a
        self._loop(out)
        self._accumulated(out)
        slice_logits(self, out)
        self.whole_gradients(out, "the last slice's head gradient (whole)", u.head_params)
        grad_in = slice_tokens(self) * a.hidden * s.act_bytes
        out.add("temporaries", "the last slice's input gradient", grad_in,
                lambda: f"s ÷ {self.chunks}·b·h × {s.act_bytes} B = {n(grad_in)} B")  # fmt: skip
        self.reduce_scatter_input(out, "the head's reduce-scatter input", u.head_params, u.head_unsharded)
        self._reduced_head(out)

    def _reduced_head(self, out: Sink) -> None:
        """The head's gradient shard (the reduce-scatter's output), and its copy in the reduce width before the
        cast where that differs."""
        u, w, r = self.g, self.grads_width * self.grad_line.copies, self.reduce
        elements = u.head_unsharded // self.mesh
        out.add("gradients", "the head's gradient shard (the reduce-scatter's output)", elements * w,
                lambda: f"{n(elements)} elements × {w} B = {n(elements * w)} B")  # fmt: skip
        if r != self.grads_width:
            cast = elements * r
            out.add("reduce_scatter", "the reduce-scatter's output in the reduce width, before its cast", cast,
                    lambda: f"{n(elements)} elements × {r} B = {n(cast)} B")  # fmt: skip

    # ------------------------------------------------------------------ the decoder's backward
    def backward_prefetched(self, out: Sink, k: int, moment: str) -> None:
        """No implicit prefetch after the slices (the module docstring): at its copy-out a layer's own all-gather
        output only; with an explicit prefetch (P ≥ 1) the carved walk's."""
        if self.s.prefetch:
            super().backward_prefetched(out, k, moment)
        elif moment == "unshard":
            self.unsharded(out, f"layer {k}'s all-gather output (during its copy-out; nothing prefetched)", 1,
                           self.u.unsharded_of(k), "all_gather")  # fmt: skip

    def tail_regather(self, out: Sink) -> None:
        """The final norm's backward: the tail all-gathered once more, the head's gradient shard, what every layer
        and the final norm saved (its output is gone: the train step dropped it and nothing saved it), and the
        buffer cast to the activation width as the hidden state's gradient."""
        a = self.a
        self.tail_done = self.g.head_params  # the head's reduce-scatter has run
        self.gradients_so_far(out, 0, False, "gradients (none reduced yet)")
        self.root_and_kept_layers(out, self.kept_after_forward())
        self.tail_gradients(out, head_only=True)
        self.tail(out, gathering=True)
        layers, norm = self.u.layers, a.head - a.activation_grad  # the final norm's saved set less its output
        value = a.saved_before(layers) + a.extra_residual + norm
        self.activations(out, "activations saved by every layer and the final norm (its output dropped)", value,
                         lambda: f"{a.saved_formula(layers)} + residual {n(a.extra_residual)} B + final norm "
                         f"{n(norm)} B (its saved set less its output) = {n(value)} B")  # fmt: skip
        out.add("temporaries", "the hidden state's gradient (the buffer cast to the activation width)",
                a.activation_grad, self.activation_grad_formula)  # fmt: skip


# ---------------------------------------------------------------------- what every walk of the chunked loss holds


def slice_tokens(step: Step) -> int:
    """Tokens in one slice: s ÷ N · b."""
    return step.s.seq_len // step.s.loss_chunks * step.s.micro_batch


def slices(step: Step, out: Sink) -> None:
    """The slices (copied when b > 1 and N > 1) and the FP32 buffer of the hidden state's gradient."""
    s, a = step.s, step.a
    if s.micro_batch > 1 and s.loss_chunks > 1:  # one slice, or b = 1: each slice is contiguous already, a view
        out.add("temporaries", "the hidden state's slices, copied (.contiguous(): b > 1)", a.activation_grad,
                step.activation_grad_formula)  # fmt: skip
        labels = s.seq_len * s.micro_batch * LABEL_BYTES
        out.add("temporaries", "the labels' slices, copied (int64)", labels,
                lambda: f"s·b × {LABEL_BYTES} B = {n(labels)} B")  # fmt: skip
    buffer = s.seq_len * s.micro_batch * a.hidden * BUFFER_BYTES
    out.add("temporaries", "the buffer of the hidden state's gradient (GradAccumulator, float32)", buffer,
            lambda: f"s·b·h × {BUFFER_BYTES} B = {n(buffer)} B")  # fmt: skip


def slice_logits(step: Step, out: Sink) -> None:
    s, a, tokens = step.s, step.a, slice_tokens(step)
    value = tokens * a.vocab * s.act_bytes
    out.add("activations", "the slice's logits (the head's output, activation width)", value,
            lambda: f"s ÷ {s.loss_chunks}·b·V × {s.act_bytes} B = {n(tokens)}·{n(a.vocab)} × {s.act_bytes} B "
            f"= {n(value)} B")  # fmt: skip


def slice_loss_temporaries(step: Step, out: Sink) -> None:
    """A slice's cross-entropy backward: its log-probabilities, their gradient and the logits' gradient."""
    s, a, tokens = step.s, step.a, slice_tokens(step)
    value = 3 * tokens * a.vocab * s.logits_bytes
    out.add("temporaries", "the slice's log-probabilities, their gradient and the logits' gradient (loss width)",
            value, lambda: f"3 × {n(tokens)}·{n(a.vocab)} × {s.logits_bytes} B = {n(value)} B")  # fmt: skip


class ChunkedRootStep(Step):
    """Stages 0–2 with the chunked loss, an approximation as their walks are (no FSDP: the wrapper finds no FSDP
    head, so nothing is gathered or resharded; the head's whole gradient accumulates in its ``.grad`` across the
    slices, in the gradient width). No s·b·V tensor, as at stage 3."""

    def end_of_forward(self, out: Sink) -> None:
        self.forward_done(out)

    def loss_backward(self, out: Sink) -> None:
        """A later slice's cross-entropy backward: the forward's activations, the slices and the buffer, the head's
        gradient so far (whole), the slice's logits and its loss temporaries."""
        self.forward_done(out)
        slices(self, out)
        self.whole_gradients(out, "the head's gradient, accumulated across slices (whole)", self.g.head_params)
        slice_logits(self, out)
        slice_loss_temporaries(self, out)

    def head_backward_temporaries(self, out: Sink) -> None:
        """After the slices: the buffer cast to the activation width, the hidden state's gradient."""
        out.add("temporaries", "the hidden state's gradient (the buffer cast to the activation width)",
                self.a.activation_grad, self.activation_grad_formula)  # fmt: skip
