"""The mutants and the kill lists.

Each mutant is the production :class:`Rules` with exactly one rule changed; its ledger is
computed by the real ledger code, then the named checks run on it. A mutant that no check
tells apart is reported as surviving, with the reason it is equivalent on that scenario.

The spec's five break the persistent ledger or the declared peak; two more break the
schedule-aware peak (a model's): ``drop-reduce-scatter-buffer`` and
``keep-all-grads-at-activation-peak``; one the host ledger:
``forget-pinned-buffers``; one the hierarchical layouts (HSDP, hpZ, expert parallelism):
``flatten-shard-groups``. Those two are equivalent on any scenario without a
schedule, so the reference kill list runs the scenario checks on the frozen model reference too.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

from app.ledger.ledger import Ledger, compute_ledger
from app.ledger.peak.schedule.layout import not_schedulable
from app.ledger.scenario import Scenario
from app.ledger.state.persistent import shard
from app.ledger.state.rules import SHARDED_FROM, Rules
from app.ledger.verify.checks import run_checks
from app.ledger.verify.frozen import FROZEN_MODEL_SCENARIO, FROZEN_MODEL_TITLE, FROZEN_SCENARIO
from app.ledger.verify.results import FROZEN_CHECKS, LINE_CHECKS, SCENARIO_CHECKS, CheckResult


def _unsplittable(s: Scenario) -> str | None:
    if s.dp == 1:
        return "dp = 1: sharding is the identity"
    if s.params == 1:
        return "params = 1: ⌈1 ÷ D⌉ = 1, one element cannot be split"
    return None


def _why_replicate_optimizer(s: Scenario) -> str | None:
    if s.offload_optimizer != "none":
        return (
            f"offload_optimizer = {s.offload_optimizer}: stage 1's master and optimizer states are off the "
            "device either way"
        )
    if s.master_bytes == 0 and s.opt_states == 0:
        return "master_bytes = 0 and opt_states = 0: there is no optimizer state to replicate"
    return _unsplittable(s)


def _why_shard_params(s: Scenario) -> str | None:
    return _unsplittable(s)


def _why_omit_master(s: Scenario) -> str | None:
    if s.master_bytes == 0:
        return "master_bytes = 0: the scenario has no master copy to omit"
    return None


def _why_divide_activations(s: Scenario) -> str | None:
    if s.dp == 1:
        return "dp = 1: dividing by D is the identity"
    if s.activation_bytes == 0:
        return "activation_bytes = 0: nothing to divide"
    return None


def _why_erase_gather(s: Scenario) -> str | None:
    if not_schedulable(s) is None:
        # A schedule holds each unit unsharded in the gather width even where the rank owns it whole
        # (dp = 1: FSDP2 still materialises it, a BF16 copy of FP32 shards): erasing that always changes
        # the peak, so the mutant is never equivalent there; if it survives, no check told it apart.
        return None
    if s.dp == 1:
        return "dp = 1: the rank already holds every unit whole"
    if s.unit_params == 0:
        return "unit_params = 0: no unit to gather"
    if s.unit_params == shard(s.unit_params, s.dp):
        return f"unit_params = {s.unit_params}: the rank's own shard is the whole unit"
    return None


def _why_flat(s: Scenario) -> str | None:
    # Check 1 also splits the scenario into two shard groups (D ÷ 2 ranks each) when D is even.
    unsplittable = _unsplittable(s)
    if unsplittable:
        return unsplittable
    flat = s.shard_group == s.dp and s.ep == 1 and s.hpz == 1
    if flat and s.dp % 2:
        return f"dp = {s.dp} is odd: no shard group to split it into, and no hpZ or experts' group of it"
    if flat:
        split = s.with_(shard_group=s.dp // 2)
        bytes_of = [[ln.bytes for st in compute_ledger(split, r, schedule=False).stages for ln in st.lines]
                    for r in (Rules(), Rules(hierarchical_groups=False))]  # fmt: skip
        if bytes_of[0] == bytes_of[1]:
            return (f"in shard groups of {s.dp // 2} every sharded class holds what it holds over D = {s.dp} "
                    "(⌈N ÷ (D ÷ 2)⌉ = ⌈N ÷ D⌉, or the class is off the device)")  # fmt: skip
    return None


def _why_no_schedule(s: Scenario) -> str | None:
    why = not_schedulable(s)
    return None if why is None else f"the declared peak has no schedule to break ({why})"


def _why_keep_all_grads(s: Scenario) -> str | None:
    if s.grad_accum > 1 and s.grad_sync == "every":
        return (f"grad_accum {s.grad_accum} with grad_sync every: from the second micro batch every gradient shard is "
                "resident, as the mutant has it")  # fmt: skip
    return _why_no_schedule(s)


def _why_keep_rs_buffer(s: Scenario) -> str | None:
    if s.accumulates_unsharded(3):
        return "grad_sync last: only the last micro batch reduce-scatters, and an instant may be another micro batch's"
    return _why_no_schedule(s)


@dataclass(frozen=True, slots=True)
class Mutant:
    id: str
    rule: str
    rules: Rules
    equivalent_because: Callable[[Scenario], str | None]

    def evaluate(self, s: Scenario) -> Ledger:
        """The mutant's ledger of any scenario."""
        return compute_ledger(s, self.rules)


