"""The layout search's answer as the API's JSON (with its models, for ``/openapi.json``), the terminal table and CSV:
one row per layout, exact integers; formatted figures only in the table."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from typing import Literal

from pydantic import Field

from app.ledger.layouts import LayoutSearch, Row
from app.ledger.layouts.search import MAX_PROBES
from app.ledger.scenario import Scenario
from app.ledger.scenario.links import canonical_query, link
from app.ledger.scenario.presets import DEVICE_BY_ID
from app.receipts.display import gb, gib
from app.receipts.strict import Bytes, Count, SignedBytes, Strict
from app.receipts.url import DEFAULT_BASE_URL

PATH = "/layouts"
LOWER_BOUND = (
    "a lower bound: the busier link's bytes per rank ÷ its bandwidth per direction, ring collectives at the slowest "
    "link each crosses (intra-node or the network); it ignores latency, compute (recomputation included), "
    "imperfect overlap, congestion and in-network reduction; a real step takes longer"
)
COUNTED = (
    "communication per rank per optimizer step: the ZeRO / FSDP collectives of the communication ledger, tensor "
    "parallelism's activation all-reduces of the decoder layers, the pipeline's boundary sends and context "
    "parallelism's ring K/V all-gathers and dK/dV passes; ep is the scenario's (1 unless typed)"
)


class LinksOut(Strict):
    intra_node_bytes_per_s: Count = Field(description="per GPU, each direction")
    inter_node_bytes_per_s: Count = Field(description="per GPU, each direction")
    source: str


class DeviceOut(Strict):
    id: str
    title: str
    capacity_bytes: Bytes
    links: LinksOut


class SearchOut(Strict):
    layouts: Count = Field(description="(D, tp, pp, cp) the scenario accepts and the global batch splits over")
    refused: Count = Field(description="(D, tp, pp, cp) the batch does not split over, or with no policy accepted")
    policies_refused: Count = Field(description="(D, tp, pp, cp, policy) of accepted layouts the scenario refused")
    candidates: Count = Field(description="(layout, policy, stage, reshard) in the space")
    searched: Count = Field(description="candidates searched for their largest micro batch that fits")
    pruned: Count = Field(description="candidates never searched: their least traffic could not enter the table")
    fitting: Count
    dominated: Count = Field(description="rows dropped for one of the same layout and traffic that recomputes less")
    probes: Count = Field(description="peaks evaluated")
    max_probes: Count
    cut_short: bool = Field(description="the probes ran out before the bound closed the search")


class LayoutRowOut(Strict):
    rank: int = Field(ge=1)
    dp: int
    tp: int
    pp: int
    cp: int = Field(default=1, description="context-parallel ranks (world = dp × tp × pp × cp)")
    ep: int
    stage: int = Field(ge=0, le=3)
    reshard_after_forward: int = Field(ge=0, le=1)
    act_policy: str
    micro_batch: int
    grad_accum: int
    pp_stage: str = Field(description="the pipeline end budgeted: the busier one")
    peak_bytes: Bytes = Field(description="the busier pipeline end's peak at the stage run")
    allocatable_bytes: Bytes = Field(description="the device's capacity less the scenario's reserve")
    headroom_bytes: SignedBytes
    communication_bytes: Bytes = Field(description="sent per rank per optimizer step")
    intra_node_bytes: Bytes
    inter_node_bytes: Bytes
    lower_bound_ns: Count = Field(description="the lower-bound time of that communication, in nanoseconds")
    link: str = Field(description="the scenario's canonical query string")
    url: str


class LayoutsOut(Strict):
    scenario: str = Field(description="the canonical query string the search started from")
    gpus: int
    global_batch: int
    rank: Literal["bytes", "time"]
    device: DeviceOut
    counted: str
    lower_bound: str
    search: SearchOut
    rows: list[LayoutRowOut]


def _row(i: int, row: Row, base_url: str) -> LayoutRowOut:
    s, t = row.scenario, row.traffic
    inter = sum(p.bytes for p in t.parts if p.across_nodes)
    return LayoutRowOut(
        rank=i, dp=s.dp, tp=s.tp, pp=s.pp, cp=s.cp, ep=s.ep, stage=s.stage,
        reshard_after_forward=s.reshard_after_forward,
        act_policy=s.act_policy, micro_batch=s.micro_batch, grad_accum=s.grad_accum, pp_stage=s.pp_stage,
        peak_bytes=row.peak, allocatable_bytes=s.allocatable_bytes, headroom_bytes=row.headroom,
        communication_bytes=t.bytes, intra_node_bytes=t.bytes - inter, inter_node_bytes=inter,
        lower_bound_ns=t.lower_bound_ns, link=canonical_query(s), url=base_url.rstrip("/") + link(s, "/"),
    )  # fmt: skip


def layouts_out(base: Scenario, r: LayoutSearch, base_url: str = DEFAULT_BASE_URL) -> LayoutsOut:
    device = DEVICE_BY_ID[r.query.device]
    return LayoutsOut(
        scenario=canonical_query(base),
        gpus=r.query.gpus,
        global_batch=r.query.global_batch,
        rank=r.query.rank,
        device=DeviceOut(
            id=device.id,
            title=device.title,
            capacity_bytes=device.capacity_bytes,
            links=LinksOut(
                intra_node_bytes_per_s=r.links.intra_node,
                inter_node_bytes_per_s=r.links.inter_node,
                source=r.links.source,
            ),
        ),
        counted=COUNTED,
        lower_bound=LOWER_BOUND,
        search=SearchOut(
            layouts=r.layouts,
            refused=r.refused,
            policies_refused=r.policies_refused,
            candidates=r.candidates,
            searched=r.searched,
            pruned=r.pruned,
            fitting=r.fitting,
            dominated=r.dominated,
            probes=r.probes,
            max_probes=MAX_PROBES,
            cut_short=r.cut_short,
        ),
        rows=[_row(i, row, base_url) for i, row in enumerate(r.rows, 1)],
    )


def milliseconds(ns: int) -> str:
    """Nanoseconds as milliseconds with one decimal, rounded half up in integers."""
    tenths = (ns + 50_000) // 100_000
    return f"{tenths // 10:,}.{tenths % 10} ms"


def both(value: int) -> str:
    """Decimal and binary, never one mistaken for the other: ``36.38 GB / 33.89 GiB``."""
    return f"{gb(value)} / {gib(value)}"


def batch(s: Scenario) -> str:
    return f"{s.micro_batch} × {s.grad_accum}"


def summary(r: LayoutSearch) -> str:
    """How much of the space was searched, in one sentence."""
    policies = (
        f" ({r.policies_refused:,} recomputation policies refused on accepted ones)" if r.policies_refused else ""
    )
    cut = f"; cut short after {MAX_PROBES:,} peaks: later candidates not searched" if r.cut_short else ""
    return (
        f"{r.layouts:,} layouts (D × tp × pp × cp = {r.query.gpus:,}) accepted, {r.refused:,} refused{policies}; "
        f"{r.candidates:,} candidates, {r.searched:,} searched, {r.pruned:,} pruned by the bound, {r.fitting:,} fit, "
        f"{r.dominated:,} dominated; {r.probes:,} peaks evaluated{cut}"
    )


HEADER = (
    "#",
    "D",
    "tp",
    "pp",
    "cp",
    "stage",
    "raf",
    "AC",
    "b × acc",
    "peak",
    "headroom",
    "comm/step",
    "≥ time",
    "link",
)


def table_rows(r: LayoutSearch) -> Iterator[tuple[str, ...]]:
    for i, row in enumerate(r.rows, 1):
        s = row.scenario
        raf = str(s.reshard_after_forward) if s.stage == 3 else "–"
        time = milliseconds(row.traffic.lower_bound_ns)
        yield (str(i), f"{s.dp:,}", str(s.tp), str(s.pp), str(s.cp), str(s.stage), raf, s.act_policy, batch(s),
               both(row.peak), both(row.headroom), both(row.traffic.bytes), time, link(s, "/"))  # fmt: skip


def render_table(base: Scenario, r: LayoutSearch) -> str:
    device = DEVICE_BY_ID[r.query.device]
    cells = [HEADER, *table_rows(r)]
    widths = [max(len(c[i]) for c in cells) for i in range(len(HEADER) - 1)]
    lines = [
        f"Layouts of {base.model} on {r.query.gpus:,} × {device.title}, global batch {r.query.global_batch:,} "
        f"sequences, ranked by {'communication bytes' if r.query.rank == 'bytes' else 'lower-bound time'}",
        f"links: {gb(r.links.intra_node)}/s within a node, {gb(r.links.inter_node)}/s across nodes, per GPU each way "
        f"({r.links.source})",
        f"comm/step: {COUNTED}",
        f"≥ time: {LOWER_BOUND}",
        summary(r),
        "",
    ]
    for c in cells:
        lines.append("  ".join(x.rjust(w) for x, w in zip(c, widths, strict=False)) + "  " + c[-1])
    if not r.rows:
        lines.append("(no layout fits: try more GPUs, another global batch or a larger device)")
    return "\n".join(lines) + "\n"


CSV_COLUMNS: tuple[str, ...] = tuple(LayoutRowOut.model_fields)


def csv_text(base: Scenario, r: LayoutSearch, base_url: str = DEFAULT_BASE_URL) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow(CSV_COLUMNS)
    for row in layouts_out(base, r, base_url).rows:
        writer.writerow([getattr(row, c) for c in CSV_COLUMNS])
    return out.getvalue()
