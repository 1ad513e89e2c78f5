"""One scenario's whole answer: ledger, checks, checkpoint ledger, both kill lists, the fit finder,
and, when the scenario names a model, its inventory, activation ledger and FSDP2 shard."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING

from app.ledger.checkpoint import CheckpointPolicy, checkpoint_policies
from app.ledger.checks import SCENARIO_CHECKS, CheckResult, frozen_scenario, run_checks
from app.ledger.fit import FitFinder, find_fit
from app.ledger.ledger import Ledger, compute_ledger
from app.ledger.mutants import MutationResult, kill_list, reference_kill_list
from app.ledger.scenario import Scenario

if TYPE_CHECKING:  # the model code loads only for scenarios that name a model (CLI cold start)
    from app.ledger.model_inputs import ModelDefaults
    from app.ledger.models.fsdp2 import Fsdp2Shard


@dataclass(slots=True)  # a value: never mutated; not frozen because frozen __init__ costs 5x (hot path)
class Estimate:
    scenario: Scenario
    ledger: Ledger
    checks: tuple[CheckResult, ...]
    checkpoint: tuple[CheckpointPolicy, ...]
    mutations: tuple[MutationResult, ...]
    reference_mutations: tuple[MutationResult, ...]
    fit: FitFinder
    # modelled, measured or placeholder: scenario.source_of("activation_bytes"), worked out once
    activation_source: str
    model: ModelDefaults | None = None  # with a model: its inventory and activation ledger
    fsdp2: Fsdp2Shard | None = None  # with a model: the dim-0-padded shard, in elements per rank


@cache
def production_frozen_check() -> CheckResult:
    """Check 5 for the production rules: the frozen scenario never changes, so neither does this."""
    return frozen_scenario(compute_ledger)


def _activations_at(s: Scenario, source: str) -> Callable[[int], int] | None:
    """The modelled activation peak as a function of the micro batch, when the scenario models it."""
    if source != "modelled":
        return None
    from app.ledger.model_inputs import modelled_activation_total

    fixed = (s.model, s.seq_len)
    rest = (s.act_bytes, s.act_policy, s.tp, s.sequence_parallel, s.logits_bytes)
    return lambda b: modelled_activation_total(*fixed, b, *rest)


def estimate(s: Scenario) -> Estimate:
    ledger = compute_ledger(s)
    source = s.source_of("activation_bytes")
    md = s.model_defaults()
    fsdp2 = None
    if md is not None:
        from app.ledger.models.fsdp2 import fsdp2_shard

        fsdp2 = fsdp2_shard(md.model.inventory, s.dp, 1)
    return Estimate(
        scenario=s,
        ledger=ledger,
        checks=(*run_checks(ledger, compute_ledger, SCENARIO_CHECKS), production_frozen_check()),
        checkpoint=checkpoint_policies(s, tuple(stage.persistent for stage in ledger.stages)),
        mutations=kill_list(s, ledger),
        reference_mutations=reference_kill_list(),
        fit=find_fit(s, _activations_at(s, source)),
        activation_source=source,
        model=md,
        fsdp2=fsdp2,
    )
