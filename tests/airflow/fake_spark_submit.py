"""A stand-in for ``spark-submit`` in the factory-DAG tests of the Airflow surface (the real
job runs in tests/e2e): it records each launch (one JSON line in ``$FAKE_SPARK_LAUNCHES``) and
plays the shipped job's coordinator protocol - heartbeat ``running`` on the newest job model
until a stop request for that version (or ``$FAKE_SPARK_RUN_S``), then ``stopped``; with
``--standby --job-model-version N`` it first heartbeats ``starting`` (role standby) for
``$FAKE_SPARK_WARM_S`` (its warm-up; the time it ended goes to ``$FAKE_SPARK_LAUNCHES.warm``),
or with ``$FAKE_SPARK_WARM_UNTIL_STOP=1`` until the expansion's stop step has begun (and one
second more, so the stop step sees it still warming: a warm-up that outlasts the barrier,
without a fixed wait), then ``standby`` until job model vN exists. Its heartbeats advertise
the ``standby`` capability as the shipped job's do.

``$FAKE_SPARK_NO_STANDBY=1`` plays instead an application that follows only the five-step
protocol (heartbeats, honours stop) and knows nothing of ``--standby``: it advertises nothing
and runs on the newest job model whatever its arguments say.

``$FAKE_SPARK_IN_APP=1`` plays a job on the runtime that restarts its query in-app: it
advertises only ``in-app`` and, running, takes the newest job model on as soon as it is written
(the DAG writes it after the barrier), same processor, heartbeating ``running`` on it.

``$FAKE_SPARK_GATE_DIR``: a launch for a job model version (``--job-model-version N``) runs
vN only once the file ``<dir>/<job name>`` exists (until then it heartbeats ``standby``): the
test decides when the restarted job acknowledges, so the ack wait can be caught deferred.

The test writes an executable ``spark-submit`` that runs this file with the test's Python.
"""

from __future__ import annotations

import json
import os
import sys
import time


def _arg(argv: list[str], name: str, default: str | None = None) -> str | None:
    return argv[argv.index(name) + 1] if name in argv else default


class _Patient:
    """The store, each call retried for a while on any error: as the real job does, the fake
    rides out a broker restart (heartbeats and reads are idempotent)."""

    def __init__(self, store) -> None:
        self._store = store

    def __getattr__(self, name: str):
        attr = getattr(self._store, name)
        if not callable(attr):
            return attr

        def call(*args, **kwargs):
            deadline = time.monotonic() + 90
            while True:
                try:
                    return attr(*args, **kwargs)
                except Exception:  # noqa: BLE001 - a broker outage; give up after the deadline
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.5)

        return call


def _stop_step_began(store, version: int) -> bool:
    """True once the stop step of the expansion to job model `version` has begun."""
    return any(r.target_version == version and "stop" in r.steps for r in store.expansions())


def main(argv: list[str]) -> int:
    with open(os.environ["FAKE_SPARK_LAUNCHES"], "a", encoding="utf-8") as out:
        out.write(json.dumps({"pid": os.getpid(), "argv": argv}) + "\n")
    job = _arg(argv, "--job-name")
    bootstrap = _arg(argv, "--bootstrap-servers")
    if not job or not bootstrap:
        return 0
    from airflow_samza_expand._kafka.config import client_config
    from airflow_samza_expand.store import open_store

    coordinator = _arg(argv, "--coordinator", "kafka")
    store = _Patient(open_store(coordinator, job, client_config(bootstrap)))
    deadline = time.monotonic() + float(os.environ.get("FAKE_SPARK_RUN_S", "120"))
    pid = f"fake-{os.getpid()}"
    wanted = int(_arg(argv, "--job-model-version", "0") or 0)
    five_step = os.environ.get("FAKE_SPARK_NO_STANDBY") == "1"
    in_app = os.environ.get("FAKE_SPARK_IN_APP") == "1"
    capabilities = [] if five_step else ["in-app"] if in_app else ["standby"]
    if "--standby" in argv and not five_step:  # warms up ($FAKE_SPARK_WARM_S), waits for vN
        warm_until = time.monotonic() + float(os.environ.get("FAKE_SPARK_WARM_S", "0"))
        if os.environ.get("FAKE_SPARK_WARM_UNTIL_STOP") == "1":
            while time.monotonic() < deadline and not _stop_step_began(store, wanted):
                store.heartbeat(
                    pid, wanted, "starting", role="standby", ttl_s=30, capabilities=capabilities
                )
                time.sleep(0.5)
            warm_until = time.monotonic() + 1.0
        while time.monotonic() < warm_until:
            store.heartbeat(
                pid, wanted, "starting", role="standby", ttl_s=30, capabilities=capabilities
            )
            time.sleep(0.5)
        with open(os.environ["FAKE_SPARK_LAUNCHES"] + ".warm", "a", encoding="utf-8") as out:
            out.write(json.dumps({"pid": os.getpid(), "warm_at": time.time()}) + "\n")
        while time.monotonic() < deadline and store.latest_job_model().version < wanted:
            store.heartbeat(
                pid, wanted, "standby", role="standby", ttl_s=30, capabilities=capabilities
            )
            time.sleep(0.5)
    gate = os.environ.get("FAKE_SPARK_GATE_DIR")
    while gate and wanted and time.monotonic() < deadline and not os.path.exists(f"{gate}/{job}"):
        store.heartbeat(pid, wanted, "standby", role="standby", ttl_s=30, capabilities=capabilities)
        time.sleep(0.2)
    version = store.latest_job_model().version
    try:
        while time.monotonic() < deadline:
            if in_app:  # the query restarted on a newer job model, in the same process
                version = max(version, store.latest_job_model().version)
            store.heartbeat(pid, version, "running", capabilities=capabilities)
            stop = store.stop_request()
            if stop and int(stop["version"]) >= version:
                break
            time.sleep(0.5)
        store.heartbeat(pid, version, "stopped", capabilities=capabilities)
    finally:
        store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
