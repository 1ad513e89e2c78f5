"""The two charts' geometry, in integers: the training peak per stage (stacked bars) and the fit
finder's curve of per-rank peak against D (log-log). ``templates/macros/charts.html`` draws them as
SVG; each chart has a table twin on the page with the same numbers."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from app.ledger.ledger import Ledger
from app.receipts.display import gb

Anchor = Literal["start", "middle", "end"]  # an SVG text's text-anchor

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
TOP = 26  # above the bars, for the capacity line's label
LABEL_ROOM = 130  # right of the longest bar, for its total (at presenter size)
TEXT_BASELINE = 17  # a bar's labels sit this far below its top
CAPACITY_LABEL_ROOM = 206  # the widest capacity label ("capacity 70,368.74 GB", 2^46 B) at presenter size


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
    capacity_top: int  # the capacity line runs from here (under its label) …
    capacity_bottom: int  # … to here
    capacity_label_x: int  # the label "capacity …" above the bars, beside the line
    capacity_label_y: int
    capacity_label_anchor: Anchor  # right of the line when there is room, else left of it
    parts: tuple[tuple[str, str], ...] = PARTS  # every part that may be drawn, with its label


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
    capacity_x = LABEL + capacity * span // scale_max
    room_right = capacity_x + 4 + CAPACITY_LABEL_ROOM <= WIDTH
    return PeakChart(
        width=WIDTH,
        height=height,
        bar_height=BAR,
        bars=tuple(bars),
        capacity=capacity,
        capacity_x=capacity_x,
        capacity_top=TOP - 6,
        capacity_bottom=height - 4,
        capacity_label_x=capacity_x + 4 if room_right else capacity_x - 4,
        capacity_label_y=TOP - 10,
        capacity_label_anchor="start" if room_right else "end",
    )


FIT_WIDTH = 640
FIT_HEIGHT = 260
FIT_LEFT = 104  # room for the y ticks' labels ("1,234,567 GB"), at presenter size
FIT_RIGHT = 34  # room for half the last x label ("131,072"), at presenter size
FIT_TOP = 24  # above the plot, for the current D's label
FIT_BOTTOM = 34
LOG_STEPS = 64  # sub-steps per doubling on the log axis
TICK_GAP = 18  # the least vertical distance between two y ticks' labels
LABEL_HALF = 30  # half the current D's label, kept inside the plot
ROUND_UNIT = 10**7  # round ticks are whole hundredths of a GB, so their labels are exact


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
class Dot:
    """A stage's peak at the current D, on the marker."""

    stage: int
    y: int
    bytes: int


@dataclass(frozen=True, slots=True)
class FitChart:
    width: int
    height: int
    left: int
    right: int
    top: int  # y of the plot's top edge
    bottom: int  # y of the x axis
    title_x: int  # the x axis's title, centred under it
    title_y: int
    x_ticks: tuple[Tick, ...]
    y_ticks: tuple[Tick, ...]  # round values (1, 2, 5 × 10^k B) and, where there is room, the extremes
    curves: tuple[Curve, ...]
    capacity: int
    capacity_y: int
    capacity_label_x: int  # above the capacity line, at the end away from the current D's marker
    capacity_label_anchor: Anchor
    first_dp: int
    last_dp: int
    dp: int  # the current D, marked by a vertical line with its label above the plot
    dp_x: int
    dp_label_x: int
    dots: tuple[Dot, ...]  # each stage's peak at the current D


