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


# ---------------------------------------------------------------- the fit finder's curve

FIT_WIDTH = 640
FIT_HEIGHT = 250
FIT_LEFT = 78
FIT_RIGHT = 16
FIT_TOP = 12
FIT_BOTTOM = 34
LOG_STEPS = 64  # sub-steps per doubling on the log axis


def log_position(value: int) -> int:
    """log2(value) in 1/64ths, by linear interpolation between powers of two (integers only)."""
    if value <= 1:
        return 0
    top = value.bit_length() - 1
    return LOG_STEPS * top + ((value << 6) >> top) - LOG_STEPS


@dataclass(slots=True)
class FitCurve:
    stage: int
    points: str  # "x,y x,y …" for a <polyline>


@dataclass(slots=True)
class FitChart:
    width: int
    height: int
    left: int
    top: int
    bottom: int
    right: int
    curves: tuple[FitCurve, ...]
    capacity_y: int
    x_ticks: tuple[tuple[int, str], ...]  # (x, label)
    y_ticks: tuple[tuple[int, str], ...]  # (y, label)


def fit_chart(curve: tuple[tuple[int, tuple[int, ...]], ...], capacity: int) -> FitChart:
    """Per-rank peak against D, both axes log2, one polyline per stage, with the capacity line."""
    plot_w = FIT_WIDTH - FIT_LEFT - FIT_RIGHT
    plot_h = FIT_HEIGHT - FIT_TOP - FIT_BOTTOM
    values = [p for _, peaks in curve for p in peaks] + [capacity]
    low, high = log_position(max(min(values), 1)), log_position(max(values))
    span = max(high - low, LOG_STEPS)
    last = len(curve) - 1

    def x(i: int) -> int:
        return FIT_LEFT + i * plot_w // last

    def y(v: int) -> int:
        return FIT_TOP + (high - log_position(max(v, 1))) * plot_h // span

    curves = tuple(
        FitCurve(stage, " ".join(f"{x(i)},{y(peaks[stage])}" for i, (_, peaks) in enumerate(curve)))
        for stage in range(len(curve[0][1]))
    )
    x_ticks = tuple((x(i), f"{dp:,}") for i, (dp, _) in enumerate(curve) if i % 3 == 0 or i == last)
    y_ticks = ((y(max(values)), gb(max(values))), (y(min(values)), gb(min(values))))
    return FitChart(FIT_WIDTH, FIT_HEIGHT, FIT_LEFT, FIT_TOP, FIT_HEIGHT - FIT_BOTTOM, FIT_WIDTH - FIT_RIGHT,
                    curves, y(capacity), x_ticks, y_ticks)  # fmt: skip
