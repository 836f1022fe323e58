"""Server-rendered HTML of the plugin's pages (no JavaScript, no external assets).

Every value is escaped; links are built from ``root`` (the plugin's mount path).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from html import escape
from typing import Any
from urllib.parse import quote

from airflow_samza_expand.airflow.ui.records import JobRef, JobSnapshot, LeaseInfo
from airflow_samza_expand.airflow.ui.running import (
    PROCESSOR_DOING,
    running_expansion,
    running_view,
)
from airflow_samza_expand.airflow.ui.views import (
    diff_models,
    mapping_rows,
    stop_request_view,
    tasks_summary,
)

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
"""


def _e(value: Any) -> str:
    return escape("" if value is None else str(value))


def job_href(root: str, job: str, suffix: str = "") -> str:
    return f"{root}/jobs/{quote(job, safe='')}{suffix}"


def page(
    title: str, body: str, root: str, *, home: bool = True, refresh_s: int | None = None
) -> str:
    """A whole page; the header links to the jobs page unless `home` is False (signed out);
    `refresh_s`: the browser reloads it that often."""
    brand = f"<a href='{_e(root)}/'>Samza expansion</a>" if home else "Samza expansion"
    meta = f"<meta http-equiv='refresh' content='{int(refresh_s)}'>" if refresh_s else ""
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


def jobs_page(jobs: Sequence[JobRef], root: str, note: str = "") -> str:
    rows = [
        [f"<a href='{_e(job_href(root, j.name))}'>{_e(j.name)}</a>", _e(", ".join(j.sources))]
        for j in jobs
    ]
    body = "<h1>Jobs</h1>"
    if note:
        body += f"<div class='box warn'>{_e(note)}</div>"
    body += table(["job", "found in"], rows)
    body += (
        "<p class='muted'>Jobs come from <code>[samza_expand] ui_jobs</code> and from the "
        "<code>__samza_coordinator_*</code> topics of the configured Kafka connection. "
        f"JSON: <a href='{_e(root)}/api/jobs'>api/jobs</a>.</p>"
    )
    return page("Jobs", body, root)


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f} s"


def _model_section(snap: JobSnapshot, svg: str) -> str:
    model = snap.latest
    if model is None:
        return "<h2>Job model</h2><p class='muted'>No job model yet.</p>"
    counts = model.partition_counts()
    live = ", ".join(
        f"{_e(s)}: {n}"
        + ("" if counts.get(s) == n else f" <span class='bad'>(model reads {counts.get(s)})</span>")
        for s, n in sorted(snap.live_counts.items())
    )
    out = [
        f"<h2>Job model in force: v{model.version}</h2>",
        f"<p>Written by <code>{_e(model.created_by)}</code> at {_e(model.created_at)}; grouper "
        f"{_e(model.grouper)}; {len(model.tasks())} tasks; partitions "
        + _e(", ".join(f"{s}: {n}" for s, n in sorted(counts.items())))
        + (f"; live in Kafka: {live}" if live else "")
        + "</p>",
        "<h2>Partitions &rarr; buckets &rarr; tasks</h2>",
        f"<div>{svg}</div>",
        "<h2>SSP &rarr; task mapping</h2>",
    ]
    rows = mapping_rows(model)
    out.append(
        table(
            ["SSP", "task", "bucket", "added by an expansion"],
            (
                [
                    f"[{_e(r.system)}, {_e(r.stream)}, {r.partition}]",
                    _e(r.task),
                    str(r.bucket),
                    "yes" if r.new else "",
                ]
                for r in rows
            ),
            ["new" if r.new else "" for r in rows],
        )
    )
    out.append(table(["task", "reads"], ([_e(t), _e(s)] for t, s in tasks_summary(model))))
    return "".join(out)


def _history_section(snap: JobSnapshot, root: str) -> str:
    rows = []
    for m in reversed(snap.history):
        diff = (
            f"<a href='{_e(job_href(root, snap.job, f'/diff?a={m.version - 1}&b={m.version}'))}'>"
            f"v{m.version - 1} &rarr; v{m.version}</a>"
            if snap.model(m.version - 1) is not None
            else ""
        )
        counts = ", ".join(f"{s}: {n}" for s, n in sorted(m.partition_counts().items()))
        rows.append([f"v{m.version}", _e(m.created_by), _e(m.created_at), _e(counts), diff])
    versions = [m.version for m in snap.history]

    def options(chosen: int) -> str:
        return "".join(
            f"<option{' selected' if v == chosen else ''}>{v}</option>" for v in versions
        )

    form = (
        f"<form method='get' action='{_e(job_href(root, snap.job, '/diff'))}'>Compare "
        f"<select name='a'>{options(versions[-2] if len(versions) > 1 else 0)}</select> with "
        f"<select name='b'>{options(versions[-1] if versions else 0)}</select> "
        "<button>diff</button></form>"
        if len(snap.history) > 1
        else ""
    )
    return (
        "<h2>Job model history</h2>"
        + table(["version", "written by", "written at", "partitions", "diff"], rows)
        + form
    )


