"""Server-rendered SVG charts (integer geometry): the training peak per stage, and the fit
finder's curve of per-rank peak against D. Each has a table twin with the same numbers."""

from __future__ import annotations

from typing import NamedTuple

from app.ledger.fit import CURVE_DPS
from app.ledger.ledger import Ledger
from app.ledger.rules import STAGES
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


class StagePeak(NamedTuple):
    """One stage's peak, formatted once for the chart and its table twin."""

    stage: int
    fits: bool
    values: tuple[int, ...]  # PEAK_PARTS: the six parts, then the total
    gb: list[str]
    exact: list[str]  # "20,000,000,000"


PEAK_PARTS: tuple[str, ...] = (*(part for part, _ in PARTS), "total")


def stage_peaks(ledger: Ledger) -> list[StagePeak]:
    out = []
    for st in ledger.stages:
        p = st.peak
        values = (p.persistent, p.gather, p.buckets, p.activations, p.overhead, p.contingency, p.total)
        out.append(StagePeak(st.stage, p.fits, values, [gb(v) for v in values], [integer(v) for v in values]))
    return out


# Per (row, part): a segment's markup between its width and its figures, which never changes.
_SEGMENT_TAILS: tuple[tuple[str, ...], ...] = tuple(
    tuple(f'" height="{BAR}" class="seg {part}"><title>stage {stage} {label}: ' for part, label in PARTS)
    for stage in STAGES
)


def peak_chart(peaks: list[StagePeak], capacity: int, capacity_gb: str) -> str:
    """Stacked bars, one per stage, with the capacity as a vertical line."""
    scale_max = max(capacity, *(sp.values[6] for sp in peaks))
    span = WIDTH - LABEL - LABEL_ROOM
    height = TOP + len(peaks) * (BAR + GAP) + 10
    desc = "".join(f"Stage {sp.stage}: {sp.gb[6]}, {'fits' if sp.fits else 'does not fit'}. " for sp in peaks)
    out = [
        f'<svg role="img" aria-labelledby="peak-title peak-desc" viewBox="0 0 {WIDTH} {height}" width="100%"'
        ' preserveAspectRatio="xMinYMin meet">\n'
        '<title id="peak-title">Training peak per stage, stacked by part, against a capacity of'
        f" {capacity_gb}</title>\n"
        f'<desc id="peak-desc">{desc}The table below holds the same numbers.</desc>\n'
    ]
    for i, (stage, fits, values, gbs, exact) in enumerate(peaks):
        y = TOP + i * (BAR + GAP)
        out.append(f'<text x="4" y="{y + 17}" class="axis">stage {stage}</text>\n')
        tails = _SEGMENT_TAILS[stage]
        cumulative = 0
        end = LABEL
        for index in range(len(PARTS)):
            size = values[index]
            start = LABEL + cumulative * span // scale_max
            cumulative += size
            end = LABEL + cumulative * span // scale_max
            if size:
                out.append(
                    f'<rect x="{start}" y="{y}" width="{max(end - start, 1)}{tails[index]}{gbs[index]} '
                    f"({exact[index]} B)</title></rect>\n"
                )
        verdict, mark = ("ok", "") if fits else ("bad", " &#10007;")
        out.append(f'<text x="{end + 4}" y="{y + 17}" class="total {verdict}">{gbs[6]}{mark}</text>\n')
    x = LABEL + capacity * span // scale_max
    out.append(
        f'<line x1="{x}" x2="{x}" y1="2" y2="{height - 4}" class="capacity"><title>capacity {capacity_gb}'
        f" ({capacity:,} B)</title></line>\n</svg>\n"
    )
    return "".join(out)


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


