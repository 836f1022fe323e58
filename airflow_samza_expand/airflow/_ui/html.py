"""Server-rendered HTML of the plugin's pages (no external assets; the one script, inline,
updates a running expansion's section: `running_html`).

Every value is escaped; links are built from ``root`` (the plugin's mount path).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from airflow_samza_expand.airflow._ui.live import live_page_body
from airflow_samza_expand.airflow._ui.markup import (
    REFRESH_S,
    _e,
    age,
    iso_ms,
    job_href,
    left,
    most_lagging,
    page,
    table,
)
from airflow_samza_expand.airflow._ui.markup import when as _when
from airflow_samza_expand.airflow._ui.records import JobRef, JobSnapshot, LeaseInfo
from airflow_samza_expand.airflow._ui.running_html import running_section
from airflow_samza_expand.airflow._ui.state_html import (
    barrier_state,
    fresh,
    next_section,
    steps_table,
)
from airflow_samza_expand.airflow._ui.views import (
    diff_models,
    mapping_rows,
    stop_request_view,
    tasks_summary,
)
from airflow_samza_expand.core.model import JobModel


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


DETAIL_MAX_SSPS = 64  # a larger job model's diagram and SSP table are fetched on demand


def inline_details(model: JobModel | None) -> bool:
    """Whether the page shows `model`'s diagram and every SSP inline (a model of at most
    `DETAIL_MAX_SSPS` partitions); a larger one shows a row per task with partition ranges and
    links to the diagram and the mapping, so the page grows with the tasks, not the SSPs."""
    return model is not None and len(model.ssp_to_task) <= DETAIL_MAX_SSPS


def _model_section(snap: JobSnapshot, root: str, svg: str) -> str:
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
        f"<p>Written by <code>{_e(model.created_by)}</code> at {_when(model.created_at)}; grouper "
        f"{_e(model.grouper)}; {len(model.tasks())} tasks; partitions "
        + _e(", ".join(f"{s}: {n}" for s, n in sorted(counts.items())))
        + (f"; live in Kafka: {live}" if live else "")
        + "</p>",
        "<h2>Partitions &rarr; buckets &rarr; tasks</h2>",
    ]
    api = job_href(root, snap.job, f"/models/{model.version}").replace("/jobs/", "/api/jobs/", 1)
    if inline_details(model):
        out += [f"<div>{svg}</div>", "<h2>SSP &rarr; task mapping</h2>"]
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
    else:  # a row per task here; the diagram and every SSP on demand
        out.append(
            f"<p class='details'>{len(model.ssp_to_task)} partitions: the "
            f"<a href='{_e(job_href(root, snap.job, '/buckets.svg'))}'>diagram</a> and every "
            f"SSP with its task and bucket (<a href='{_e(api)}'>JSON</a>) open on demand.</p>"
        )
    out.append(
        table(
            ["task", "reads", "added by an expansion"],
            ([_e(c) for c in r] for r in tasks_summary(model)),
        )
    )
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
        rows.append([f"v{m.version}", _e(m.created_by), _when(m.created_at), _e(counts), diff])
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


def _expansions_section(snap: JobSnapshot, root: str) -> str:
    airflow_root = root.rsplit("/", 1)[0]  # the plugin is mounted one level below Airflow's root
    out = ["<h2>Expansions</h2>"]
    if not snap.expansions:
        out.append("<p class='muted'>No expansion records.</p>")
    for e in snap.expansions:
        grown = ", ".join(
            f"{_e(s)} {e.counts_before.get(s)} &rarr; {n}"
            if e.counts_before.get(s) != n
            else f"{_e(s)} {n} (stays)"
            for s, n in sorted(e.counts_after.items())
        )
        restart = f"; restart {_e(e.restart)}" if e.restart else ""
        out.append(
            f"<h3><code>{_e(e.expansion_id)}</code> <span class='chip'>{_e(e.status)}</span></h3>"
            f"<p>Job model v{_e(e.old_version)} &rarr; v{_e(e.new_version)}; {grown}; "
            f"planned by <code>{_e(e.owner)}</code>{restart}; updated {_when(e.updated_at)}</p>"
            f"<p class='barrier-state'>Ordering barrier: {barrier_state(e)}</p>"
        )
        if e.order:
            out.append(f"<p class='{'bad' if e.order_at_risk else 'ok'}'>{_e(e.order)}</p>")
        out.append(steps_table(e, airflow_root))
    return "".join(out)


def _barrier_section(snap: JobSnapshot) -> str:
    """The current expansion's barrier while it waits for the job to drain (`data._barrier`
    reads the lag only then): an earlier or a passed barrier is history (`barrier_state`)."""
    if not snap.barrier_rows:
        return ""
    total = sum(r.lag for r in snap.barrier_rows)
    state = (
        "every old partition committed up to it - the barrier step passes it at its next poll"
        if total == 0
        else f"<span class='bad'>waiting: lag {total}</span>"
    )
    shown, rest = most_lagging(snap.barrier_rows, lambda r: r.lag)
    rows = (
        [
            _e(r.topic),
            str(r.partition),
            str(r.barrier_offset),
            "none" if r.committed is None else str(r.committed),
            str(r.lag),
        ]
        for r in shown
    )
    return (
        f"<h2>Ordering barrier of <code>{_e(snap.barrier_of)}</code>: {state}</h2>"
        f"<p class='muted'>Consumer group <code>{_e(snap.consumer_group)}</code> against the "
        "high watermarks snapshot after the producer refresh grace.</p>"
        + table(["topic", "partition", "barrier offset", "committed", "lag"], rows)
        + rest
    )


def _lease_state(lease: LeaseInfo) -> str:
    if lease.released:
        return "<span class='muted'>released</span>"
    if lease.expired or lease.expires_in_s is None:
        return "<span class='bad'>expired</span> (its holder stopped renewing it)"
    return fresh(f"held, expires in {left(lease.expires_at, lease.expires_in_s)} unless renewed")


def _processors_section(snap: JobSnapshot) -> str:
    rows = []
    for p in snap.processors:
        alive = (
            fresh("<span class='ok'>alive</span>")  # judged at the fetch: unknown once stale
            if p.alive
            else "<span class='muted'>stopped</span>"  # cleanly: nothing to look at
            if p.state == "stopped"
            else fresh("<span class='bad'>dead</span>")
        )
        rows.append(
            [
                _e(p.processor_id),
                _e(p.role or "-"),
                _e(p.state),
                _e(p.job_model_version),
                _when(p.heartbeat_at),
                age(p.heartbeat_at, p.heartbeat_age_s),
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
                [_e(x.name), _e(x.holder), _e(x.epoch), _when(x.renewed_at), _lease_state(x)]
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


def job_content(snap: JobSnapshot, root: str, svg: str) -> str:
    """Everything the job page shows about the job (the ``/jobs/<job>/live`` fragment, which
    the page's script fetches again while it is open: `live`)."""
    problems = "".join(f"<div class='box'>{_e(p)}</div>" for p in snap.problems)
    return (
        problems
        + next_section(snap)
        + running_section(snap, root)
        + _model_section(snap, root, svg)
        + _history_section(snap, root)
        + _expansions_section(snap, root)
        + _barrier_section(snap)
        + _processors_section(snap)
        + _log_section(snap)
    )


def job_page(snap: JobSnapshot, root: str, svg: str, now_iso: str | None = None) -> str:
    """The job page: its header, the live status line and the content (`live`); `now_iso`:
    the server's time the page counts from (default now)."""
    now_iso = now_iso or iso_ms(datetime.now(UTC)) or ""
    header = (
        f"<h1>Job {_e(snap.job)}</h1><p class='muted'>Coordinator store {_e(snap.store)}. "
        f"JSON: <a href='{_e(job_href(root, snap.job, '').replace('/jobs/', '/api/jobs/', 1))}'>"
        "api</a></p>"
    )
    src = job_href(root, snap.job, "/live")
    body = live_page_body(header, job_content(snap, root, svg), src, now_iso)
    return page(f"Job {snap.job}", body, root, refresh_s=REFRESH_S)  # reloads without JS


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
