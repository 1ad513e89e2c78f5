"""Read the numbers a rendered page shows (its ``data-bytes`` cells) back into integers."""

from __future__ import annotations

from html.parser import HTMLParser


class _Cells(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.persistent: dict[tuple[int, str], int] = {}
        self.peak: dict[tuple[int, str], int] = {}
        self.alerts: list[str] = []
        self._row_stage: int | None = None
        self._in_alert = 0
        self.ids: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if a.get("id"):
            self.ids.add(a["id"] or "")
        if tag == "tr" and a.get("data-stage") is not None:
            self._row_stage = int(a["data-stage"] or "0")
        if a.get("role") == "alert":
            self._in_alert += 1
            self.alerts.append("")
        if "data-bytes" not in a:
            return
        value = int(a["data-bytes"] or "")
        if a.get("data-class") is not None:
            self.persistent[(int(a["data-stage"] or ""), a["data-class"] or "")] = value
        elif a.get("data-part") is not None and self._row_stage is not None:
            self.peak[(self._row_stage, a["data-part"] or "")] = value

    def handle_endtag(self, tag: str) -> None:
        if tag == "tr":
            self._row_stage = None
        if tag == "span" and self._in_alert:
            self._in_alert -= 1

    def handle_data(self, data: str) -> None:
        if self._in_alert:
            self.alerts[-1] += data


def read_cells(html: str) -> _Cells:
    parser = _Cells()
    parser.feed(html)
    return parser
