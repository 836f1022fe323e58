"""Plain-text views of a job model and an expansion plan: a mapping table and a diagram of
partitions -> buckets -> tasks (a bucket is the partition a key lived in when the stream had its
initial count, ``partition_before_expansion(p, current, initial)``; every bucket stays in one
task). ASCII only, so it reads the same in any terminal and in logs; `render_svg` draws the same
diagram as SVG (the UI's job model view, the demo's report).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Sequence
from html import escape

from airflow_samza_expand.core._plan import ExpansionPlan
from airflow_samza_expand.core.expansion import load_expansion_algorithm
from airflow_samza_expand.core.model import JobModel, SystemStreamPartition

NEW_MARK = "*"
_DIGITS = re.compile(r"(\d+)")


def natural_key(text: str) -> tuple[object, ...]:
    """Sort key putting "Partition 10" after "Partition 9"."""
    return tuple(int(part) if part.isdigit() else part for part in _DIGITS.split(text))


def _partition_list(partitions: Sequence[int], new: Collection[int] = (), limit: int = 16) -> str:
    shown = [f"{p}{NEW_MARK}" if p in new else str(p) for p in partitions[:limit]]
    if len(partitions) > limit:
        shown.append(f"... (+{len(partitions) - limit} more)")
    return " ".join(shown)


def _table(headers: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    rows = [list(r) for r in rows]
    widths = [
        max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)
    ]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    lines.append("  ".join("-" * w for w in widths))
    lines.extend(
        "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows
    )
    return lines


def render_mapping_table(model: JobModel, new_ssps: Collection[SystemStreamPartition] = ()) -> str:
    """One row per (task, stream): the partitions it reads; new ones marked ``*``."""
    new = frozenset(new_ssps)
    per_task: dict[str, dict[str, list[int]]] = {}
    for ssp, task in model.ssp_to_task.items():
        per_task.setdefault(task, {}).setdefault(ssp.stream, []).append(ssp.partition)
    rows = []
    for task in sorted(per_task, key=natural_key):
        for stream in sorted(per_task[task]):
            partitions = sorted(per_task[task][stream])
            fresh = {p for p in partitions if _ssp_of(model, stream, p) in new}
            rows.append([task, stream, _partition_list(partitions, fresh)])
    if model.broadcast_ssps:
        for ssp in sorted(model.broadcast_ssps):
            rows.append(["(every task)", ssp.stream, f"{ssp.partition} (broadcast)"])
    lines = _table(["TASK", "STREAM", "PARTITIONS"], rows)
    if new:
        lines.append(f"({NEW_MARK} = new partition)")
    return "\n".join(lines)


def _ssp_of(model: JobModel, stream: str, partition: int) -> SystemStreamPartition:
    return SystemStreamPartition(model.stream(stream).system, stream, partition)


def render_diagram(model: JobModel, new_ssps: Collection[SystemStreamPartition] = ()) -> str:
    """Per stream: partitions -> bucket (initial partition of their keys) -> task."""
    new = frozenset(new_ssps)
    algorithm = load_expansion_algorithm(model.expansion_algorithm)
    lines: list[str] = []
    for s in model.streams:
        buckets: dict[int, list[int]] = {}
        for p in range(s.current):
            q = algorithm.partition_before_expansion(p, s.current, s.initial)
            buckets.setdefault(q, []).append(p)
        lines.append(
            f"{s.stream} ({s.system}): {s.current} partitions, initial {s.initial}; "
            f"bucket = partition the key had at {s.initial} partitions"
        )
        label_rows = []
        for q in sorted(buckets):
            partitions = buckets[q]
            fresh = {p for p in partitions if SystemStreamPartition(s.system, s.stream, p) in new}
            first = SystemStreamPartition(s.system, s.stream, q)
            if first in model.broadcast_ssps:
                task = "every task (broadcast)"
            else:
                tasks = sorted(
                    {
                        model.ssp_to_task[SystemStreamPartition(s.system, s.stream, p)]
                        for p in partitions
                    },
                    key=natural_key,
                )
                task = " + ".join(f'"{t}"' for t in tasks)
            label_rows.append(
                (f"partitions {_partition_list(partitions, fresh, limit=8)}", q, task)
            )
        width = max(len(r[0]) for r in label_rows)
        for label, q, task in label_rows:
            lines.append(f"  {label.ljust(width)} --> bucket {q} --> task {task}")
    if new:
        lines.append(f"({NEW_MARK} = new partition)")
    return "\n".join(lines)


def split_buckets(model: JobModel) -> dict[tuple[str, int], list[str]]:
    """(stream, bucket) -> its tasks, for buckets whose partitions are not all in one task."""
    algorithm = load_expansion_algorithm(model.expansion_algorithm)
    tasks: dict[tuple[str, int], set[str]] = {}
    for ssp, task in model.ssp_to_task.items():
        s = model.stream(ssp.stream)
        q = algorithm.partition_before_expansion(ssp.partition, s.current, s.initial)
        tasks.setdefault((ssp.stream, q), set()).add(task)
    return {
        key: sorted(found, key=natural_key)
        for key, found in sorted(tasks.items())
        if len(found) > 1
    }


def _indent(text: str, prefix: str = "  ") -> str:
    return "\n".join(prefix + line for line in text.splitlines())


def render_plan(plan: ExpansionPlan) -> str:
    """The human report of `samza-expand plan`: summary, barrier, table, diagram, moves."""
    model = plan.new_job_model
    out = [
        f"Expansion plan for job '{plan.job_name}': job model v{plan.old_version} -> "
        f"v{plan.new_version} (grouper {model.grouper})",
        "",
        "Streams that grow:",
    ]
    for stream, (before, after) in plan.grown_counts().items():
        out.append(f"  {stream}: {before} -> {after} partitions (x{after // before})")
    unchanged = [s for s in plan.counts_before if s not in plan.streams_grown]
    if unchanged:
        out.append(
            "  unchanged: " + ", ".join(f"{s} ({plan.counts_before[s]})" for s in sorted(unchanged))
        )
    out += [
        "",
        f"Tasks: {len(model.tasks())}",
        f"New partitions: {len(plan.new_ssps)}; each joins the task that owns its keys' bucket.",
        "",
        f"Ordering barrier: the job takes v{plan.new_version} only once it has passed the high "
        f"watermark of {len(plan.barrier_ssps)} old partition(s):",
    ]
    per_stream: dict[str, list[int]] = {}
    for ssp in plan.barrier_ssps:
        per_stream.setdefault(ssp.stream, []).append(ssp.partition)
    for stream, partitions in sorted(per_stream.items()):
        out.append(f"  {stream}: {_partition_list(partitions, limit=32)}")
    out += [
        "",
        f"SSP -> task mapping of job model v{plan.new_version}:",
        _indent(render_mapping_table(model, plan.new_ssps)),
        "",
        "Partitions -> buckets -> tasks:",
        _indent(render_diagram(model, plan.new_ssps)),
    ]
    reassigned = [m for m in plan.moved if m.from_task is not None]
    split = split_buckets(model)
    if reassigned:
        out += ["", f"WARNING: {len(reassigned)} existing partition(s) change task (state lost):"]
        out += [f"  {m.ssp}: {m.from_task} -> {m.to_task}" for m in reassigned[:20]]
    if split:
        out += [
            "",
            f"WARNING: {len(split)} bucket(s) are split across tasks, so keys that move "
            "to a new partition leave the task holding their state:",
        ]
        out += [
            f"  {stream} bucket {q}: " + " + ".join(f'"{t}"' for t in tasks)
            for (stream, q), tasks in list(split.items())[:20]
        ]
    if not reassigned and not split:
        out += ["", "Every bucket stays in one task: each key's state stays with the key."]
    return "\n".join(out)


__all__ = [
    "natural_key",
    "render_diagram",
    "render_mapping_table",
    "render_plan",
    "split_buckets",
]


_COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"]


def render_svg(model: JobModel) -> str:
    """SVG of partitions -> buckets -> tasks for every stream of ``model`` (new partitions,
    those beyond the initial count, drawn dashed)."""
    algorithm = load_expansion_algorithm(model.expansion_algorithm)
    row_h, top = 34, 60
    rows_total = sum(s.current for s in model.streams)
    height = top + rows_total * row_h + 60 * len(model.streams) + 40
    width = 760
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'font-family="Helvetica, Arial, sans-serif" font-size="13">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="20" y="28" font-size="16" font-weight="bold">{escape(model.job_name)}: '
        f"job model v{model.version} - partitions -&gt; buckets -&gt; tasks</text>",
        '<text x="60" y="52" fill="#555">partition</text>',
        '<text x="330" y="52" fill="#555">bucket (partition at the initial count)</text>',
        '<text x="600" y="52" fill="#555">task</text>',
    ]
    y0 = top
    for s in model.streams:
        buckets = sorted({algorithm.partition_before_expansion(p, s.current, s.initial)
                          for p in range(s.current)})  # fmt: skip
        tasks = sorted({model.ssp_to_task[SystemStreamPartition(s.system, s.stream, p)]
                        for p in range(s.current)}, key=natural_key)  # fmt: skip
        at_bucket = {q: i for i, q in enumerate(buckets)}  # positions: no list search per row
        at_task = {t: i for i, t in enumerate(tasks)}
        parts.append(f'<text x="20" y="{y0 + 14}" font-weight="bold">{escape(s.stream)} '
                     f"({s.current} partitions, initial {s.initial})</text>")  # fmt: skip
        y0 += 26
        span = s.current * row_h

        def ycenter(i: int, n: int, base: int = y0, span: int = span) -> float:
            return base + (i + 0.5) * span / n

        for q_index, q in enumerate(buckets):
            yq = ycenter(q_index, len(buckets))
            task = model.ssp_to_task[SystemStreamPartition(s.system, s.stream, q)]
            yt = ycenter(at_task[task], len(tasks))
            color = _COLORS[q_index % len(_COLORS)]
            parts.append(f'<line x1="395" y1="{yq:.1f}" x2="580" y2="{yt:.1f}" '
                         f'stroke="{color}" stroke-width="2.5"/>')  # fmt: skip
            parts.append(f'<circle cx="380" cy="{yq:.1f}" r="14" fill="{color}"/>'
                         f'<text x="380" y="{yq + 4:.1f}" fill="white" text-anchor="middle">'
                         f"{q}</text>")  # fmt: skip
        for p in range(s.current):
            yp = ycenter(p, s.current)
            q = algorithm.partition_before_expansion(p, s.current, s.initial)
            yq = ycenter(at_bucket[q], len(buckets))
            color = _COLORS[at_bucket[q] % len(_COLORS)]
            dash = ' stroke-dasharray="6,4"' if p >= s.initial else ""
            parts.append(f'<line x1="135" y1="{yp:.1f}" x2="366" y2="{yq:.1f}" stroke="{color}" '
                         f'stroke-width="1.8"{dash}/>')  # fmt: skip
            fill = "#fff7e6" if p >= s.initial else "#eef3fb"
            parts.append(f'<rect x="40" y="{yp - 12:.1f}" width="95" height="24" rx="4" '
                         f'fill="{fill}" stroke="{color}"/>'
                         f'<text x="87" y="{yp + 4:.1f}" text-anchor="middle">partition {p}'
                         "</text>")  # fmt: skip
        for t_index, task in enumerate(tasks):
            yt = ycenter(t_index, len(tasks))
            parts.append(f'<rect x="580" y="{yt - 14:.1f}" width="150" height="28" rx="6" '
                         f'fill="#f2f2f2" stroke="#333"/><text x="655" y="{yt + 4:.1f}" '
                         f'text-anchor="middle">{escape(task)}</text>')  # fmt: skip
        y0 += span + 30
    parts.append(f'<text x="20" y="{height - 14}" fill="#555">dashed: partitions added by '
                 "expansions; every bucket stays in one task, so each key keeps its state"
                 "</text>")  # fmt: skip
    parts.append("</svg>")
    return "\n".join(parts)
