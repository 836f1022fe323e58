"""Run one factory DAG with ``dag.test()`` in its own process (``python dag_runner.py SPEC``),
so a test can release two whole-DAG runs at the same moment. SPEC (JSON): ``dag`` (kwargs of
`race_dags.build`), ``logical_date`` (ISO), ``ready`` (a file it creates once
the DAG is built), ``go`` (a file whose existence releases the run).
The process inherits the test's AIRFLOW_HOME and connections; it prints one JSON line
``{"run_id", "state", "tasks": {task_id: state}}``."""

from __future__ import annotations

import json
import os
import sys
import time
from datetime import datetime

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def main(spec_text: str) -> int:
    spec = json.loads(spec_text)
    from race_dags import build

    dag = build(**spec["dag"])
    open(spec["ready"], "w").close()
    deadline = time.monotonic() + 120
    while not os.path.exists(spec["go"]) and time.monotonic() < deadline:
        time.sleep(0.01)
    when = datetime.fromisoformat(spec["logical_date"])
    run = dag.test(logical_date=when, run_after=when)
    from airflow.utils.session import create_session

    with create_session() as session:
        tasks = {ti.task_id: str(ti.state) for ti in run.get_task_instances(session=session)}
    print(json.dumps({"run_id": run.run_id, "state": str(run.state), "tasks": tasks}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
