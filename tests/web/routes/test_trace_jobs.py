"""The page's "Trace this scenario": the panel in the results, the routes that start a trace and poll it
(htmx and without JavaScript), their refusals, the cache, and one real trace end to end.

Each test has its own app and SQLite files; the traces are the fake child of tests/support/trace_fakes.py, run by
huey's consumer (tests/support/trace_queue.py), except in the end-to-end test, which runs ``zero3-lab trace`` itself
on the small config (skipped without the trace extra).
"""

from __future__ import annotations

import json
import re
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import closing
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
from fastapi.testclient import TestClient

from app.ledger.models.reference import compact
from app.ledger.scenario import parse_scenario
from app.ledger.scenario.links import canonical_query
from app.trace import torch_installed
from app.trace.bounded import MAX_REPORT_BYTES
from app.trace.jobs import TraceQueue
from app.trace.runner import cache_version
from app.trace.store import TraceStore
from app.web.app import create_app
from app.web.http.settings import Settings
from app.web.routes.trace_jobs import queue_for
from app.web.views import trace_panel
from tests.support.trace_fakes import open_gate, runs, wait_for
from tests.support.trace_queue import jobs_in, start_consumer, stop_consumer

HX = {"HX-Request": "true"}
POLL = {**HX, "HX-Target": "trace-live"}
SMALL = compact({"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
                 "intermediate_size": 128, "vocab_size": 128})  # fmt: skip
FSDP2 = {"param_bytes": 4, "master_bytes": 0, "grad_bytes": 4, "gather_bytes": 2}
QUERY = canonical_query(parse_scenario({"model": SMALL, "dp": 4, "seq_len": 16, **FSDP2}))
OTHER = canonical_query(parse_scenario({"model": SMALL, "dp": 8, "seq_len": 16, **FSDP2}))
THIRD = canonical_query(parse_scenario({"model": SMALL, "dp": 16, "seq_len": 16, **FSDP2}))

Lab = Callable[..., TestClient]


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[Lab]:
    """``lab(modes, **queue options)``: a client of a fresh app whose queue runs the fake trace."""
    opened: list[TestClient] = []
    with jobs_in(tmp_path) as jobs:

        def make(modes: dict[str, str] | None = None, **options: Any) -> TestClient:
            app = create_app(Settings(trace_cache=tmp_path / "cache" / "traces.sqlite3"))
            store = TraceStore(tmp_path / "cache" / "traces.sqlite3", cache_version())
            app.state.trace_queue = jobs(modes, store=store, **options)  # the test client is one address: no limit
            client = TestClient(app, raise_server_exceptions=False)
            client.__enter__()
            opened.append(client)
            return client

        yield make
        for client in opened:
            client.__exit__(None, None, None)


def queue_of(client: TestClient) -> TraceQueue:
    queue = client.app.state.trace_queue  # type: ignore[attr-defined]
    assert isinstance(queue, TraceQueue)
    return queue


def store_of(client: TestClient) -> TraceStore:
    return queue_of(client).store


def state(client: TestClient, query: str = QUERY) -> str | None:
    status = queue_of(client).status(query)
    return None if status is None else status.state


def poll_until_done(client: TestClient, query: str = QUERY, timeout: float = 15) -> Any:
    """Poll as the page's status region does, until the answer that stops the polling (286)."""
    seen = ""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        r = client.get(f"/trace?{query}&{urlencode({'seen': seen})}", headers=POLL)
        if r.status_code == 286:
            return r
        assert r.status_code in (200, 204), r.text
        if r.status_code == 200:
            match = re.search(r"(\d+) of (\d+) steps done", r.text)
            seen = f"running:0:{match[1]}" if match else "queued:1:0"
        time.sleep(0.05)
    raise AssertionError("the trace did not finish")


# --------------------------------------------------------------------------- the panel in the page