MUTANTS: tuple[Mutant, ...] = (
    Mutant(
        "replicate-optimizer-stage1",
        "stage 1 keeps master weights and optimizer states replicated",
        Rules(overrides={("master_weights", 1): False, ("optimizer_states", 1): False}),
        _why_replicate_optimizer,
    ),
    Mutant(
        "shard-params-stage2",
        "stage 2 also divides parameters by D",
        Rules(sharded_from={**SHARDED_FROM, "parameters": 2}),
        _why_shard_params,
    ),
    Mutant("omit-master-copy", "the FP32 master copy is dropped", Rules(master_copy=False), _why_omit_master),
    Mutant(
        "divide-activations-by-dp",
        "activations are divided by D",
        Rules(activations_divided_by_dp=True),
        _why_divide_activations,
    ),
    Mutant(
        "erase-gather-peak",
        "the stage-3 all-gather term is set to 0",
        Rules(gather_peak=False),
        _why_erase_gather,
    ),
    Mutant(
        "drop-reduce-scatter-buffer",
        "the reduce-scatter input of the unit just finished is not counted",
        Rules(reduce_scatter_buffer=False),
        _why_keep_rs_buffer,
    ),
    Mutant(
        "keep-all-grads-at-activation-peak",
        "every gradient stays resident through the step, at the activation peak too (no set_to_none)",
        Rules(gradients_fill_during_backward=False),
        _why_keep_all_grads,
    ),
    Mutant(
        "flatten-shard-groups",
        "a shard group, ZeRO++'s secondary partition and the experts' D ÷ ep are ignored: every sharded class "
        "is split over all D ranks",
        Rules(hierarchical_groups=False),
        _why_flat,
    ),
    # Never equivalent: check 9 also offloads the scenario, where the pinned buffers always hold bytes.
    Mutant(
        "forget-pinned-buffers",
        "the host ledger leaves out the pinned staging and swap buffers offload allocates",
        Rules(pinned_buffers=False),
        lambda s: None,
    ),
)


@dataclass(frozen=True, slots=True)
class MutationResult:
    id: str
    rule: str
    killed: bool
    check: str  # the first named check that failed; "" for a survivor
    message: str  # the failing check's message, or why the mutant survived
    failed_checks: tuple[str, ...]


def try_mutant(mutant: Mutant, s: Scenario, checks: tuple[str, ...], *, first_failure: bool = False) -> MutationResult:
    """Run ``checks`` on the mutant's ledger for ``s``: the first failing check kills it.

    ``failed_checks`` lists every check that fails, or with ``first_failure`` only the one that
    killed it (the checks stop there).
    """
    results: tuple[CheckResult, ...] = ()
    lines_first = first_failure and checks[: len(LINE_CHECKS)] == LINE_CHECKS
    if lines_first:  # checks 1 and 2 read only the persistent lines: skip the schedules when they kill
        results = run_checks(compute_ledger(s, mutant.rules, schedule=False), mutant.evaluate, LINE_CHECKS,
                             stop_at_failure=True)  # fmt: skip
        checks = checks[len(LINE_CHECKS) :] if all(r.passed for r in results) else ()
    results += run_checks(mutant.evaluate(s), mutant.evaluate, checks, stop_at_failure=first_failure) if checks else ()
    failed = [r for r in results if not r.passed]
    if failed:
        names = tuple(r.check for r in failed)
        return MutationResult(mutant.id, mutant.rule, True, names[0], failed[0].message, names)
    reason = mutant.equivalent_because(s) or "no check tells it apart on this scenario"
    return MutationResult(mutant.id, mutant.rule, False, "", f"survived: {reason}", ())


def kill_list(s: Scenario) -> tuple[MutationResult, ...]:
    """The kill list on the user's scenario: the scenario checks (1–4, 6, 7, 9) run there, each mutant
    named with the check that killed it; equivalent mutants survive."""
    return tuple(try_mutant(m, s, SCENARIO_CHECKS, first_failure=True) for m in MUTANTS)


def _on_the_model_reference(r: CheckResult) -> CheckResult:
    return r if r.passed else CheckResult(r.check, False, f"on {FROZEN_MODEL_TITLE}: {r.message}")


def try_mutant_on_references(mutant: Mutant) -> MutationResult:
    """The scenario checks on the frozen scenario, then on the frozen model reference, then the two
    frozen checks: the first failure kills (the seed's checks come first, so the spec's five are
    named as before), and ``failed_checks`` lists every failure."""
    results = [
        *run_checks(mutant.evaluate(FROZEN_SCENARIO), mutant.evaluate, SCENARIO_CHECKS),
        *map(_on_the_model_reference,
             run_checks(mutant.evaluate(FROZEN_MODEL_SCENARIO), mutant.evaluate, SCENARIO_CHECKS)),
        *run_checks(mutant.evaluate(FROZEN_SCENARIO), mutant.evaluate, FROZEN_CHECKS),
    ]  # fmt: skip
    failed = [r for r in results if not r.passed]
    if not failed:
        return MutationResult(mutant.id, mutant.rule, False, "", "survived: no check tells it apart", ())
    names = tuple(dict.fromkeys(r.check for r in failed))
    return MutationResult(mutant.id, mutant.rule, True, failed[0].check, failed[0].message, names)


@cache  # a constant: the frozen scenarios never change, so neither does their kill list
def reference_kill_list() -> tuple[MutationResult, ...]:
    """The kill list on the frozen references (the seed's scenario and the model reference), checks 1–9:
    every mutant is always killed."""
    return tuple(try_mutant_on_references(m) for m in MUTANTS)
