"""Presenter mode (``present=1``, issue 14 item 3), in process: the flag is a way of showing, not a
scenario field. The page's address and forms carry it, the scenario's links never do; the page
marks the body, offers the toggle back, and renders the kill-list stepper (hidden until
static/present.js shows it); the stylesheet hides the help and enlarges the type."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from urllib.parse import parse_qsl, urlsplit

import pytest
from fastapi.testclient import TestClient

from app.ledger.scenario import Scenario
from app.ledger.scenario.links import canonical_query, link
from app.ledger.scenario.presets import PRESETS
from app.web.views.kills import kills as kill_lists
from app.web.views.page import presenting, with_present
from tests.support import paths

HX = {"HX-Request": "true"}
ROOT = paths.ROOT


class _Tags(HTMLParser):
    """Every start tag, with its attributes."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))


def tags(markup: str) -> list[tuple[str, dict[str, str | None]]]:
    parser = _Tags()
    parser.feed(markup)
    parser.close()
    return parser.tags


def hidden_present_inputs(markup: str) -> int:
    return sum(
        1
        for tag, a in tags(markup)
        if tag == "input" and a.get("type") == "hidden" and a.get("name") == "present" and a.get("value") == "1"
    )


def body_classes(markup: str) -> list[str]:
    body = next(a for tag, a in tags(markup) if tag == "body")
    return (body.get("class") or "").split()


def toggle_href(markup: str) -> str:
    return next(a.get("href") or "" for tag, a in tags(markup) if tag == "a" and a.get("id") == "present-toggle")


@pytest.mark.parametrize(
    ("query", "on"),
    [
        ({"present": "1"}, True),
        ({"present": "0"}, False),
        ({"present": ""}, False),
        ({"present": "yes"}, False),
        ({}, False),
    ],
)
def test_only_present_1_asks_for_presenter_mode(query: dict[str, str], on: bool) -> None:
    assert presenting(query) is on


def test_with_present_adds_the_flag_to_an_address() -> None:
    assert with_present("/", True) == "/?present=1"
    assert with_present("/?dp=16", True) == "/?dp=16&present=1"
    assert with_present("/?dp=16", False) == "/?dp=16"


def test_the_canonical_query_never_holds_the_flag() -> None:
    assert "present" not in canonical_query(Scenario(dp=16))
    assert link(Scenario()) == "/"


def test_the_page_in_presenter_mode(client: TestClient) -> None:
    r = client.get("/?dp=16&present=1")
    assert r.status_code == 200
    assert body_classes(r.text) == ["present"]
    assert hidden_present_inputs(r.text) == 2  # the scenario form and the preset form carry it
    assert toggle_href(r.text) == "/?dp=16"  # leave presenter mode, keep the scenario
    assert re.search(r'<a id="present-toggle" href="/\?dp=16">Leave presenter mode</a>', r.text)
    # the scenario's own links stay canonical
    share = next(a for tag, a in tags(r.text) if tag == "a" and a.get("id") == "share")
    assert share.get("href") == "/?dp=16"
    assert '<link rel="alternate" type="application/json" href="/api/estimate?dp=16">' in r.text
    assert "/static/present.js?v=" in r.text


def test_the_page_out_of_presenter_mode(client: TestClient) -> None:
    r = client.get("/?dp=16")
    assert body_classes(r.text) == []
    assert hidden_present_inputs(r.text) == 0
    assert toggle_href(r.text) == "/?dp=16&present=1"
    assert "data-stepper" not in r.text
    assert toggle_href(client.get("/").text) == "/?present=1"


def test_a_live_update_keeps_the_flag_in_the_pushed_address_only(client: TestClient) -> None:
    r = client.get("/?dp=32&present=1", headers=HX)
    assert r.status_code == 200
    address = r.headers.get("hx-push-url") or r.headers.get("hx-replace-url")
    assert address == "/?dp=32&present=1"
    share = next(a for tag, a in tags(r.text) if tag == "a" and a.get("id") == "share")
    assert share.get("href") == "/?dp=32"
    assert "data-stepper" in r.text  # the fragment renders the stepper too
    # an invalid scenario keeps it as well
    bad = client.get("/?dp=0&present=1", headers=HX)
    assert (bad.headers.get("hx-push-url") or bad.headers.get("hx-replace-url")) == "/?dp=0&present=1"
    # and the defaults' address is just the flag
    plain = client.get("/?present=1", headers=HX)
    assert (plain.headers.get("hx-push-url") or plain.headers.get("hx-replace-url")) == "/?present=1"


def test_a_history_restore_renders_the_mode_of_its_address(client: TestClient) -> None:
    r = client.get("/?dp=16&present=1", headers={**HX, "HX-History-Restore-Request": "true"})
    assert body_classes(r.text) == ["present"]


def test_loading_a_preset_keeps_presenter_mode(client: TestClient) -> None:
    preset = next(p for p in PRESETS if p.scenario != Scenario())
    r = client.get(f"/?preset={preset.id}&present=1", follow_redirects=False)
    assert r.status_code == 303
    location = r.headers["location"]
    assert dict(parse_qsl(urlsplit(location).query))["present"] == "1"
    page = client.get(location)
    assert body_classes(page.text) == ["present"]


def test_the_stepper_holds_one_card_per_mutant_of_the_scenario_s_list(client: TestClient) -> None:
    r = client.get("/?dp=16&present=1")
    kills = kill_lists(Scenario(dp=16)).scenario
    found = tags(r.text)
    stepper = [a for tag, a in found if "data-stepper" in a]
    assert len(stepper) == 1 and "hidden" in stepper[0]  # shown by present.js; without JS, the tables
    cards = [a for tag, a in found if "data-step-card" in a]
    assert [c.get("data-mutant") for c in cards] == [m.id for m in kills]
    assert all("hidden" in c for c in cards)
    for i, (card, m) in enumerate(zip(cards, kills, strict=True), start=1):
        announce = card.get("data-announce") or ""
        assert announce.startswith(f"Mutant {i} of {len(kills)}, {m.id}: {m.rule}.")
        assert (f"Killed by {m.check}: {m.message}" if m.killed else f"Survived: {m.message}") in announce
    buttons = [a for tag, a in found if tag == "button" and "data-step" in a]
    assert [b.get("data-step") for b in buttons] == ["-1", "1"]
    assert all(b.get("type") == "button" for b in buttons)
    status = [a for tag, a in found if "data-step-status" in a]
    assert len(status) == 1 and status[0].get("role") == "status" and status[0].get("aria-live") == "polite"
    # every mutant is still listed in the tables (what a reader without JavaScript gets)
    assert r.text.count('<tr data-mutant="') == 2 * len(kills)


def test_the_stylesheet_s_presenter_section() -> None:
    css = (ROOT / "static" / "app.css").read_text(encoding="utf-8")
    section = css[css.index("/* Presenter mode") :]
    assert "body.present .help, body.present .hint { display: none; }" in section
    assert "html:has(> body.present) { font-size: 125%; }" in section
    sizes = dict(re.findall(r"body\.present \.chart \.(tick|axis)[^{]*\{ font-size: (\d+)px; \}", section))
    assert int(sizes["tick"]) > 10 and int(sizes["axis"]) > 12  # larger than app.css's chart text
    assert ".stepping .stepped-list { display: none; }" in section


def test_present_js_is_served_with_the_page_s_csp(client: TestClient) -> None:
    r = client.get("/static/present.js")
    assert r.status_code == 200
    assert "javascript" in r.headers["content-type"]
    assert "ArrowRight" in r.text and "aria-disabled" in r.text