def _expansions_section(snap: JobSnapshot) -> str:
    out = ["<h2>Expansions</h2>"]
    if not snap.expansions:
        out.append("<p class='muted'>No expansion records.</p>")
    for e in snap.expansions:
        grown = ", ".join(
            f"{s} {e.counts_before.get(s)} &rarr; {n}" for s, n in sorted(e.counts_after.items())
        )
        out.append(
            f"<h3><code>{_e(e.expansion_id)}</code> <span class='chip'>{_e(e.status)}</span></h3>"
            f"<p>Job model v{_e(e.old_version)} &rarr; v{_e(e.new_version)}; {grown}; "
            f"planned by <code>{_e(e.owner)}</code>; updated {_e(e.updated_at)}</p>"
        )
        out.append(
            table(
                ["step", "start", "end", "duration"],
                (
                    [
                        _e(s.name),
                        _e(s.started_at or "-"),
                        _e(s.ended_at or "-"),
                        f"<span class='num'>{_seconds(s.duration_s)}</span>",
                    ]
                    for s in e.steps
                ),
            )
        )
    return "".join(out)


def _running_section(snap: JobSnapshot) -> str:
    run = running_view(snap)
    if run is None:
        return ""
    out = [
        f"<h2>Expansion under way: <code>{_e(run['expansion_id'])}</code></h2>",
        f"<p>Step <b>{_e(run['step'])}</b> ({_e(run['doing'])}) for "
        f"<b>{_seconds(run['elapsed_s'])}</b>, since {_e(run['since'])}; status "
        f"<span class='chip'>{_e(run['status'])}</span>. This page reloads every "
        f"{REFRESH_S} s while the expansion runs.</p>",
    ]
    if run["grace"]:
        out.append(
            f"<p>Producer refresh grace: running for {_seconds(run['grace']['elapsed_s'])} "
            f"(since {_e(run['grace']['started_at'])}); the barrier snapshot follows its end "
            "(the DAG's <code>producer_refresh_grace_s</code>).</p>"
        )
    for p in run["new_processors"]:
        doing = PROCESSOR_DOING.get(p["state"], "running" if p["alive"] else "not alive")
        out.append(
            f"<p>New version: {_e(p['processor_id'])} ({_e(p['role'] or 'no role')}): "
            f"{_e(p['state'])} - {_e(doing)}</p>"
        )
    if run["barrier"]:
        out.append(
            table(
                ["old partition", "barrier offset", "committed", "lag"],
                (
                    [
                        f"{_e(r['topic'])} {r['partition']}",
                        str(r["barrier_offset"]),
                        "-" if r["committed"] is None else str(r["committed"]),
                        "-" if r["lag"] is None else str(r["lag"]),
                    ]
                    for r in run["barrier"]
                ),
            )
        )
    return "".join(out)


def _barrier_section(snap: JobSnapshot) -> str:
    if not snap.barrier_rows:
        return ""
    total = sum(r.lag for r in snap.barrier_rows)
    state = (
        "<span class='ok'>holds</span>"
        if total == 0
        else f"<span class='bad'>waiting: lag {total}</span>"
    )
    rows = (
        [
            _e(r.topic),
            str(r.partition),
            str(r.barrier_offset),
            "none" if r.committed is None else str(r.committed),
            str(r.lag),
        ]
        for r in snap.barrier_rows
    )
    return (
        f"<h2>Ordering barrier of <code>{_e(snap.barrier_of)}</code>: {state}</h2>"
        f"<p class='muted'>Consumer group <code>{_e(snap.job)}</code> against the high watermarks "
        "snapshot after the producer refresh grace.</p>"
        + table(["topic", "partition", "barrier offset", "committed", "lag"], rows)
    )


