"""The two charts' geometry, in integers: the training peak per stage (stacked bars) and the fit
finder's curve of per-rank peak against D (log-log). ``templates/macros/charts.html`` draws them as
SVG; each chart has a table twin on the page with the same numbers."""

from __future__ import annotations

from dataclasses import dataclass

from app.ledger.ledger import Ledger
from app.receipts.display import gb

PARTS: tuple[tuple[str, str], ...] = (
    ("persistent", "persistent state"),
    ("gather", "all-gather (stage 3)"),
    ("buckets", "buckets"),
    ("activations", "activations"),
    ("overhead", "overhead"),
    ("contingency", "contingency"),
)
PEAK_PARTS: tuple[str, ...] = (*(part for part, _ in PARTS), "total")

WIDTH = 640
LABEL = 70  # left of the bars, for the stage names
BAR = 26
GAP = 14
TOP = 10
LABEL_ROOM = 110  # right of the longest bar, for its total
TEXT_BASELINE = 17  # a bar's labels sit this far below its top


@dataclass(frozen=True, slots=True)
class Segment:
    """One part of a stage's bar."""

    part: str
    label: str
    x: int
    width: int
    bytes: int


@dataclass(frozen=True, slots=True)
class Bar:
    stage: int
    fits: bool
    y: int
    text_y: int  # baseline of the stage label and the total
    segments: tuple[Segment, ...]  # the nonzero parts, left to right
    total: int
    total_x: int  # where the total's label starts, right of the bar


@dataclass(frozen=True, slots=True)
class PeakChart:
    width: int
    height: int
    bar_height: int
    bars: tuple[Bar, ...]
    capacity: int
    capacity_x: int
    capacity_bottom: int  # the capacity line runs from the top to here


def peak_chart(ledger: Ledger, capacity: int) -> PeakChart:
    """Stacked bars, one per stage, on a scale that holds the largest peak and the capacity."""
    totals = [st.peak.total for st in ledger.stages]
    scale_max = max(capacity, *totals)
    span = WIDTH - LABEL - LABEL_ROOM
    bars = []
    for i, st in enumerate(ledger.stages):
        p = st.peak
        y = TOP + i * (BAR + GAP)
        values = (p.persistent, p.gather, p.buckets, p.activations, p.overhead, p.contingency)
        segments = []
        cumulative = 0
        end = LABEL
        for (part, label), size in zip(PARTS, values, strict=True):
            start = LABEL + cumulative * span // scale_max
            cumulative += size
            end = LABEL + cumulative * span // scale_max
            if size:  # a part too small to see still gets one pixel, which the next part may cover
                segments.append(Segment(part, label, start, max(end - start, 1), size))
        bars.append(Bar(st.stage, p.fits, y, y + TEXT_BASELINE, tuple(segments), p.total, end + 4))
    height = TOP + len(bars) * (BAR + GAP) + 10
    return PeakChart(WIDTH, height, BAR, tuple(bars), capacity, LABEL + capacity * span // scale_max, height - 4)


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


@dataclass(frozen=True, slots=True)
class Tick:
    x: int
    y: int
    label: str


@dataclass(frozen=True, slots=True)
class Curve:
    stage: int
    points: str  # an SVG polyline's points: "x,y x,y …", one per D, left to right


@dataclass(frozen=True, slots=True)
class FitChart:
    width: int
    height: int
    left: int
    right: int
    bottom: int  # y of the x axis
    title_x: int  # the x axis's title, centred under it
    title_y: int
    x_ticks: tuple[Tick, ...]
    y_ticks: tuple[Tick, ...]  # the largest and the smallest value drawn
    curves: tuple[Curve, ...]
    capacity: int
    capacity_y: int
    first_dp: int
    last_dp: int


def fit_chart(curve: tuple[tuple[int, tuple[int, ...]], ...], capacity: int) -> FitChart:
    """Per-rank peak against D, both axes log2, one polyline per stage, with the capacity line."""
    dps = [dp for dp, _ in curve]
    columns = list(zip(*(peaks for _, peaks in curve), strict=True))  # one per stage
    smallest = min(capacity, *map(min, columns))
    largest = max(capacity, *map(max, columns))
    plot_w = FIT_WIDTH - FIT_LEFT - FIT_RIGHT
    plot_h = FIT_HEIGHT - FIT_TOP - FIT_BOTTOM
    high = log_position(largest)
    span = max(high - log_position(max(smallest, 1)), LOG_STEPS)

    def y(v: int) -> int:
        return FIT_TOP + (high - log_position(v)) * plot_h // span

    last = len(dps) - 1
    xs = [FIT_LEFT + i * plot_w // last for i in range(len(dps))]
    bottom = FIT_HEIGHT - FIT_BOTTOM
    x_ticks = tuple(Tick(xs[i], bottom + 14, f"{dp:,}") for i, dp in enumerate(dps) if i % 3 == 0 or i == last)
    y_ticks = tuple(Tick(FIT_LEFT - 4, y(v) + 4, gb(v)) for v in (largest, smallest))
    curves = tuple(
        Curve(stage, " ".join(f"{x},{y(v)}" for x, v in zip(xs, column, strict=True)))
        for stage, column in enumerate(columns)
    )
    return FitChart(
        width=FIT_WIDTH,
        height=FIT_HEIGHT,
        left=FIT_LEFT,
        right=FIT_WIDTH - FIT_RIGHT,
        bottom=bottom,
        title_x=(FIT_LEFT + FIT_WIDTH - FIT_RIGHT) // 2,
        title_y=FIT_HEIGHT - 2,
        x_ticks=x_ticks,
        y_ticks=y_ticks,
        curves=curves,
        capacity=capacity,
        capacity_y=y(capacity),
        first_dp=dps[0],
        last_dp=dps[-1],
    )
