"""The workshop's simulated attendees, as locust users, and a locust run as a library call.

Importing this module imports locust, which monkey-patches the process for gevent: only
``workshop.py`` imports it, after checking that locust is installed.
"""

from __future__ import annotations

import itertools
import random
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar
from urllib.parse import urlencode

from locust import FastHttpUser, between, constant  # the bench extra; typed as Any (pyproject's mypy override)
from locust.env import Environment

from tests.bench import _scenarios

# What Chromium sends: htmx's request headers for the scenario form (hx-target="#results").
BROWSER = {"Accept-Encoding": "gzip, deflate, br, zstd", "User-Agent": "zero3-lab workshop bench"}
HTMX = {**BROWSER, "HX-Request": "true", "HX-Target": "results", "HX-Trigger": "scenario"}
# The page's own assets, as the browser finds them: <link href> and <script src> with a ?v= version.
ASSET = re.compile(r'<(?:link|script)\b[^>]*?\b(?:href|src)="(/static/[^"]+\?v=[^"]+)"')
KINDS = ("page", "asset", "fragment")
_seeds = itertools.count(1)


def fragment_failure(status: int, body: str, query: str, watching_lower: bool) -> str | None:
    """Why a live update's answer is not what the page swaps in; None when it is."""
    if status != 200:
        return f"fragment: status {status}"
    if 'id="results"' not in body:
        return "fragment: no #results section"
    if 'role="alert"' in body:
        return f"fragment: the scenario was refused: {query}"
    if watching_lower and 'class="fit-chart"' not in body:
        return "fragment: the fit finder on screen did not come inline"
    return None


class Attendee(FastHttpUser):  # type: ignore[misc]  # locust's classes are Any to mypy
    """Loads the page once (GET / and its versioned assets, cold cache), then edits one field every
    1–3 s; each edit is the htmx request the form makes: GET /?<every field> with HX-Request.

    A live update brings the sections below the peak inline only when the page has them on screen
    (it says so: ``X-In-View: lower``), and otherwise defers them until they are scrolled to. A share
    ``scrolled`` of the room (drawn once per attendee) keeps them on screen and sends the header, as the
    page's script does; the others never scroll to them. The kill lists, at the very bottom and deferred
    too, are taken to be off screen for everyone."""

    wait_time = between(1, 3)
    scrolled: ClassVar[float] = 0.25  # set by workshop.py --scrolled

    def on_start(self) -> None:
        self.rng = random.Random(next(_seeds))  # noqa: S311 - scenarios, not secrets
        self.watching_lower = self.rng.random() < self.scrolled
        self.form: dict[str, str] = {}
        with self.client.get("/", name="page", headers=BROWSER, catch_response=True) as response:
            page = response.text or ""
            if response.status_code != 200:
                response.failure(f"page: status {response.status_code}")
                return
            try:
                self.form = _scenarios.form_state(page)
            except ValueError as exc:
                response.failure(str(exc))
                return
        assets = ASSET.findall(page)
        if not assets:
            raise RuntimeError("the page links no versioned /static/ asset")
        for url in assets:
            with self.client.get(url, name="asset", headers=BROWSER, catch_response=True) as response:
                if response.status_code != 200:
                    response.failure(f"{url}: status {response.status_code}")
        self.current = "/"
        self.reading()

    def reading(self) -> None:
        """A pause before the first edit, as after every one (the page is read, then a field changed)."""
        time.sleep(self.wait_time())

    def change_a_field(self) -> None:
        if not self.form:
            return  # the page failed to load: already counted
        _scenarios.edit(self.rng, self.form)
        query = "/?" + urlencode(self.form)
        headers = {**HTMX, "HX-Current-URL": self.host + self.current}
        if self.watching_lower:
            headers["X-In-View"] = "lower"
        with self.client.get(query, name="fragment", headers=headers, catch_response=True) as response:
            failure = fragment_failure(response.status_code, response.text or "", query, self.watching_lower)
            if failure:
                response.failure(failure)
        self.current = query

    tasks: ClassVar[list[Callable[[Attendee], None]]] = [change_a_field]


class SoloClient(Attendee):
    """One client, one fragment request after another (no pause): the solo baseline."""

    wait_time = constant(0)
    scrolled: ClassVar[float] = 0.0  # fragments only: the solo median is a live update's

    def reading(self) -> None:
        pass


@dataclass
class Samples:
    """Every request's response time (ms) and failures, by kind."""

    times: dict[str, list[float]] = field(default_factory=lambda: {k: [] for k in KINDS})
    starts: dict[str, list[float]] = field(default_factory=lambda: {k: [] for k in KINDS})  # epoch s, as times
    failures: dict[str, int] = field(default_factory=lambda: dict.fromkeys(KINDS, 0))
    errors: dict[str, int] = field(default_factory=dict)
    began: float = 0.0  # epoch s

    def since(self, name: str, offset: float) -> list[float]:
        """The response times of requests started at least ``offset`` seconds into the run."""
        return [t for t, start in zip(self.times[name], self.starts[name], strict=True) if start >= self.began + offset]

    def record(self, name: str, response_time: float, exception: Any = None, start_time: float = 0, **_: Any) -> None:
        self.times.setdefault(name, []).append(float(response_time))
        self.starts.setdefault(name, []).append(float(start_time))
        if exception is not None:
            self.failures[name] = self.failures.get(name, 0) + 1
            key = f"{name}: {exception}"[:160]
            self.errors[key] = self.errors.get(key, 0) + 1


def run_users(user: type[Any], base: str, users: int, spawn_rate: float, seconds: float) -> Samples:
    """Run ``users`` of ``user`` against ``base`` for ``seconds`` (spawning ``spawn_rate`` a second)."""
    samples = Samples(began=time.time())
    env = Environment(user_classes=[user], host=base)
    env.events.request.add_listener(samples.record)
    runner = env.create_local_runner()
    runner.start(users, spawn_rate=spawn_rate)
    time.sleep(seconds)  # gevent's sleep: the users run meanwhile
    runner.quit()
    return samples
