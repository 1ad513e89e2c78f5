"""What ``partials/_trace.html`` shows for one scenario: why it cannot be traced here, or its trace job
(none yet, queued, running, failed, finished), and for a finished trace each modelled instant beside
the traced total. Built whenever the sections below the peak are rendered, so it stays cheap: the torch
check and the scenario's traceability are cached, and the job is one primary-key lookup in the store (and, while
it is on the queue, a few reads there).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from functools import cache, lru_cache
from typing import Any

from app.ledger.scenario import Scenario, ScenarioError
from app.trace import INSTALL_HINT, torch_installed
from app.trace.jobs import TraceQueue
from app.trace.process import STEPS
from app.trace.runner import scenario_flags, scenario_of
from app.trace.setup import FSDP2_LAYOUT, TraceSetupError, trace_setup
from app.trace.store import JobStatus

INSTALL_COMMAND = "pip install -e '.[trace]'"


@cache
def trace_available() -> bool:
    """Whether this server can trace: torch importable, asked once per process (the extra is installed
    or not for the life of the server)."""
    return torch_installed()


@lru_cache(maxsize=256)
def _checked(scenario: Scenario) -> tuple[tuple[str, ...], str]:
    """(why the scenario cannot be traced, or nothing; the command that traces it in a terminal)."""
    command = shlex.join(["zero3-lab", "trace", *scenario_flags(scenario)])
    try:
        trace_setup(scenario)
    except TraceSetupError as exc:
        return exc.problems, command
    return (), command


def percent(part: int, whole: int) -> str:
    """``part`` as a signed percentage of ``whole``, one decimal (as the trace's report writes it)."""
    return "n/a" if whole == 0 else f"{part * 100 / whole:+.1f} %"


@dataclass(frozen=True, slots=True)
class InstantRow:
    """One modelled instant beside the highest traced total over its stretch of the step (None: the
    trace has no instant there)."""

    instant: str
    modelled: int
    traced: int | None
    peak: bool  # the modelled peak's instant

    @property
    def difference(self) -> int | None:
        return None if self.traced is None else self.modelled - self.traced

    @property
    def percent(self) -> str:
        return "" if self.traced is None else percent(self.modelled - self.traced, self.traced)


@dataclass(frozen=True, slots=True)
class TracePanel:
    query: str  # the scenario's canonical query: the job's key
    available: bool  # the trace extra is installed
    problems: tuple[str, ...]  # why this scenario cannot be traced as FSDP2
    command: str  # the same trace in a terminal
    status: JobStatus | None  # None: not traced yet (or its worker is gone)
    notice: str | None = None  # a refusal that is not the job's (the queue is full)
    focus: bool = False  # the answer to the button: the job's status takes the focus
    retry_in: int = 0  # a failed trace: seconds before it may be run again (0: now)

    install_command: str = INSTALL_COMMAND
    install_hint: str = INSTALL_HINT
    fsdp2_layout: str = FSDP2_LAYOUT
    steps: int = STEPS

    @property
    def q(self) -> str:
        """The query, ready to follow a path."""
        return "?" + self.query if self.query else ""

    @property
    def seen(self) -> str:
        """What the page shows of an active job; a poll that finds it unchanged gets no new markup."""
        s = self.status
        return "" if s is None else f"{s.state}:{s.place}:{s.done}"

    @property
    def summary(self) -> dict[str, Any]:
        assert self.status is not None and self.status.summary is not None
        return self.status.summary

    @property
    def rows(self) -> list[InstantRow]:
        s = self.summary
        return [
            InstantRow(i["instant"], i["modelled"], i["traced"], i["instant"] == s["modelled_peak_instant"])
            for i in s["instants"]
        ]

    @property
    def collectives(self) -> list[InstantRow]:
        """Each kind of collective's buffer bytes in the step: the lab's stage-3 terms beside the trace's."""
        return [InstantRow(c["kind"], c["lab"], c["traced"], False) for c in self.summary.get("collectives", [])]

    @property
    def peak_difference(self) -> int:
        s = self.summary
        return int(s["modelled_peak"]) - int(s["traced_peak"])

    @property
    def peak_percent(self) -> str:
        return percent(self.peak_difference, int(self.summary["traced_peak"]))


def trace_panel(
    query: str,
    queue: TraceQueue | None,
    *,
    scenario: Scenario | None = None,
    notice: str | None = None,
    focus: bool = False,
    look: bool = False,
) -> TracePanel:
    """The panel of ``query`` (a canonical query), whose scenario the caller may already hold (the page
    does: then it is not parsed again). ``queue`` None: no app to ask (a template rendered outside one), so
    no job is looked up; ``look``: see :meth:`TraceQueue.status` (the trace's own routes look, a page does not)."""
    if not trace_available():
        return TracePanel(query, False, (), "", None)
    try:
        problems, command = _checked(scenario if scenario is not None else scenario_of(query))
    except ScenarioError as exc:  # a canonical query always parses; kept for direct callers
        problems, command = (str(exc),), ""
    status = None if problems or queue is None else queue.status(query, look=look)
    wait = 0.0 if queue is None else queue.retry_in(status)
    retry_in = int(wait) + 1 if wait > 0 else 0
    return TracePanel(query, True, problems, command, status, notice, focus, retry_in)
