"""The job model's SVG diagram (core._render.render_svg: the UI's job model view, the demo's
report)."""

from __future__ import annotations

import xml.etree.ElementTree as ET


def test_svg_diagram_is_well_formed_and_names_every_partition_and_task() -> None:
    from airflow_samza_expand.core._plan import plan_expansion
    from airflow_samza_expand.core._render import render_svg
    from airflow_samza_expand.core.model import JobModel

    v1 = JobModel.initial("job", {"orders": 2})
    v2 = plan_expansion(v1, None, {"orders": 4}).new_job_model
    v3 = plan_expansion(v2, None, {"orders": 8}).new_job_model
    svg = render_svg(v3)
    root = ET.fromstring(svg)
    texts = [t.text for t in root.iter("{http://www.w3.org/2000/svg}text")]
    assert all(f"partition {p}" in texts for p in range(8))
    assert {"Partition 0", "Partition 1"} <= set(texts)
    assert svg.count('stroke-dasharray="6,4"') == 6  # partitions 2..7 are new
