"""The layout search: for a model on a GPU count, the layouts that fit, ranked by their traffic per step.

A layout is D × tp × pp × cp = GPUs, a ZeRO stage (at stage 3 FSDP2's reshard_after_forward too), a recomputation
policy and micro batch × accumulation = the target global batch ÷ D. Every other input is the scenario's own.

Validity is the scenario's: each (D, tp, pp, policy) is read through :func:`app.ledger.scenario.parse_scenario`
and skipped where it refuses (tp not dividing the heads, pp not dividing the layers, …); a tp or pp refused on
its own field is not tried again with another partner. The search adds two rules of its own: D divides the
global batch, and with pp > 1 at least pp micro batches a step (the 1F1B fill the lab's pipeline model assumes).
Context parallelism (cp) is tried where the scenario can take it: 2 × cp dividing the sequence (torch's head-tail
load balancer) and pp = 1 (the lab does not model the two together); the cp ranks share their data-parallel rank's
batch, so the batch splits over D alone.

Fit is the estimate's: the peak of the stage the run uses (:func:`app.ledger.estimate.run_stage_peak`, the ledger's
own), at both ends of a pipeline (:func:`app.ledger.pipeline.other_end`), within the device's capacity less the
scenario's reserve.

Bounded work. For each candidate (layout, policy, stage, reshard) the traffic only falls as the micro batch grows
(fewer micro batches gather and reduce less; the activations' traffic is per sequence), so its traffic at the
largest micro batch allowed (at the first pipeline end) is a lower bound on any row it gives (whose traffic is the
slower end's). Candidates are taken in order of that bound, each searched for its largest micro batch that fits:
one micro batch a step on its own (it accumulates nothing, so its peak can be below two smaller ones'), then by
bisection over the others, whose peak grows with the micro batch (:func:`app.ledger.peak.search.largest`); the
search stops once the table is full and the next bound cannot enter it. At most ``MAX_PROBES`` peaks are
evaluated; past that the answer says it was cut short.
A row whose traffic equals another's of the same (D, tp, pp) is dominated by the one that recomputes less (then
reshards after forward, then peaks lower) and dropped: the time bound ignores compute, and the communication
ledger does not credit reshard_after_forward 0 with the backward all-gathers it saves.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from app.ledger.bounds import ACT_POLICIES, CP, DP, GRAD_ACCUM, MICRO_BATCH, TP
from app.ledger.estimate import run_stage_peak
from app.ledger.layouts.query import LayoutSearchIn, check_base
from app.ledger.layouts.traffic import StepTraffic, slowest_rank, step_traffic
from app.ledger.models.defaults import model_defaults
from app.ledger.peak.search import largest
from app.ledger.pipeline import other_end
from app.ledger.scenario import Scenario, ScenarioError, parse_scenario
from app.ledger.scenario.presets import DEVICE_BY_ID, Links

MAX_PROBES = 3_000  # peak evaluations per search (a 70B model on 512 GPUs needs a few hundred)
# Recomputation's cost, for ties: the less recomputed first.
POLICY_COST: dict[str, int] = {"none": 0, "selective": 1, "op": 2, "full": 3}
# The inputs each candidate sets; the scenario's own values of them are not carried over.
SEARCHED = frozenset({"dp", "tp", "pp", "cp", "pp_stage", "stage", "reshard_after_forward", "act_policy", "micro_batch",
                      "grad_accum", "capacity_bytes", "name"})  # fmt: skip
# Fields whose rules read D or the micro batch: refused at the base's defaults, they may hold at a layout's.
_LAYOUT_BOUND = SEARCHED | {"ep", "shard_group", "hpz"}
_LAYOUT_FIELDS = frozenset({"tp", "pp", "cp"})  # a refusal naming one of these holds whatever its partners


@dataclass(frozen=True, slots=True)
class Row:
    """One layout that fits: its scenario (whose canonical link opens it), peak and traffic."""

    scenario: Scenario
    peak: int  # the busier pipeline end's, at the stage run
    traffic: StepTraffic  # the slowest rank's: with a pipeline, the end whose traffic ranks worse

    @property
    def headroom(self) -> int:
        return self.scenario.allocatable_bytes - self.peak


@dataclass(frozen=True, slots=True)
class LayoutSearch:
    query: LayoutSearchIn
    links: Links
    rows: tuple[Row, ...]
    layouts: int  # (D, tp, pp) with D × tp × pp = GPUs that the scenario accepts and the batch splits over
    refused: int  # (D, tp, pp) the batch does not split over, or with no policy the scenario accepts
    policies_refused: (
        int  # (D, tp, pp, policy) of accepted layouts the scenario refused (op on a model it does not fit)
    )
    candidates: int  # (layout, policy, stage, reshard) searched or pruned
    searched: int  # of them, searched for a micro batch that fits
    fitting: int  # of those, with a micro batch that fits
    dominated: int  # rows dropped for a row with the same traffic and less recomputation
    probes: int  # peaks evaluated
    cut_short: bool  # MAX_PROBES reached before the bound closed the search

    @property
    def pruned(self) -> int:
        """Candidates never searched: their least traffic could not enter the table (or the probes ran out)."""
        return self.candidates - self.searched


def divisors(n: int) -> list[int]:
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return sorted({*small, *(n // d for d in small)})


@dataclass(slots=True)
class _Candidate:
    base: Scenario  # the (D, tp, pp, policy) scenario as parsed, at the smallest micro batch
    stage: int
    reshard: int
    micro_batches: list[int]  # allowed, ascending
    bound: tuple[int, int]  # the ranking key at the largest: a lower bound on the candidate's rows'


class _Search:
    def __init__(self, base: Scenario, q: LayoutSearchIn) -> None:
        self.q = q
        device = DEVICE_BY_ID[q.device]
        assert device.links is not None
        self.links = device.links
        typed = {k: v for k, v in base.non_default_items() if k not in SEARCHED}
        self.typed: dict[str, object] = {**typed, "capacity_bytes": device.capacity_bytes}
        self.probes = 0
        self.seq_len = base.seq_len  # not searched: what cp must split
        self.check_typed()

    def check_typed(self) -> None:
        """The scenario's own inputs on the device: a refusal that no layout can lift (a reserve above the
        device's capacity, a sequence beyond the model's positions …) is the answer, naming its field."""
        try:
            parse_scenario(self.typed)
        except ScenarioError as exc:
            kept = [e for e in exc.errors if e.field not in _LAYOUT_BOUND]
            if kept:
                raise ScenarioError(kept) from None

    def key(self, t: StepTraffic) -> tuple[int, int]:
        return (t.bytes, t.lower_bound_ns) if self.q.rank == "bytes" else (t.lower_bound_ns, t.bytes)

    def parse(self, **values: int | str) -> Scenario:
        return parse_scenario({**self.typed, **values})

    def at(self, c: _Candidate, b: int, *, activations: bool = True) -> Scenario:
        """The candidate at micro batch ``b`` (the accumulation making up the batch), its activations modelled."""
        s = c.base
        changes: dict[str, int | str] = {"stage": c.stage, "reshard_after_forward": c.reshard, "micro_batch": b,
                                         "grad_accum": s.micro_batch * s.grad_accum // b}  # fmt: skip
        if activations:
            changes["activation_bytes"] = model_defaults(
                s.model_query()._replace(micro_batch=b)
            ).activations.total_bytes
        return s.with_(**changes)

    def peaks(self, s: Scenario) -> tuple[int, int] | None:
        """The peaks of both pipeline ends (first, last; the same twice with pp = 1); None when this end does not fit
        (the other, a scenario read again, is then not asked) or the other end is refused (its own inputs out of
        bounds)."""
        self.probes += 1
        here = run_stage_peak(s)
        if s.pp == 1:
            return here, here
        if here > s.allocatable_bytes:
            return None
        try:
            there = run_stage_peak(other_end(s))
        except ScenarioError:
            return None
        return (here, there) if s.pp_stage == "first" else (there, here)

    def candidates(self) -> tuple[list[_Candidate], int, int, int]:
        """Every (layout, policy, stage, reshard) the scenario accepts, with its bound; the layouts accepted and
        refused, and the policies refused on accepted layouts."""
        q, out, layouts, refused, policies_refused = self.q, [], 0, 0, 0
        bad: set[tuple[str, int]] = set()
        for tp, pp, cp in self.layouts():
            dp = q.gpus // (tp * pp * cp)
            per_rank, rest = divmod(q.global_batch, dp)
            bs = [b for b in divisors(per_rank) if b <= MICRO_BATCH[1] and pp <= per_rank // b <= GRAD_ACCUM[1]]
            if rest or not bs or dp > DP[1] or ("tp", tp) in bad or ("pp", pp) in bad or ("cp", cp) in bad:
                refused += 1
                continue
            accepted = refused_here = 0
            for policy in ACT_POLICIES:
                try:
                    base = self.parse(dp=dp, tp=tp, pp=pp, cp=cp, act_policy=policy, stage=3, micro_batch=bs[0],
                                      grad_accum=per_rank // bs[0])  # fmt: skip
                except ScenarioError as exc:
                    fields = {e.field for e in exc.errors}
                    if fields <= _LAYOUT_FIELDS:
                        bad.update((f, {"tp": tp, "pp": pp, "cp": cp}[f]) for f in fields)
                        break
                    refused_here += 1
                    continue
                accepted += 1
                for stage, reshard in ((0, 1), (1, 1), (2, 1), (3, 1), (3, 0)):
                    c = _Candidate(base, stage, reshard, bs, (0, 0))
                    c.bound = self.key(step_traffic(self.at(c, bs[-1], activations=False), self.links))
                    out.append(c)
            if accepted:
                layouts, policies_refused = layouts + 1, policies_refused + refused_here
            else:
                refused += 1
        return out, layouts, refused, policies_refused

    def layouts(self) -> list[tuple[int, int, int]]:
        """(tp, pp, cp) whose product divides the GPUs: cp only with pp = 1 and 2 × cp dividing the sequence (the
        scenario's own rules, :func:`app.ledger.scenario.across`, checked here so that no layout is parsed in vain)."""
        gpus = self.q.gpus
        out = []
        for tp in (t for t in divisors(gpus) if t <= TP[1]):
            for pp in divisors(gpus // tp):
                out.append((tp, pp, 1))
                if pp == 1:
                    rest = gpus // tp
                    out.extend((tp, 1, cp) for cp in divisors(rest) if 1 < cp <= CP[1] and self.seq_len % (2 * cp) == 0)
        return out

    def largest_fitting(self, c: _Candidate) -> tuple[Scenario, tuple[int, int]] | None:
        """The candidate at its largest micro batch that fits, with both ends' peaks; None when none fits."""
        found: dict[int, tuple[int, int] | None] = {}

        def fits(i: int) -> bool:
            s = self.at(c, c.micro_batches[i])
            found[i] = self.peaks(s)
            peaks = found[i]
            return peaks is not None and max(peaks) <= s.allocatable_bytes

        # One micro batch a step holds nothing across micro batches (no accumulated or unsynced gradient, no unit
        # kept gathered): its peak can be below two smaller ones', so it is tried on its own, first (its traffic is
        # the least); among the others the accumulation's terms are the same and the peak grows with the micro batch.
        last = len(c.micro_batches) - 1
        one_micro_batch = c.base.micro_batch * c.base.grad_accum == c.micro_batches[last]
        high = last - 1 if one_micro_batch else last  # the largest micro batch of several a step
        if one_micro_batch and fits(last):
            i: int | None = last
        else:
            i = largest(fits, 0, high) if high >= 0 else None
        if i is None:
            return None
        peaks = found[i]
        assert peaks is not None
        return self.at(c, c.micro_batches[i]), peaks

    def row(self, probe: Scenario, peaks: tuple[int, int]) -> Row | None:
        """The row for a probe that fits: the scenario read again from its inputs (so that its link is canonical),
        budgeting the busier end of a pipeline."""
        end = "first" if peaks[0] >= peaks[1] else "last"
        try:
            s = self.parse(dp=probe.dp, tp=probe.tp, pp=probe.pp, cp=probe.cp, act_policy=probe.act_policy,
                           stage=probe.stage,
                           reshard_after_forward=probe.reshard_after_forward, micro_batch=probe.micro_batch,
                           grad_accum=probe.grad_accum, pp_stage=end)  # fmt: skip
        except ScenarioError:
            return None
        return Row(s, max(peaks), slowest_rank(s, self.links, self.key))

    def run(self) -> LayoutSearch:
        q = self.q
        cands, layouts, refused, policies_refused = self.candidates()
        cands.sort(key=lambda c: (c.bound, POLICY_COST[c.base.act_policy], -c.reshard))
        # A row's shape (layout and traffic) → the best row of that shape and its sort key: another of the same
        # shape differs only in stage, recomputation, reshard or micro batch, and the better one is kept.
        best: dict[tuple[int, ...], tuple[tuple[int, ...], Row]] = {}
        table: list[tuple[tuple[int, ...], Row]] = []
        searched = fitting = dominated = 0
        cut_short = False
        for c in cands:
            if len(table) >= q.rows and c.bound > table[-1][0][:2]:
                break  # sorted by bound: no later candidate can enter the table
            if self.probes >= MAX_PROBES:
                cut_short = True
                break
            searched += 1
            found = self.largest_fitting(c)
            if found is None:
                continue
            fitting += 1
            row = self.row(*found)
            if row is None:
                continue
            s, t = row.scenario, row.traffic
            key = (*self.key(t), POLICY_COST[s.act_policy], -s.reshard_after_forward, row.peak, s.tp, s.pp, s.cp,
                   s.stage)  # fmt: skip
            shape = (s.dp, s.tp, s.pp, s.cp, t.bytes, t.lower_bound_ns)
            if shape in best:
                dominated += 1
                if key > best[shape][0]:
                    continue
            best[shape] = (key, row)
            table = sorted(best.values(), key=lambda r: r[0])[: q.rows]
        return LayoutSearch(q, self.links, tuple(r for _, r in table), layouts, refused, policies_refused, len(cands),
                            searched, fitting, dominated, self.probes, cut_short)  # fmt: skip


def search_layouts(base: Scenario, q: LayoutSearchIn) -> LayoutSearch:
    """The layouts of ``base``'s model on ``q.gpus`` GPUs that fit, best first; raises :class:`ScenarioError`
    naming the field when the scenario cannot start a search (no model, params typed, …)."""
    check_base(base)
    return _Search(base, q).run()
