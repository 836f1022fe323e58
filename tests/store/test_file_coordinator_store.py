"""FileCoordinatorStore: round trip, history, records, exclusive vN+1, corrupt files."""

from __future__ import annotations

import threading
import uuid

import pytest
from kafka_test_data import history, model

from airflow_samza_expand.core.errors import (
    ConcurrentExpansionError,
    CorruptCoordinatorRecordError,
    InvalidJobModelError,
)
from airflow_samza_expand.store import open_store
from airflow_samza_expand.store._files import FileCoordinatorStore

JOB = "orders-counter"


@pytest.fixture(params=["local", "file-url", "memory"])
def store(request, tmp_path):
    if request.param == "local":
        return FileCoordinatorStore(str(tmp_path), JOB)
    if request.param == "file-url":
        return open_store(f"file://{tmp_path}", JOB)
    url = f"memory://coordinator-{uuid.uuid4().hex}"
    return open_store(url, JOB)


def test_empty_store(store):
    assert store.latest_job_model() is None
    assert store.job_model(1) is None
    assert store.job_model_history() == []
    assert store.stop_request() is None
    assert store.processors() == {}
    assert store.get_expansion("x") is None


def test_round_trip_and_history(store):
    models = history(JOB, 5)
    for m in models:
        assert store.write_job_model(m) == m
    assert store.latest_job_model() == models[-1]
    assert store.job_model(3) == models[2]
    assert store.job_model_history() == models
    assert store.latest_job_model().to_json() == models[-1].to_json()


def test_version_rules(store):
    with pytest.raises(InvalidJobModelError, match="must be v1"):
        store.write_job_model(model(JOB, 2))
    store.write_job_model(model(JOB, 1))
    with pytest.raises(InvalidJobModelError, match="must be v2"):
        store.write_job_model(model(JOB, 3))
    with pytest.raises(InvalidJobModelError, match="store of job"):
        store.write_job_model(model("other-job", 2))
    assert [m.version for m in store.job_model_history()] == [1]


def test_rewrite_same_content_is_noop_other_content_conflicts(store):
    v1 = model(JOB, 1, variant="a")
    store.write_job_model(v1)
    again = model(JOB, 1, variant="a", created_by="someone-else")
    assert store.write_job_model(again) == v1  # the stored one, unchanged
    with pytest.raises(ConcurrentExpansionError, match="already exists with other content"):
        store.write_job_model(model(JOB, 1, variant="b"))
    assert store.latest_job_model() == v1


def test_records(store):
    store.put_expansion_doc("exp-1", {"status": "planned", "barrier": {"orders": {"0": 5}}})
    store.put_expansion_doc("exp-1", {"status": "expanded"})
    store.put_expansion_doc("a/b c", {"status": "odd id"})
    assert store.get_expansion_doc("exp-1") == {"status": "expanded"}
    assert store.get_expansion_doc("a/b c") == {"status": "odd id"}
    store.request_stop(3, "expansion exp-1")
    stop = store.stop_request()
    assert stop["version"] == 3 and stop["reason"] == "expansion exp-1" and stop["requested_at"]
    store.clear_stop()
    assert store.stop_request() is None
    store.heartbeat("proc-1", 3, "running")
    store.heartbeat("proc-2", 3, "starting")
    store.heartbeat("proc-1", 3, "stopped")
    procs = store.processors()
    assert sorted(procs) == ["proc-1", "proc-2"]
    assert procs["proc-1"]["state"] == "stopped" and procs["proc-1"]["job_model_version"] == 3


def test_bad_records_change_nothing(store):
    with pytest.raises(ValueError, match="state"):
        store.heartbeat("p", 1, "dancing")
    with pytest.raises(ValueError, match="JSON-serialisable"):
        store.put_expansion_doc("e", {"when": object()})
    with pytest.raises(ValueError, match="version"):
        store.request_stop(0, "x")
    assert store.processors() == {} and store.get_expansion_doc("e") is None
    assert store.stop_request() is None