def _lease_state(lease: LeaseInfo) -> str:
    if lease.released:
        return "<span class='muted'>released</span>"
    if lease.expired or lease.expires_in_s is None:
        return "<span class='bad'>expired</span> (its holder stopped renewing it)"
    return f"held, expires in {_seconds(lease.expires_in_s)} unless renewed"


def _processors_section(snap: JobSnapshot) -> str:
    rows = []
    for p in snap.processors:
        alive = (
            "<span class='ok'>alive</span>"
            if p.alive
            else "<span class='muted'>stopped</span>"  # cleanly: nothing to look at
            if p.state == "stopped"
            else "<span class='bad'>dead</span>"
        )
        rows.append(
            [
                _e(p.processor_id),
                _e(p.role or "-"),
                _e(p.state),
                _e(p.job_model_version),
                _e(p.heartbeat_at),
                _seconds(p.heartbeat_age_s),
                alive,
                "<br>".join(f"<span class='bad'>{_e(w)}</span>" for w in p.warnings()) or "-",
            ]
        )
    headers = ["processor", "role", "state", "job model", "heartbeat at", "heartbeat age"]
    out = "<h2>Processors</h2>" + table([*headers, "liveness", "warnings"], rows)
    if snap.leases is None:
        out += "<p class='muted'>Leases: this coordinator store keeps no leases yet.</p>"
    else:
        out += "<h2>Leases</h2>" + table(
            ["lease", "holder", "epoch", "renewed at", "state"],
            (
                [_e(x.name), _e(x.holder), _e(x.epoch), _e(x.renewed_at), _lease_state(x)]
                for x in snap.leases
            ),
        )
    stop = stop_request_view(snap)
    if stop is not None:
        out += f"<p class='{'' if stop['in_force'] else 'muted'}'>{_e(stop['text'])}</p>"
    return out


def _log_section(snap: JobSnapshot) -> str:
    if snap.log is None:
        return "<h2>Restarted job's log</h2><p class='muted'>No detached launch recorded.</p>"
    note = f"<p class='muted'>{_e(snap.log.note)}</p>" if snap.log.note else ""
    text = f"<pre>{_e(snap.log.text)}</pre>" if snap.log.text else ""
    return f"<h2>Restarted job's log</h2><p><code>{_e(snap.log.path)}</code> (tail)</p>{note}{text}"


def job_page(snap: JobSnapshot, root: str, svg: str) -> str:
    problems = "".join(f"<div class='box'>{_e(p)}</div>" for p in snap.problems)
    body = (
        f"<h1>Job {_e(snap.job)}</h1><p class='muted'>Coordinator store {_e(snap.store)}. "
        f"JSON: <a href='{_e(job_href(root, snap.job, '').replace('/jobs/', '/api/jobs/', 1))}'>"
        "api</a></p>"
        + problems
        + _running_section(snap)
        + _model_section(snap, svg)
        + _history_section(snap, root)
        + _expansions_section(snap)
        + _barrier_section(snap)
        + _processors_section(snap)
        + _log_section(snap)
    )
    refresh = REFRESH_S if running_expansion(snap) is not None else None
    return page(f"Job {snap.job}", body, root, refresh_s=refresh)


def diff_page(snap: JobSnapshot, a: int, b: int, root: str) -> str:
    ma, mb = snap.model(a), snap.model(b)
    assert ma is not None and mb is not None  # the route checked
    diff = diff_models(ma, mb)
    counts = table(
        ["stream", f"v{a}", f"v{b}"],
        ([_e(c["stream"]), _e(c["a"]), _e(c["b"])] for c in diff["counts"]),
    )
    ssps = table(
        ["SSP", "change", f"task in v{a}", f"task in v{b}"],
        (
            [_e(r["ssp"]), _e(r["change"]), _e(r["task_a"] or "-"), _e(r["task_b"] or "-")]
            for r in diff["ssps"]
        ),
    )
    grouper = (
        f"<p>Grouper: {_e(diff['grouper']['a'])} &rarr; {_e(diff['grouper']['b'])}</p>"
        if diff["grouper"]
        else ""
    )
    body = (
        f"<h1>Job {_e(snap.job)}: v{a} &rarr; v{b}</h1>"
        f"<p><a href='{_e(job_href(root, snap.job))}'>back to the job</a></p>"
        f"<h2>Partition counts</h2>{counts}{grouper}<h2>SSPs whose task changed</h2>{ssps}"
        f"<p class='muted'>{diff['unchanged_ssps']} SSPs keep their task.</p>"
    )
    return page(f"Job {snap.job}: diff v{a} v{b}", body, root)