def _round_values(low: int, high: int, mantissas: tuple[int, ...]) -> list[int]:
    """Every mantissa/10 × 10^k bytes within [low, high], ascending (mantissas in tenths)."""
    out: list[int] = []
    power = 1
    while power <= high:
        out.extend(m * power for m in mantissas if m * power % 10 == 0 and low <= m * power // 10 <= high)
        power *= 10
    return sorted({v // 10 for v in out})


def _tick_label(value: int) -> str:
    """A y tick's label, as short as it reads: a round value without its zero decimals ("100 GB",
    not "100.00 GB"), and from 1,000 GB on whole GB ("368,033 GB"); the table has the exact bytes."""
    if value >= 10**12:
        return f"{(2 * value + 10**9) // (2 * 10**9):,} GB"  # rounded half up, like gb()
    return gb(value).replace(".00 GB", " GB")


@dataclass(frozen=True, slots=True)
class _Axes:
    """The fit chart's two log scales, in pixels: bytes up the y axis, D along the x axis."""

    high: int  # the log position of the largest value, at the plot's top
    span: int  # log positions from the plot's top to its bottom (at least one doubling)
    first: int  # the log position of the curve's first D, at the plot's left
    last: int  # ... and of its last D, at the right

    def y(self, v: int) -> int:
        return FIT_TOP + (self.high - log_position(v)) * (FIT_HEIGHT - FIT_TOP - FIT_BOTTOM) // self.span

    def x(self, d: int) -> int:
        """A D's x, clamped to the curve's range (the current D may lie outside it)."""
        clamped = min(max(log_position(d), self.first), self.last)
        return FIT_LEFT + (clamped - self.first) * (FIT_WIDTH - FIT_LEFT - FIT_RIGHT) // max(self.last - self.first, 1)


def fit_chart(
    curve: tuple[tuple[int, tuple[int, ...]], ...], capacity: int, dp: int, peaks: tuple[int, ...]
) -> FitChart:
    """Per-rank peak against D, both axes log2, one polyline per stage, with the capacity line and
    a marker at the current D (``dp``) with each stage's peak there (``peaks``)."""
    dps = [d for d, _ in curve]
    columns = list(zip(*(stage_peaks for _, stage_peaks in curve), strict=True))  # one per stage
    smallest = min(capacity, *map(min, columns), *peaks)
    largest = max(capacity, *map(max, columns), *peaks)
    high = log_position(largest)
    axes = _Axes(
        high, max(high - log_position(max(smallest, 1)), LOG_STEPS), log_position(dps[0]), log_position(dps[-1])
    )
    x, y = axes.x, axes.y
    xs = [x(d) for d in dps]
    bottom = FIT_HEIGHT - FIT_BOTTOM
    last = len(dps) - 1
    x_ticks = tuple(Tick(xs[i], bottom + 14, f"{dps[i]:,}") for i in _x_tick_indices(last))
    y_ticks = _y_ticks(smallest, largest, y)
    curves = tuple(
        Curve(stage, " ".join(f"{px},{y(v)}" for px, v in zip(xs, column, strict=True)))
        for stage, column in enumerate(columns)
    )
    right = FIT_WIDTH - FIT_RIGHT
    dp_x = x(dp)
    d_on_the_right = dp_x * 2 > FIT_LEFT + right
    return FitChart(
        width=FIT_WIDTH,
        height=FIT_HEIGHT,
        left=FIT_LEFT,
        right=right,
        top=FIT_TOP,
        bottom=bottom,
        title_x=(FIT_LEFT + right) // 2,
        title_y=FIT_HEIGHT - 2,
        x_ticks=x_ticks,
        y_ticks=y_ticks,
        curves=curves,
        capacity=capacity,
        capacity_y=y(capacity),
        capacity_label_x=FIT_LEFT + 4 if d_on_the_right else right - 4,
        capacity_label_anchor="start" if d_on_the_right else "end",
        first_dp=dps[0],
        last_dp=dps[-1],
        dp=dp,
        dp_x=dp_x,
        dp_label_x=min(max(dp_x, FIT_LEFT + LABEL_HALF), right - LABEL_HALF),
        dots=tuple(Dot(stage, y(v), v) for stage, v in enumerate(peaks)),
    )


def _x_tick_indices(last: int) -> list[int]:
    """Every third D counted back from the last (so the last is labelled and its neighbours are
    not too close), and the first when it is two or more steps from the next one labelled."""
    indices = list(range(last % 3, last + 1, 3))
    if indices[0] >= 2:
        indices.insert(0, 0)
    return indices


def _spaced(values: list[int], y: Callable[[int], int]) -> list[int]:
    """From the largest down, the values whose labels stay ``TICK_GAP`` apart."""
    kept: list[int] = []
    for v in sorted(values, reverse=True):
        if not kept or y(v) - y(kept[-1]) >= TICK_GAP:
            kept.append(v)
    return kept


def _y_ticks(smallest: int, largest: int, y: Callable[[int], int]) -> tuple[Tick, ...]:
    """Round values (1, 2, 5 × 10^k B, or finer steps when fewer than three fit), each an exact number of
    hundredths of a GB, then the largest and smallest values drawn wherever their labels fit."""
    low = max(smallest, 1)
    bottom = FIT_HEIGHT - FIT_BOTTOM
    values: list[int] = []
    for mantissas in ((10, 20, 50), (10, 15, 20, 30, 50, 70), (10, 12, 15, 20, 25, 30, 40, 50, 60, 70, 80, 90)):
        # down to a quarter of the largest: a flat chart's plot still spans a doubling below it
        rounds = _round_values(min(low, largest >> 2) or 1, largest, mantissas)
        values = _spaced([v for v in rounds if v % ROUND_UNIT == 0 and y(v) <= bottom], y)
        if len(values) >= 3:
            break
    labels = {v: _tick_label(v) for v in values}
    for extreme in (largest, low):
        if extreme not in labels and all(abs(y(extreme) - y(v)) >= TICK_GAP for v in labels):
            labels[extreme] = _tick_label(extreme)
    return tuple(Tick(FIT_LEFT - 4, y(v) + 4, labels[v]) for v in sorted(labels, reverse=True))
