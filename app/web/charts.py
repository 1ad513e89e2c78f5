"""Server-rendered SVG geometry for the training-peak chart (integers only)."""

from __future__ import annotations

from dataclasses import dataclass

from app.ledger.ledger import Ledger
from app.receipts.display import gb, integer

PARTS: tuple[tuple[str, str], ...] = (
    ("persistent", "persistent state"),
    ("gather", "all-gather (stage 3)"),
    ("buckets", "buckets"),
    ("activations", "activations"),
    ("overhead", "overhead"),
    ("contingency", "contingency"),
)
WIDTH = 640
LABEL = 70
BAR = 26
GAP = 14
TOP = 10
LABEL_ROOM = 110  # right of the longest bar, for its total


@dataclass(slots=True)
class Segment:
    part: str
    label: str
    bytes: int
    x: int
    width: int
    text: str  # "20.00 GB (20,000,000,000 B)"


@dataclass(slots=True)
class Bar:
    stage: int
    y: int
    total: int
    fits: bool
    segments: tuple[Segment, ...]
    end: int
    text: str  # the total in GB


@dataclass(slots=True)
class PeakChart:
    width: int
    height: int
    label: int
    bar: int
    bars: tuple[Bar, ...]
    capacity_x: int
    capacity: int
    scale_max: int


def peak_chart(ledger: Ledger) -> PeakChart:
    capacity = ledger.scenario.capacity_bytes
    scale_max = max([capacity, *(st.peak.total for st in ledger.stages)])
    span = WIDTH - LABEL - LABEL_ROOM
    bars = []
    for i, st in enumerate(ledger.stages):
        x = LABEL
        cumulative = 0
        segments = []
        for part, label in PARTS:
            size = getattr(st.peak, part)
            start = LABEL + cumulative * span // scale_max
            cumulative += size
            end = LABEL + cumulative * span // scale_max
            if size:
                segments.append(
                    Segment(part, label, size, start, max(end - start, 1), f"{gb(size)} ({integer(size)} B)")
                )
            x = end
        bars.append(
            Bar(st.stage, TOP + i * (BAR + GAP), st.peak.total, st.peak.fits, tuple(segments), x, gb(st.peak.total))
        )
    height = TOP + len(bars) * (BAR + GAP) + 10
    return PeakChart(WIDTH, height, LABEL, BAR, tuple(bars), LABEL + capacity * span // scale_max, capacity, scale_max)
