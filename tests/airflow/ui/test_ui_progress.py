"""What the barrier step records for the running view: the grace's length and end,
the barrier lag per old partition over time - driven through the protocol's barrier step against the
test Kafka, then shown by the job page and its JSON (a file store holding the same record)."""

from __future__ import annotations

import json
import re
import time
import uuid

import pytest
from kafka_helpers import commit_offsets, produce_keyed

from airflow_samza_expand._kafka.admin import KafkaAdmin
from airflow_samza_expand._kafka.config import client_config
from airflow_samza_expand._protocol.barrier import progress
from airflow_samza_expand._protocol.barrier import step as barrier
from airflow_samza_expand._protocol.ownership import cli_holder, take
from airflow_samza_expand._protocol.steps.expand import ExpandRequest, expand
from airflow_samza_expand._protocol.steps.plan.step import PlanRequest, plan
from airflow_samza_expand.airflow._ui.data import read_job
from airflow_samza_expand.airflow._ui.html import job_page
from airflow_samza_expand.airflow._ui.settings import UiSettings
from airflow_samza_expand.airflow._ui.views import snapshot_json
from airflow_samza_expand.core._record import ExpansionStatus
from airflow_samza_expand.core.model import JobModel
from airflow_samza_expand.store._files import FileCoordinatorStore
from airflow_samza_expand.store._kafka import KafkaCoordinatorStore

pytestmark = pytest.mark.kafka


@pytest.fixture
def expanded(kafka_bootstrap, unique_topic):
    """A job on a 2-partition topic with 20 records, planned and expanded to 4 partitions."""
    config = client_config(kafka_bootstrap)
    name, topic = f"job-{uuid.uuid4().hex[:10]}", unique_topic("orders")
    with KafkaAdmin(config, timeout_s=15) as admin, KafkaCoordinatorStore(config, name) as store:
        admin.ensure_topic(topic, 2)
        store.write_job_model(JobModel.initial(name, {topic: 2}))
        produce_keyed(config, topic, 20)
        holder = cli_holder()
        request = PlanRequest(job_name=name, topics=(topic,), check_partitioner=False)
        eid = plan(store, admin, request, holder).expansion_id
        lease = take(store, holder)
        expand(admin, store, ExpandRequest(topic=topic, target=4), expansion_id=eid, lease=lease)
        yield name, topic, store, admin, config, eid, lease


def _ui(store, eid, tmp_path) -> tuple[str, dict]:
    """The job page and JSON of a file store holding `store`'s models and record `eid`."""
    where = tmp_path / f"ui-{uuid.uuid4().hex[:6]}"
    files = FileCoordinatorStore(str(where), store.job_name)
    for model in store.job_model_history():
        files.write_job_model(model)
    files.put_expansion(store.get_expansion(eid), expected_revision=0)
    snap = read_job(UiSettings(coordinator=str(where), discover=False), store.job_name)
    return job_page(snap, "/samza-expand", ""), json.loads(json.dumps(snapshot_json(snap)))


def test_the_barrier_step_records_its_grace_and_the_page_counts_it_down(expanded, tmp_path):
    name, _, store, admin, _, eid, lease = expanded
    ends = barrier.grace_until(store, eid, 300.0, lease=lease)
    poll = barrier.snapshot_poll(
        admin, store, expansion_id=eid, group=name, grace_ends=ends, lease=lease
    )
    assert not poll.done and "of grace left" in poll.message
    grace = store.get_expansion(eid).results["grace"]
    assert grace["grace_s"] == pytest.approx(300.0, abs=0.01)
    assert (
        grace["ends_at"]
        and grace["started_at"] == store.get_expansion(eid).steps["expand"].ended_at
    )

    page, doc = _ui(store, eid, tmp_path)
    left = doc["running"]["grace"]["left_s"]
    assert 280 < left <= 300 and doc["running"]["grace"]["length_s"] == pytest.approx(300.0)
    shown = re.search(r"grace: (\d+) s left of 300\.0 s", re.sub(r"<[^>]+>", "", page))
    assert shown is not None and 280 < int(shown.group(1)) <= 300, page
    first = store.get_expansion(eid).results["grace"]  # a later poll keeps the first record
    barrier.snapshot_poll(admin, store, expansion_id=eid, group=name, grace_ends=ends, lease=lease)
    assert store.get_expansion(eid).results["grace"] == first


