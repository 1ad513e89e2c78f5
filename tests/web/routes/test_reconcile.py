"""``/reconcile``: the form on the query's scenario, the POSTed probe records reconciled in tables, errors inline."""

from __future__ import annotations

import csv
import html
import io
import re
from urllib.parse import urlencode

from fastapi.testclient import TestClient

from app.ledger.scenario import parse_scenario
from app.ledger.scenario.links import canonical_query
from app.observed.reconcile import reconcile
from app.observed.records import read_observed
from app.web.routes.reconcile import MAX_PASTE_BYTES
from tests.support import paths

DATA = paths.DATA / "observed"
SCENARIO = parse_scenario({"model": "llama-2-7b", "dp": 8, "param_bytes": 4, "master_bytes": 0, "grad_bytes": 4,
                           "gather_bytes": 2, "act_policy": "full"})  # fmt: skip
Q = canonical_query(SCENARIO)
FORM = {"content-type": "application/x-www-form-urlencoded"}


def post(client: TestClient, query: str, **fields: str) -> tuple[int, str]:
    response = client.post(f"/reconcile?{query}", content=urlencode(fields), headers=FORM)
    return response.status_code, response.text


def cells(page: str, comparison: str, rank: int) -> list[str]:
    """The text of one rank's row in one comparison's table."""
    section = page.split(f'data-comparison="{comparison}"', 1)[1].split("</section>", 1)[0]
    row = section.split(f'<tr data-rank="{rank}">', 1)[1].split("</tr>", 1)[0]
    return [html.unescape(re.sub(r"<[^>]+>", "", c)).strip() for c in re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", row)]


def test_the_form_keeps_the_scenarios_query(client: TestClient) -> None:
    response = client.get(f"/reconcile?{Q}")
    assert response.status_code == 200
    page = response.text
    assert f'action="/reconcile?{html.escape(Q)}"' in page
    assert '<textarea id="observed" name="observed"' in page
    assert 'type="file" id="observed-file"' in page
    assert "/static/reconcile.js?v=" in page
    assert 'role="alert"' not in page.replace('<span class="client-error" role="alert" hidden></span>', "")
    assert client.head(f"/reconcile?{Q}").status_code == 200


def test_the_lab_links_to_the_page_with_its_scenario(client: TestClient) -> None:
    page = client.get(f"/?{Q}").text
    assert f'<a href="/reconcile?{html.escape(Q)}">Reconcile an observed run</a>' in page


def test_posted_records_are_reconciled_per_instant_and_rank(client: TestClient) -> None:
    text = (DATA / "llama2-7b-dp8.jsonl").read_text(encoding="utf-8")
    status, page = post(client, Q, observed=text.replace("\n", "\r\n"), step="")  # a browser sends CRLF
    assert status == 200
    expected = reconcile(SCENARIO, read_observed(text.encode()))
    for c in expected.comparisons:
        assert f'data-comparison="{c.key}"' in page
        for r in c.rows:
            shown = cells(page, c.key, r.rank)
            assert shown[:6] == [str(r.rank), f"{r.estimate:,}", f"{r.allocated:,}", f"{r.reserved:,}",
                                 f"{r.context:,}", f"{r.observed:,}"]  # fmt: skip
            assert shown[6:8] == [f"{r.entry('allocator_reserve'):,}", f"{r.entry('unexplained'):,}"]
    reserve = expected.step_peak.range_of("allocator_reserve")
    row = page.split('data-comparison="step:peak"', 1)[1].split('<tr data-entry="allocator_reserve">', 1)[1]
    assert f'<td class="num">{reserve.max:,}</td><td class="num">5</td>' in row.split("</tr>", 1)[0]
    assert 'id="reconcile-verdict"' in page
    assert f"{expected.peak_total:,} B at <code>{expected.peak_instant}</code>" in page
    # the measured reserve, offered as the scenario's reserve_bytes (the link escapes & as &amp;)
    assert expected.reserve_query is not None
    assert f'<a href="/?{expected.reserve_query.replace("&", "&amp;")}">use this measured reserve</a>' in page


def test_a_step_can_be_chosen(client: TestClient) -> None:
    text = (DATA / "llama2-7b-dp8.jsonl").read_text(encoding="utf-8")
    status, page = post(client, Q, observed=text, step="0")
    assert status == 200
    assert "Step 0 of 8 ranks" in page
    assert "step 0 runs before the optimizer creates its states" in page
    status, page = post(client, Q, observed=text, step="x1")
    assert status == 422
    assert "step: &#39;x1&#39; is not a step number" in page
    for digits in ("²", "١", "７"):  # digits to str.isdigit(), not to int() (a 500 once) or not ASCII
        status, page = post(client, Q, observed=text, step=digits)
        assert status == 422, digits
        assert "is not a step number" in page


def test_bad_records_are_named_inline_and_kept(client: TestClient) -> None:
    text = (DATA / "malformed.jsonl").read_text(encoding="utf-8")
    status, page = post(client, Q, observed=text)
    assert status == 422
    alert = page.split('<div role="alert">', 1)[1].split("</div>", 1)[0]
    for needle in ("line 3: allocated: Input should be a valid integer", "line 4: not valid JSON",
                   "line 5: allocated: Field required", "line 6: gpu: Extra inputs are not permitted",
                   "line 7: max_allocated: 53,910,425,088 is below allocated 53,910,425,600"):  # fmt: skip
        assert needle in alert
    assert 'aria-invalid="true"' in page
    box = page.split('<textarea id="observed"', 1)[1].split(">", 1)[1].split("</textarea>", 1)[0]
    assert html.unescape(box).strip() == text.strip()  # the paste comes back, escaped, to be fixed


def test_hostile_text_is_escaped(client: TestClient) -> None:
    status, page = post(client, Q, observed='<script>alert(1)</script>\n{"v": "<b>"}')
    assert status == 422
    assert "<script>alert(1)</script>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_too_large_pastes_are_refused(client: TestClient) -> None:
    line = (DATA / "llama2-7b-dp8.jsonl").read_text(encoding="utf-8").splitlines()[0] + "\n"
    text = line * (MAX_PASTE_BYTES // len(line) + 1)
    assert len(text) > MAX_PASTE_BYTES
    # URL-encoded it is still under the request's 64 KiB: the page's own bound answers, inline
    assert len(urlencode({"observed": text})) <= 64 * 1024
    status, page = post(client, Q, observed=text)
    assert status == 422
    assert f"the input is larger than {MAX_PASTE_BYTES:,} bytes" in page
    huge = client.post(f"/reconcile?{Q}", content=urlencode({"observed": line * 1000}), headers=FORM)
    assert huge.status_code == 413  # the request limits stop it before the route


def test_a_bad_scenario_is_shown_inline(client: TestClient) -> None:
    response = client.get("/reconcile?dp=0")
    assert response.status_code == 422
    assert '<span role="alert">scenario: dp: 0 is out of range' in response.text
    status, page = post(client, "model=llama-2-7b&dp=0", observed="{}")
    assert status == 422
    assert "scenario: dp: 0 is out of range" in page
    status, page = post(client, "dp=8", observed=(DATA / "llama2-7b-dp8.jsonl").read_text(encoding="utf-8"))
    assert status == 422
    assert "scenario: has no schedule to reconcile with: no model" in page


def test_the_script_is_served(client: TestClient) -> None:
    response = client.get("/static/reconcile.js")
    assert response.status_code == 200
    assert "data-max-bytes" in response.text


def _records(ranks: int) -> str:
    """One step of ``ranks`` ranks, each its three marks, written as tightly as the probe's format allows."""
    lines = []
    for rank in range(ranks):
        for i, mark in enumerate(("end-of-forward", "end-of-backward", "after-step")):
            base = 10_000_000_000 + rank * 1_000_003 + i * 7
            lines.append(f'{{"v":1,"rank":{rank},"world":{ranks},"step":0,"instant":"{mark}","allocated":{base},'
                         f'"max_allocated":{base + 5},"reserved":{base + 9},"max_reserved":{base + 9}}}')  # fmt: skip
    return "\n".join(lines)


def _most_ranks() -> tuple[int, str]:
    """As many ranks as the page's paste takes."""
    ranks = 1
    while len(_records(ranks + 1).encode()) <= MAX_PASTE_BYTES:
        ranks += 1
    return ranks, _records(ranks)


def test_the_answer_is_bounded_whatever_the_number_of_ranks(client: TestClient) -> None:
    """The largest paste the page takes: each comparison shows its 8 ranks with the highest observed figure and
    every figure's min, mean and max over all ranks; the page stays under 256 KB."""
    ranks, text = _most_ranks()
    assert ranks > 50
    status, page = post(client, Q, observed=text, step="")
    assert status == 200
    assert len(page.encode()) <= 256 * 1024, len(page.encode())
    expected = reconcile(SCENARIO, read_observed(text.encode()))
    for c in expected.comparisons:
        section = page.split(f'data-comparison="{c.key}"', 1)[1].split("</section>", 1)[0]
        shown = [int(r) for r in re.findall(r'<tr data-rank="(\d+)">', section)]
        assert shown == [r.rank for r in sorted(c.rows, key=lambda r: (-r.observed, r.rank))[:8]]
        observed = c.range_of("observed")
        assert f"of {ranks}" in section
        row = section.split('data-entry="observed">', 1)[1].split("</tr>", 1)[0]
        numbers = [int(x.replace(",", "")) for x in re.findall(r'class="num">([\d,]+)<', row)]
        assert numbers == [observed.min, observed.min_rank, sum(r.observed for r in c.rows) // ranks, observed.max,
                           observed.max_rank]  # fmt: skip


def test_every_rank_downloads_as_csv(client: TestClient) -> None:
    ranks, text = _most_ranks()
    response = client.post(f"/reconcile.csv?{Q}", content=urlencode({"observed": text, "step": ""}), headers=FORM)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/csv")
    assert 'filename="reconcile-step-0.csv"' in response.headers["content-disposition"]
    rows = list(csv.reader(io.StringIO(response.text)))
    expected = reconcile(SCENARIO, read_observed(text.encode()))
    assert len(rows) == 1 + len(expected.comparisons) * ranks
    first = expected.comparisons[0].rows[0]
    assert rows[1][:2] == [expected.comparisons[0].key, str(first.rank)]
    assert int(rows[1][rows[0].index("observed")]) == first.observed


def test_a_bad_paste_for_the_download_is_named_on_the_page(client: TestClient) -> None:
    response = client.post(f"/reconcile.csv?{Q}", content=urlencode({"observed": "{", "step": ""}), headers=FORM)
    assert response.status_code == 422
    assert "not valid JSON" in response.text and 'role="alert"' in response.text
