"""The ledger under a set of rules: per stage, persistent lines, training peak, communication."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from app.ledger.communication import Communication, all_communication
from app.ledger.peak import Peak, training_peak
from app.ledger.persistent import LedgerLine, all_persistent_lines, ledger_line
from app.ledger.rules import CLASSES, PRODUCTION, STAGES, Rules
from app.ledger.scenario import Scenario


class StageLedger:
    """One stage: its persistent lines and total, its training peak and its communication.

    The peak is worked out when first read. A mutant's ledger is derived from the production
    one, and most mutants fall to the first check, which reads only the persistent lines.
    """

    __slots__ = ("_peak", "_rules", "_scenario", "communication", "lines", "persistent", "stage")

    def __init__(
        self, stage: int, lines: tuple[LedgerLine, ...], persistent: int, communication: Communication,
        scenario: Scenario, rules: Rules,
    ) -> None:  # fmt: skip
        self.stage = stage
        self.lines = lines
        self.persistent = persistent
        self.communication = communication
        self._peak: Peak | None = None
        self._scenario = scenario
        self._rules = rules

    @property
    def peak(self) -> Peak:
        if self._peak is None:
            self._peak = training_peak(self._scenario, self.stage, self.persistent, self._rules)
        return self._peak

    def with_(self, *, peak: Peak | None = None, **changes: Any) -> StageLedger:
        """A copy with some fields replaced and every other one kept, the peak included (tests
        build inconsistent ledgers this way, like ``dataclasses.replace``)."""
        fields = {"stage": self.stage, "lines": self.lines, "persistent": self.persistent,
                  "communication": self.communication, **changes}  # fmt: skip
        copy = StageLedger(**fields, scenario=self._scenario, rules=self._rules)
        copy._peak = self.peak if peak is None else peak
        return copy

    def _key(self) -> tuple[object, ...]:
        return self.stage, self.lines, self.persistent, self.peak, self.communication

    def __eq__(self, other: object) -> bool:
        return isinstance(other, StageLedger) and self._key() == other._key()

    __hash__ = None  # type: ignore[assignment]  # a value compared by content, like the dataclasses

    def __repr__(self) -> str:
        return (
            f"StageLedger(stage={self.stage!r}, lines={self.lines!r}, persistent={self.persistent!r}, "
            f"peak={self.peak!r}, communication={self.communication!r})"
        )

    def bytes_of(self, tensor_class: str) -> int:
        for line in self.lines:
            if line.tensor_class == tensor_class:
                return line.bytes
        raise KeyError(tensor_class)


@dataclass(slots=True)  # a value: never mutated; not frozen because frozen __init__ costs 5x (hot path)
class Ledger:
    scenario: Scenario
    stages: tuple[StageLedger, ...]
    rules: Rules = PRODUCTION


def compute_ledger(s: Scenario, rules: Rules = PRODUCTION) -> Ledger:
    """Every stage's ledger for ``s`` under ``rules`` (the spec's rules unless a mutant's)."""
    stages = []
    for stage, lines, comm in zip(STAGES, all_persistent_lines(s, rules), all_communication(s), strict=True):
        persistent = sum([line.bytes for line in lines])
        stages.append(StageLedger(stage, lines, persistent, comm, s, rules))
    return Ledger(s, tuple(stages), rules)


@dataclass(frozen=True, slots=True)
class Rederivation:
    """What a change of rules touches in a ledger: the stages it touches, each with the indexes
    (in CLASSES order) of the lines whose rule differs there. A stage is touched when one of its
    lines or its peak's own rules (gather, activations) differ."""

    touched: tuple[tuple[int, tuple[int, ...]], ...]


def rederivation(base: Rules, rules: Rules) -> Rederivation:
    changed = rules.cells_differing_from(base)
    peaks = rules.peak_stages_differing_from(base)
    touched = []
    for stage in STAGES:
        lines = tuple(i for i, c in enumerate(CLASSES) if (stage, c) in changed)
        if lines or stage in peaks:
            touched.append((stage, lines))
    return Rederivation(tuple(touched))


def rederive(base: Ledger, rules: Rules, plan: Rederivation | None = None) -> Ledger:
    """``base`` recomputed under ``rules``, reusing everything that the rule change cannot touch.

    Equal to ``compute_ledger(base.scenario, rules)`` (a property test says so), but a mutant
    that changes one cell's ownership recomputes that cell and that stage's peak, not every line
    and four peaks. A stage the change does not touch is the base's own ``StageLedger``, peak
    included, although it still names the base's rules: that is sound because such a stage's
    lines and peak come out the same under both rules (``Rules.cells_differing_from`` and
    ``Rules.peak_stages_differing_from`` list everything that does not, and the property test
    compares every stage's lines and peak with a ledger computed from scratch).
    ``plan`` may carry ``rederivation(base.rules, rules)`` worked out once in advance.
    """
    s = base.scenario
    if plan is None:
        plan = rederivation(base.rules, rules)
    stages = list(base.stages)
    for index, changed in plan.touched:
        st = stages[index]
        lines, persistent = st.lines, st.persistent
        if changed:
            new = list(lines)
            for i in changed:
                new[i] = ledger_line(s, st.stage, CLASSES[i], rules)
            lines = tuple(new)
            persistent = sum([line.bytes for line in lines])
        stages[index] = StageLedger(st.stage, lines, persistent, st.communication, s, rules)
    return Ledger(s, tuple(stages), rules)