def test_the_barrier_lag_per_partition_is_recorded_and_charted_as_it_falls(expanded, tmp_path):
    name, topic, store, admin, config, eid, lease = expanded
    highs = admin.high_watermarks({topic: [0, 1]})[topic]
    totals = []
    for behind in (6, 2, 0):  # the job commits towards the barrier
        commit_offsets(config, name, topic, {0: max(highs[0] - behind, 0), 1: highs[1]})
        poll = barrier.barrier_poll(
            admin, store, expansion_id=eid, group=name, grace_ends=0.0, lease=lease,
            stale_quiet_s=0.0,
        )  # fmt: skip
        assert poll.done == (behind == 0), poll.message
        totals.append(store.get_expansion(eid).results["barrier_lag"][-1]["total"])
        if behind == 2:
            page, doc = _ui(store, eid, tmp_path)  # still draining
        time.sleep(0.01)
    assert totals == [min(6, highs[0]), min(2, highs[0]), 0]
    samples = store.get_expansion(eid).results["barrier_lag"]
    assert [s["partitions"] for s in samples][-1] == {f"{topic}[0]": 0, f"{topic}[1]": 0}
    assert samples[0]["at"] <= samples[-1]["at"]

    history = doc["running"]["lag_history"]
    assert [s["total"] for s in history] == totals[:2]
    assert history[0]["partitions"] == {f"{topic}[0]": totals[0], f"{topic}[1]": 0}
    chart = re.search(r"<svg class='lag'.*?</svg>", page)
    assert chart is not None and chart.group(0).count("<polyline") == 3  # total + 2 partitions
    assert f"barrier lag: {totals[0]} at most, {totals[1]} now" in chart.group(0)


def test_the_lag_history_keeps_the_newest_samples(expanded):
    _, topic, store, _, _, eid, lease = expanded
    store.put_expansion(  # waiting at its barrier
        store.get_expansion(eid).advance(ExpansionStatus.BARRIER_SNAPSHOT, barrier={topic: {0: 9}}),
        expected_revision=store.get_expansion(eid).revision,
    )
    for n in range(progress.LAG_SAMPLES + 5):
        progress.note_lag(store, eid, {topic: {0: n}}, fence=lease)
    samples = store.get_expansion(eid).results["barrier_lag"]
    assert len(samples) == progress.LAG_SAMPLES
    assert samples[-1]["total"] == progress.LAG_SAMPLES + 4 and samples[0]["total"] == 5


def test_a_wide_barriers_lag_sample_names_its_most_lagging_partitions_only(expanded):
    """A sample of a barrier wider than LAG_PARTITIONS keeps the most lagging partitions and
    counts the lagging ones: the record, rewritten at every poll, does not grow with the
    partitions times the samples (1,024 partitions x 60 samples went past Kafka's 1 MB)."""
    _, topic, store, _, _, eid, lease = expanded
    store.put_expansion(  # waiting at its barrier
        store.get_expansion(eid).advance(ExpansionStatus.BARRIER_SNAPSHOT, barrier={topic: {0: 9}}),
        expected_revision=store.get_expansion(eid).revision,
    )
    wide = {p: (p % 7 if p % 3 else 0) for p in range(1024)}  # 584 lag, up to 6 records
    for _ in range(progress.LAG_SAMPLES):
        progress.note_lag(store, eid, {topic: wide}, fence=lease)
    record = store.get_expansion(eid)
    sample = record.results["barrier_lag"][-1]
    assert (sample["total"], sample["lagging"]) == (sum(wide.values()), 584)
    most = sorted(((p, n) for p, n in wide.items() if n), key=lambda pn: -pn[1])[:16]
    assert sample["partitions"] == {f"{topic}[{p}]": n for p, n in most}  # 6s, by partition
    assert len(record.to_json()) < 100_000  # without the bound: about 1.9 MB


def test_a_rerun_of_a_passed_barrier_writes_no_lag_sample(expanded):
    name, topic, store, admin, config, eid, lease = expanded
    highs = admin.high_watermarks({topic: [0, 1]})[topic]
    commit_offsets(config, name, topic, dict(highs))
    poll = barrier.barrier_poll(
        admin, store, expansion_id=eid, group=name, grace_ends=0.0, lease=lease,
        stale_quiet_s=0.0,
    )  # fmt: skip
    assert poll.done, poll.message
    record = store.get_expansion(eid)
    assert [s["total"] for s in record.results["barrier_lag"]] == [0]
    again = barrier.barrier_poll(
        admin, store, expansion_id=eid, group=name, grace_ends=0.0, lease=lease,
        stale_quiet_s=0.0,
    )  # fmt: skip
    assert again.done and store.get_expansion(eid).revision == record.revision
