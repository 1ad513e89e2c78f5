"""Ring-algorithm volume sent per rank per optimizer step (spec "Communication per step")."""

from __future__ import annotations

from dataclasses import dataclass, field

from app.ledger.arithmetic import n
from app.ledger.scenario import Scenario

COLLECTIVES: dict[int, str] = {
    0: "all-reduce of gradients",
    1: "reduce-scatter of gradients + all-gather of updated parameters",
    2: "reduce-scatter of gradients + all-gather of updated parameters",
    3: "all-gather in forward + all-gather in backward + reduce-scatter of gradients",
}
EVIDENCE = "ring collectives send (D − 1) ÷ D of the buffer per pass (Rajbhandari et al., ZeRO, §7)"


# A value: its fields never change (not frozen because frozen __init__ costs 5x on the hot path);
# only the formula is filled in, once, when first read.
@dataclass(slots=True)
class Communication:
    """One stage's collectives and their volume. Stages 1 and 2 run the same collectives on the
    same buffers, so a ledger's stages 1 and 2 hold the same object, computed for stage 1 (the
    stage ledger holding it says which stage it is)."""

    stage: int  # the stage it was computed for: a ledger's stage 2 holds stage 1's
    volume: int  # before the (D − 1) ÷ D factor
    bytes: int  # ⌈volume × (D − 1) ÷ D⌉
    scenario: Scenario
    _formula: str | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def collectives(self) -> str:
        return COLLECTIVES[self.stage]

    @property
    def evidence(self) -> str:
        return EVIDENCE

    @property
    def formula(self) -> str:
        if self._formula is None:
            self._formula = self._spell()
        return self._formula

    def _spell(self) -> str:
        s = self.scenario
        psi_p, psi_g = s.params * s.param_bytes, s.params * s.grad_bytes
        if self.stage == 0:
            terms = f"2 × Ψ_g = 2 × {n(psi_g)}"
        elif self.stage in (1, 2):
            terms = f"Ψ_g + Ψ_p = {n(psi_g)} + {n(psi_p)}"
        else:
            terms = f"2 × Ψ_p + Ψ_g = 2 × {n(psi_p)} + {n(psi_g)}"
        return f"⌈({terms}) × {n(s.dp - 1)} ÷ {n(s.dp)}⌉ = {n(self.bytes)} B"


def communication(s: Scenario, stage: int) -> Communication:
    psi_p = s.params * s.param_bytes
    psi_g = s.params * s.grad_bytes
    if stage == 0:
        volume = 2 * psi_g
    elif stage in (1, 2):
        volume = psi_g + psi_p
    else:
        volume = 2 * psi_p + psi_g
    return Communication(stage, volume, -(-volume * (s.dp - 1) // s.dp), s)


def all_communication(s: Scenario) -> tuple[Communication, ...]:
    """Every stage's communication, as :func:`communication` per stage (a test holds them equal),
    with stages 1 and 2 sharing one."""
    middle = communication(s, 1)
    return communication(s, 0), middle, middle, communication(s, 3)