def test_the_default_scenario_says_why_it_cannot_be_traced(lab: Lab) -> None:
    r = lab().get("/")
    assert r.status_code == 200
    assert '<section id="trace"' in r.text
    assert "trace needs a model" in r.text and "--master-bytes 4" in r.text
    assert 'action="/trace' not in r.text  # nothing to start


def test_a_traceable_scenario_offers_the_action_by_keyboard_with_or_without_javascript(lab: Lab) -> None:
    r = lab().get(f"/?{QUERY}")
    section = r.text[r.text.index('<section id="trace"') :]
    assert f'<form class="trace-start" method="post" action="/trace?{QUERY.replace("&", "&amp;")}"' in section
    assert 'hx-post="/trace?' in section and 'hx-target="#trace"' in section
    assert '<button type="submit">Trace this scenario</button>' in section
    assert "In a terminal: <code>zero3-lab trace --dp=4 " in section


def test_without_the_extra_the_panel_says_how_to_enable_it(lab: Lab, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(trace_panel, "trace_available", lambda: False)
    client = lab()
    page = client.get(f"/?{QUERY}").text
    assert "<code>pip install -e &#39;.[trace]&#39;</code>" in page
    assert "Trace this scenario</button>" not in page
    assert client.post(f"/trace?{QUERY}", headers=HX).status_code == 200  # said in place, nothing queued
    assert client.post(f"/trace?{QUERY}", follow_redirects=False).status_code == 422
    assert not store_of(client).path.exists()


def test_looking_starts_nothing_and_creates_nothing(lab: Lab, tmp_path: Path) -> None:
    client = lab()
    for path in (f"/?{QUERY}", f"/trace?{QUERY}", f"/trace.json?{QUERY}"):
        client.get(path)
        client.get(path, headers=HX)
    client.get(f"/trace?{QUERY}", headers=POLL)
    assert not store_of(client).path.exists()
    assert runs(tmp_path) == []


def test_each_render_looks_the_job_up_once_at_most(lab: Lab, monkeypatch: pytest.MonkeyPatch) -> None:
    client = lab()
    calls: list[str] = []
    real = TraceStore.get

    def counted(self: TraceStore, query: str) -> Any:
        calls.append(query)
        return real(self, query)

    monkeypatch.setattr(TraceStore, "get", counted)
    client.get(f"/?{QUERY}", headers={**HX, "X-In-View": "lower"})  # a live update with the panel on screen
    assert calls == [QUERY]
    calls.clear()
    client.get(f"/?{QUERY}", headers=HX)  # the panel off screen: deferred with the sections below the peak
    assert calls == []
    client.get(f"/lower?{QUERY}", headers=HX)  # ... until they come into view
    assert calls == [QUERY]
    calls.clear()
    client.get("/?dp=16", headers={**HX, "X-In-View": "lower"})  # not traceable: no lookup at all
    assert calls == []


# --------------------------------------------------------------------------- starting and polling


def test_the_action_queues_the_trace_and_the_status_polls_to_the_result(lab: Lab) -> None:
    client = lab()
    r = client.post(f"/trace?{QUERY}", headers=HX)
    assert r.status_code == 200
    assert r.text.startswith('<section id="trace"')
    live = re.search(r'<div id="trace-live"[^>]*>', r.text)
    assert live is not None
    for attribute in ('role="status"', 'hx-trigger="every 1s"', 'hx-swap="innerHTML"', "autofocus"):
        assert attribute in live[0]
    assert '<label for="trace-progress">' in r.text and '<progress id="trace-progress"' in r.text
    done = poll_until_done(client)
    assert done.headers["hx-retarget"] == "#trace" and done.headers["hx-reswap"] == "outerHTML"
    assert 'id="trace-live"' not in done.text  # nothing polls any more
    table = done.text[done.text.index('<table class="trace-instants">') :]
    assert '<th scope="col">modelled</th><th scope="col">traced</th>' in table
    assert '<th scope="row">end of forward</th><td class="num">423,808 B</td><td class="num">425,204 B</td>' in table
    assert '<td class="num">-1,396 B (-0.3 %)</td>' in table
    assert 'backward at the head</th><td class="num">524,544 B</td><td class="num">&mdash;</td>' in table
    assert "<strong>(the modelled peak)</strong>" in table
    assert '<th scope="row">the peak</th><td class="num">758,464 B</td><td class="num">759,868 B</td>' in table
    # the step's collectives beside the lab's terms; a kind neither sent (all-reduce) is left out
    sent = done.text[done.text.index('<table class="trace-collectives">') :]
    assert '<th scope="row">all-gather</th><td class="num">19,997,696 B</td><td class="num">19,997,696 B</td>' in sent
    assert '<th scope="row">reduce-scatter</th>' in sent and "all-reduce" not in sent


def test_a_poll_that_finds_nothing_new_gets_no_markup(lab: Lab, tmp_path: Path) -> None:
    client = lab({QUERY: "block"})
    client.post(f"/trace?{QUERY}", headers=HX)
    wait_for(lambda: getattr(queue_of(client).status(QUERY), "done", 0) == 3)
    same = client.get(f"/trace?{QUERY}&seen=running:0:3", headers=POLL)
    assert same.status_code == 204 and same.text == ""
    moved = client.get(f"/trace?{QUERY}&seen=running:0:2", headers=POLL)
    assert moved.status_code == 200
    assert "Tracing: 3 of 8 steps done (iteration 1/2: forward)" in moved.text
    assert '<progress id="trace-progress" max="8" value="3">' in moved.text
    open_gate(tmp_path)
    poll_until_done(client)


def test_a_queued_job_shows_its_place(lab: Lab, tmp_path: Path) -> None:
    client = lab({QUERY: "block"})
    client.post(f"/trace?{QUERY}", headers=HX)
    wait_for(lambda: runs(tmp_path) == [QUERY])
    r = client.post(f"/trace?{OTHER}", headers=HX)
    assert "Queued: place 1 in this server's trace queue" in r.text
    page = client.get(f"/?{OTHER}").text
    assert "Queued: place 1" in page and 'hx-vals=\'{"seen": "queued:1:0"}\'' in page
    assert "autofocus" not in page[page.index('<section id="trace"') :]  # a page load keeps its focus
    open_gate(tmp_path)
    poll_until_done(client, OTHER)


def test_the_same_scenario_joins_its_job(lab: Lab, tmp_path: Path) -> None:
    client = lab({QUERY: "block"})
    client.post(f"/trace?{QUERY}", headers=HX)
    client.post(f"/trace?{QUERY}", headers=HX)
    # the same scenario spelt another way (a size, an explicit default) is the same canonical query
    client.post(f"/trace?{QUERY}&capacity_bytes=80GB", headers=HX)
    open_gate(tmp_path)
    poll_until_done(client)
    assert runs(tmp_path) == [QUERY]


def test_without_javascript_the_form_lands_on_the_page_at_the_trace(lab: Lab, tmp_path: Path) -> None:
    client = lab({QUERY: "block"})
    r = client.post(f"/trace?{QUERY}", follow_redirects=False)
    assert r.status_code == 303
    assert r.headers["location"] == f"/?{QUERY}#trace"
    page = client.get(r.headers["location"]).text
    assert '<noscript><p><a href="/?' in page and '#trace">Reload</a>' in page
    detail = client.get(f"/trace?{QUERY}")  # the panel as a page of its own
    assert detail.status_code == 200 and "back to the scenario" in detail.text
    open_gate(tmp_path)
    poll_until_done(client)


@pytest.mark.parametrize("method", ["GET", "POST"])
def test_a_bad_scenario_is_named_not_traced(lab: Lab, method: str, tmp_path: Path) -> None:
    client = lab()
    r = client.request(method, "/trace?dp=0&model=llama-2-7b", headers=HX)
    assert r.status_code == 422
    assert "dp:" in r.text and "Traceback" not in r.text
    assert runs(tmp_path) == []


def test_an_untraceable_scenario_is_refused_with_its_reasons(lab: Lab, tmp_path: Path) -> None:
    client = lab()
    r = client.post("/trace?model=llama-2-7b", headers=HX)
    assert r.status_code == 200 and "--master-bytes 4: FSDP2 keeps no separate master copy" in r.text
    assert client.post("/trace?model=llama-2-7b", follow_redirects=False).status_code == 422
    assert runs(tmp_path) == []


def test_a_full_queue_says_so_readably(lab: Lab, tmp_path: Path) -> None:
    client = lab({QUERY: "block"}, max_queued=1)
    client.post(f"/trace?{QUERY}", headers=HX)
    wait_for(lambda: runs(tmp_path) == [QUERY])
    client.post(f"/trace?{OTHER}", headers=HX)
    full = client.post(f"/trace?{THIRD}", headers=HX)
    assert full.status_code == 200
    assert re.search(r'<p class="notice bad" role="alert">1 traces are already waiting[^<]*</p>', full.text)
    assert "Trace this scenario</button>" in full.text  # and it can be asked again later
    without_js = client.post(f"/trace?{THIRD}", follow_redirects=False)
    assert without_js.status_code == 503 and "already waiting" in without_js.text
    open_gate(tmp_path)
    poll_until_done(client, OTHER)


def test_a_failed_trace_shows_its_error_as_an_alert_and_can_be_tried_again(lab: Lab) -> None:
    client = lab({QUERY: "fail"})
    client.post(f"/trace?{QUERY}", headers=HX)
    done = poll_until_done(client)
    assert (
        '<p class="notice bad" role="alert">The trace failed: --model: family &#39;bert&#39; is not yet traceable</p>'
        in done.text
    )
    assert "Trace again</button>" in done.text
    assert "Trace again</button>" in client.get(f"/?{QUERY}").text  # a shared link shows it too


def test_a_finished_trace_is_shown_at_once_and_its_report_served(lab: Lab, tmp_path: Path) -> None:
    client = lab()
    assert client.get(f"/trace.json?{QUERY}").status_code == 404
    client.post(f"/trace?{QUERY}", headers=HX)
    poll_until_done(client)
    page = client.get(f"/?{QUERY}")  # a shared link: the table is in the page itself
    assert '<table class="trace-instants">' in page.text and 'id="trace-live"' not in page.text
    # and each live update, with the panel on screen or once it comes into view
    assert '<table class="trace-instants">' in client.get(f"/?{QUERY}", headers={**HX, "X-In-View": "lower"}).text
    assert '<table class="trace-instants">' in client.get(f"/lower?{QUERY}", headers=HX).text
    report = client.get(f"/trace.json?{QUERY}")
    assert report.status_code == 200 and report.headers["content-type"] == "application/json"
    assert report.json()["peak"]["total"] == 759_868
    again = client.post(f"/trace?{QUERY}", headers=HX)
    assert '<table class="trace-instants">' in again.text
    assert runs(tmp_path) == [QUERY]


def test_head_answers_like_get_on_the_trace_page_and_its_report(lab: Lab, tmp_path: Path) -> None:
    """The status page (without JavaScript) and the report download answer HEAD as they answer GET,
    before the trace (the report a 404) and after; HEAD starts nothing."""
    client = lab()

    def same(path: str) -> int:
        got, head = client.get(path), client.head(path)
        assert head.status_code == got.status_code, path
        assert head.content == b""
        for name in ("content-type", "content-length"):
            assert head.headers.get(name) == got.headers.get(name), (path, name)
        return got.status_code

    assert [same(f"/trace?{QUERY}"), same(f"/trace.json?{QUERY}"), same("/trace.json?dp=0")] == [200, 404, 422]
    assert runs(tmp_path) == [] and state(client) is None
    client.post(f"/trace?{QUERY}", headers=HX)
    poll_until_done(client)
    assert [same(f"/trace?{QUERY}"), same(f"/trace.json?{QUERY}")] == [200, 200]


# --------------------------------------------------------------------------- end to end, the real trace


@pytest.mark.trace
@pytest.mark.skipif(not torch_installed(), reason="the trace extra is not installed (pip install -e '.[trace]')")
def test_a_real_trace_through_the_page_then_from_the_cache(tmp_path: Path) -> None:
    app = create_app(Settings(trace_cache=tmp_path / "traces.sqlite3"))
    with TestClient(app, raise_server_exceptions=False) as client:  # the app's own queue: zero3-lab trace
        consumer = start_consumer(queue_for(app).runner)  # as `zero3-lab worker` (serve starts one) runs it
        started = client.post(f"/trace?{QUERY}", headers=HX)
        assert 'role="status"' in started.text
        done = poll_until_done(client, timeout=120)
        assert '<table class="trace-instants">' in done.text, done.text
        report = client.get(f"/trace.json?{QUERY}").json()
        peak = report["peak"]["total"]
        assert (
            f'<td class="num">{report["modelled"]["stage3_peak"]:,} B</td><td class="num">{peak:,} B</td>' in done.text
        )
        gathered = report["communication"]["all_gather"]
        assert gathered["traced"] > 0 and '<table class="trace-collectives">' in done.text
        assert f'<td class="num">{gathered["lab"]:,} B</td><td class="num">{gathered["traced"]:,} B</td>' in done.text
        again = client.post(f"/trace?{QUERY}", headers=HX)  # the same scenario: the cached result, no new job
        assert '<table class="trace-instants">' in again.text and 'id="trace-live"' not in again.text
        assert '<table class="trace-instants">' in client.get(f"/?{QUERY}").text
        stop_consumer(consumer)


def test_a_cached_report_of_any_size_is_served_within_the_bound(lab: Lab) -> None:
    """A row put in the cache by other means (tens of MB here) is summarised when shown, not served as it is."""
    client = lab()
    store = store_of(client)
    store.claim(QUERY, "w", "", replacing=None)
    huge = {"schema": "zero3-lab.trace/1", "peak": {"total": 1}, "timeline": [{"total": i} for i in range(2_000_000)]}
    with closing(sqlite3.connect(store.path)) as db, db:  # written past finish()'s bound, as by another program
        db.execute("UPDATE traces SET state = 'finished', report = ?, summary = '{}' WHERE query = ?",
                   (json.dumps(huge), QUERY))  # fmt: skip
    response = client.get(f"/trace.json?{QUERY}")
    assert response.status_code == 200
    assert len(response.content) <= MAX_REPORT_BYTES
    assert response.json()["peak"] == {"total": 1}


def test_a_failed_trace_says_when_it_may_run_again_and_refuses_until_then(lab: Lab) -> None:
    client = lab({QUERY: "fail"}, retry_after_s=120.0)
    client.post(f"/trace?{QUERY}", headers=HX)
    done = poll_until_done(client)
    assert re.search(r"It can be tried again in 1[12]\d s", done.text)
    again = client.post(f"/trace?{QUERY}")  # without JavaScript: a page of its own, 429
    assert again.status_code == 429
    assert "this trace failed moments ago; it can be tried again in" in again.text


def test_a_model_past_the_budget_is_refused_in_the_panel_and_nothing_queues(lab: Lab, tmp_path: Path) -> None:
    client = lab(budget_tensors=3)  # the small model's tensors are more than 3
    answer = client.post(f"/trace?{QUERY}", headers=HX)
    assert answer.status_code == 200 and "more than the 3 a trace here may run" in answer.text
    assert 'role="alert"' in answer.text
    assert client.post(f"/trace?{QUERY}").status_code == 422  # without JavaScript
    assert state(client) is None and runs(tmp_path) == []
