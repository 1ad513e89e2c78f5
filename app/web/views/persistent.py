"""``partials/_persistent.html``: each tensor class's bytes per rank at every stage, with its formula
and its share of the stage's persistent total, and the totals."""

from __future__ import annotations

from dataclasses import dataclass

from app.ledger.arithmetic import share_bp
from app.ledger.estimate import Estimate
from app.ledger.state.rules import CLASSES


@dataclass(frozen=True, slots=True)
class PersistentCell:
    stage: int
    bytes: int
    formula: str
    share_bp: int  # of the stage's persistent total


@dataclass(frozen=True, slots=True)
class PersistentSection:
    """``_persistent.html``: each class's bytes per rank at every stage, and the totals."""

    rows: tuple[tuple[str, tuple[PersistentCell, ...]], ...]  # (class, one cell per stage)
    totals: tuple[tuple[int, int], ...]  # (stage, bytes)


def persistent_section(e: Estimate) -> PersistentSection:
    stages = e.ledger.stages
    rows = []
    for index, cls in enumerate(CLASSES):
        cells = []
        for st in stages:
            line = st.lines[index]
            cells.append(PersistentCell(st.stage, line.bytes, line.formula.text, share_bp(line.bytes, st.persistent)))
        rows.append((cls, tuple(cells)))
    return PersistentSection(tuple(rows), tuple((st.stage, st.persistent) for st in stages))
