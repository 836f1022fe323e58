"""The building blocks of the plugin's pages: the page frame and its style, escaping, tables."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import UTC
from html import escape
from typing import Any, TypeVar
from urllib.parse import quote

REFRESH_S = 5  # a job page reloads this often while an expansion runs
CSS = """
body{font-family:Inter,Helvetica,Arial,sans-serif;margin:0;color:#1a202c;background:#fff;font-size:14px}
header{background:#017cee;color:#fff;padding:10px 20px}header a{color:#fff}
main{padding:12px 20px;max-width:1200px}h1{font-size:20px;margin:4px 0}
h2{font-size:16px;margin:22px 0 6px;border-bottom:1px solid #e2e8f0;padding-bottom:3px}
table{border-collapse:collapse;margin:4px 0 8px}td,th{border:1px solid #e2e8f0;padding:3px 8px;
text-align:left;vertical-align:top}th{background:#f7fafc}.num{text-align:right}
.ok{color:#276749;font-weight:600}.bad{color:#c53030;font-weight:600}.muted{color:#718096}
.new{background:#fffaf0}.box{border:1px solid #fc8181;background:#fff5f5;padding:10px 14px;
border-radius:6px;margin:10px 0}.warn{border-color:#f6ad55;background:#fffaf0}
pre{background:#1a202c;color:#e2e8f0;padding:10px;overflow:auto;max-height:360px;font-size:12px}
code{font-size:12px}.chip{display:inline-block;padding:0 6px;border-radius:8px;background:#edf2f7}
.okbox{border-color:#68d391;background:#f0fff4}#next{font-size:15px}#next ul{margin:4px 0 0}
.stale-only{display:none}#live.stale .stale-only{display:inline}
#live.stale .fresh-only{display:none}#live.stale #next{opacity:.7}
"""


def _e(value: Any) -> str:
    return escape("" if value is None else str(value))


def job_href(root: str, job: str, suffix: str = "") -> str:
    return f"{root}/jobs/{quote(job, safe='')}{suffix}"


def page(
    title: str, body: str, root: str, *, home: bool = True, refresh_s: int | None = None
) -> str:
    """A whole page; the header links to the jobs page unless `home` is False (signed out);
    `refresh_s`: without JavaScript the browser reloads it that often."""
    brand = f"<a href='{_e(root)}/'>Samza expansion</a>" if home else "Samza expansion"
    meta = (  # with JavaScript a page updates in place instead (running_html)
        f"<noscript><meta http-equiv='refresh' content='{int(refresh_s)}'></noscript>"
        if refresh_s
        else ""
    )
    return (
        f"<!doctype html><html lang='en'><head><meta charset='utf-8'>{meta}"
        f"<title>{_e(title)}</title><style>{CSS}</style></head><body>"
        f"<header>{brand} &middot; {_e(title)}</header>"
        f"<main>{body}</main></body></html>"
    )


def table(headers: Sequence[str], rows: Iterable[Sequence[str]], cls: Sequence[str] = ()) -> str:
    """Cells are HTML already (escape values with ``_e``); ``cls`` holds one class per row."""
    head = "".join(f"<th>{_e(h)}</th>" for h in headers)
    body = []
    for i, row in enumerate(rows):
        attr = f" class='{cls[i]}'" if i < len(cls) and cls[i] else ""
        body.append(f"<tr{attr}>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>")
    if not body:
        return "<p class='muted'>(none)</p>"
    return f"<table><tr>{head}</tr>{''.join(body)}</table>"


T = TypeVar("T")
ROWS_MAX = 16  # a per-partition table longer than this lists its most lagging rows


def most_lagging(rows: Sequence[T], lag: Callable[[T], int | None]) -> tuple[list[T], str]:
    """The rows a per-partition lag table lists, and a line on the rest: every row up to
    `ROWS_MAX`, else the `ROWS_MAX` most lagging (then those whose lag is not read yet; in their
    order) and a
    count of the others, so the table stays readable and small however many partitions."""
    if len(rows) <= ROWS_MAX:
        return list(rows), ""
    ranked = sorted(
        range(len(rows)), key=lambda i: (-(lag(rows[i]) or 0), lag(rows[i]) is not None, i)
    )
    pick = sorted(ranked[:ROWS_MAX])
    shown = [rows[i] for i in pick]
    others = [lag(rows[i]) for i in ranked[ROWS_MAX:]]
    behind = [x for x in others if x]
    done = sum(1 for x in others if x == 0)
    return shown, (
        f"<p class='muted'>{len(others)} more partitions not listed: {done} committed up to "
        f"their barrier offset, {len(behind)} behind (lag {sum(behind)} in all), "
        f"{len(others) - done - len(behind)} not read yet.</p>"
    )


def seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f} s"


def iso_ms(value: Any) -> str | None:
    """A coordinator timestamp as ISO-8601 UTC in milliseconds (``...Z``; what every browser
    parses), or None."""
    from airflow_samza_expand.airflow._ui.decode import parse_time

    moment = parse_time(value)
    if moment is None:
        return None
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def age(since: Any, value_s: float | None) -> str:
    """Seconds since `since`, counting up in the browser between updates (`live.SCRIPT`)."""
    at = iso_ms(since)
    if at is None:
        return seconds(value_s)
    return f"<span class='tick' data-since='{_e(at)}'>{seconds(value_s)}</span>"


def left(until: Any, value_s: float | None, *, whole: bool = False) -> str:
    """Seconds until `until`, counting down in the browser (never below 0); `whole`: as a
    whole number without unit."""
    at = iso_ms(until)
    text = "-" if value_s is None else (f"{value_s:.0f}" if whole else seconds(value_s))
    if at is None:
        return text
    kind = " data-whole='1'" if whole else ""
    return f"<span class='tick' data-until='{_e(at)}'{kind}>{text}</span>"


def when(value: Any) -> str:
    """A timestamp: the browser shows it in the user's time zone with how long ago
    (`live.SCRIPT`); without JavaScript the stored UTC text."""
    at = iso_ms(value)
    if at is None:
        return _e(value) if value else "-"
    return f"<time datetime='{_e(at)}'>{_e(value)}</time>"