def _x_axis(dps: tuple[int, ...]) -> tuple[str, str]:
    """A ``%`` format for a polyline's points with each x filled in ("78,%d 109,%d …"), and the D
    tick labels."""
    plot_w = FIT_WIDTH - FIT_LEFT - FIT_RIGHT
    last = len(dps) - 1
    xs = [FIT_LEFT + i * plot_w // last for i in range(len(dps))]
    bottom = FIT_HEIGHT - FIT_BOTTOM
    ticks = "".join(
        f'<text x="{xs[i]}" y="{bottom + 14}" class="tick" text-anchor="middle">{dp:,}</text>'
        for i, dp in enumerate(dps)
        if i % 3 == 0 or i == last
    )
    return " ".join(f"{x},%d" for x in xs), ticks


# The same for every chart: the fit finder's curve always probes CURVE_DPS.
_POINTS, _X_TICKS = _x_axis(CURVE_DPS)
_D_RANGE = f"D = {CURVE_DPS[0]:,} to {CURVE_DPS[-1]:,}"


def fit_chart(curve: tuple[tuple[int, tuple[int, ...]], ...], capacity: int, capacity_gb: str) -> str:
    """Per-rank peak against D, both axes log2, one polyline per stage, with the capacity line."""
    plot_h = FIT_HEIGHT - FIT_TOP - FIT_BOTTOM
    columns = tuple(zip(*(peaks for _, peaks in curve), strict=True))  # one per stage
    smallest = min(capacity, *map(min, columns))
    largest = max(capacity, *map(max, columns))
    low, high = log_position(max(smallest, 1)), log_position(largest)
    span = max(high - low, LOG_STEPS)
    assert len(curve) == len(CURVE_DPS), "the x axis is drawn once, for CURVE_DPS"
    points, x_ticks = _POINTS, _X_TICKS

    def y(v: int) -> int:
        return FIT_TOP + (high - log_position(v if v > 1 else 1)) * plot_h // span

    def ys(column: tuple[int, ...]) -> tuple[int, ...]:
        """y of each point: y() with log_position inlined (72 points on every update; a stage
        whose peak does not change with D, such as stage 0, is one point repeated)."""
        if column.count(column[0]) == len(column):
            return (y(column[0]),) * len(column)
        offset, floor_y = high + LOG_STEPS, FIT_TOP + high * plot_h // span
        return tuple(
            [
                FIT_TOP + (offset - LOG_STEPS * (top := v.bit_length() - 1) - ((v << 6) >> top)) * plot_h // span
                if v > 1
                else floor_y
                for v in column
            ]
        )

    bottom, right = FIT_HEIGHT - FIT_BOTTOM, FIT_WIDTH - FIT_RIGHT
    y_ticks = "".join(
        f'<text x="{FIT_LEFT - 4}" y="{y(v) + 4}" class="tick" text-anchor="end">{gb(v)}</text>'
        for v in (largest, smallest)
    )
    curves = "".join(
        f'<polyline points="{points % ys(column)}" class="curve stage{stage}"><title>stage {stage}</title></polyline>'
        for stage, column in enumerate(columns)
    )
    cap_y = y(capacity)
    return (
        f'<svg role="img" aria-labelledby="fit-title fit-desc" viewBox="0 0 {FIT_WIDTH} {FIT_HEIGHT}" width="100%"'
        ' preserveAspectRatio="xMinYMin meet">\n'
        '<title id="fit-title">Per-rank peak against the sharding degree D, both axes logarithmic, with the capacity'
        "</title>\n"
        f'<desc id="fit-desc">One line per stage from {_D_RANGE}; the table below the chart holds the numbers.'
        "</desc>\n"
        f'<line x1="{FIT_LEFT}" x2="{right}" y1="{bottom}" y2="{bottom}" class="axis-line"></line>\n'
        f"{x_ticks}\n"
        f'<text x="{(FIT_LEFT + right) // 2}" y="{FIT_HEIGHT - 2}" class="tick" text-anchor="middle">'
        "D (ranks, log scale)</text>\n"
        f"{y_ticks}\n"
        f'<line x1="{FIT_LEFT}" x2="{right}" y1="{cap_y}" y2="{cap_y}" class="capacity"><title>capacity {capacity_gb}'
        "</title></line>\n"
        f"{curves}\n</svg>\n"
    )
