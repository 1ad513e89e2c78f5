"""Ring-algorithm volume sent per rank per optimizer step (spec "Communication per step")."""

from __future__ import annotations

from dataclasses import dataclass

from app.ledger.arithmetic import ceil_div, n
from app.ledger.scenario import Scenario

COLLECTIVES: dict[int, str] = {
    0: "all-reduce of gradients",
    1: "reduce-scatter of gradients + all-gather of updated parameters",
    2: "reduce-scatter of gradients + all-gather of updated parameters",
    3: "all-gather in forward + all-gather in backward + reduce-scatter of gradients",
}
EVIDENCE = "ring collectives send (D − 1) ÷ D of the buffer per pass (Rajbhandari et al., ZeRO, §7)"


@dataclass(frozen=True, slots=True)
class Communication:
    """One stage's collectives and their volume."""

    stage: int
    volume: int  # before the (D − 1) ÷ D factor
    bytes: int  # ⌈volume × (D − 1) ÷ D⌉
    scenario: Scenario

    @property
    def collectives(self) -> str:
        return COLLECTIVES[self.stage]

    @property
    def evidence(self) -> str:
        return EVIDENCE

    @property
    def formula(self) -> str:
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
    return Communication(stage, volume, ceil_div(volume * (s.dp - 1), s.dp), s)