def _race(stores, contents):
    """Both writers pass all checks ('vN is newest', 'vN+1 absent') before either creates its
    file, then both create: the exclusive create alone must pick the winner."""
    gate = threading.Barrier(len(stores))
    for s in stores:
        files = s.backend.files
        original = files.create_exclusive

        def held(data, *parts, original=original):
            gate.wait(timeout=30)
            return original(data, *parts)

        files.create_exclusive = held
    outcomes: list[object] = [None] * len(stores)

    def run(i):
        try:
            outcomes[i] = stores[i].write_job_model(contents[i])
        except Exception as exc:  # noqa: BLE001 - recorded for the assertions
            outcomes[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(stores))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    for s in stores:
        del s.backend.files.create_exclusive  # back to the real method
    return outcomes


def test_two_writers_race_for_next_version(tmp_path):
    FileCoordinatorStore(str(tmp_path), JOB).write_job_model(model(JOB, 1))
    for version in range(2, 12):  # many rounds: either may win each time
        a, b = FileCoordinatorStore(str(tmp_path), JOB), FileCoordinatorStore(str(tmp_path), JOB)
        ma = model(JOB, version, variant="a", created_by="writer-a")
        mb = model(JOB, version, variant="b", created_by="writer-b")
        outcomes = _race([a, b], [ma, mb])
        winners = [o for o in outcomes if not isinstance(o, Exception)]
        losers = [o for o in outcomes if isinstance(o, Exception)]
        assert len(winners) == 1 and len(losers) == 1, outcomes
        assert isinstance(losers[0], ConcurrentExpansionError)
        assert "writer-a" in str(losers[0]) and "writer-b" in str(losers[0])
        fresh = FileCoordinatorStore(str(tmp_path), JOB)
        assert fresh.latest_job_model() == winners[0]
        assert fresh.latest_job_model().version == version


def test_race_with_same_content_both_succeed(tmp_path):
    FileCoordinatorStore(str(tmp_path), JOB).write_job_model(model(JOB, 1))
    a, b = FileCoordinatorStore(str(tmp_path), JOB), FileCoordinatorStore(str(tmp_path), JOB)
    outcomes = _race([a, b], [model(JOB, 2, created_by="a"), model(JOB, 2, created_by="b")])
    assert all(not isinstance(o, Exception) for o in outcomes), outcomes
    assert outcomes[0] == outcomes[1]  # both return the single stored model


def test_corrupt_files_name_the_file(tmp_path):
    store = FileCoordinatorStore(str(tmp_path), JOB)
    store.write_job_model(model(JOB, 1))
    path = tmp_path / JOB / "job-model" / "2.json"
    path.write_text('{"version": 2, "job_name"')
    with pytest.raises(CorruptCoordinatorRecordError, match=r"2\.json"):
        store.latest_job_model()
    assert store.job_model(1) == model(JOB, 1)
    path.write_text(model(JOB, 3).to_json())  # a valid model under the wrong version
    with pytest.raises(CorruptCoordinatorRecordError, match="expected job 'orders-counter' v2"):
        store.job_model(2)
    (tmp_path / JOB / "processor").mkdir()
    (tmp_path / JOB / "processor" / "p.json").write_text("[1, 2")
    with pytest.raises(CorruptCoordinatorRecordError, match="processor"):
        store.processors()


def test_open_store_choices(tmp_path):
    assert isinstance(open_store(str(tmp_path), JOB), FileCoordinatorStore)
    with pytest.raises(ValueError, match="kafka_config"):
        open_store("kafka", JOB)
    with pytest.raises(ValueError, match="empty coordinator store location"):
        open_store("  ", JOB)
    with pytest.raises(ValueError, match="cannot name a Kafka topic"):
        open_store(str(tmp_path), "bad/job")
