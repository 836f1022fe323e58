"""KafkaCoordinatorStore against a broker: topic layout, round trip, records, races, corruption."""

from __future__ import annotations

import threading

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType
from kafka_test_data import history, model, produce

from airflow_samza_expand._kafka.admin import KafkaAdmin, KafkaUnavailableError
from airflow_samza_expand._kafka.config import client_config
from airflow_samza_expand.core.errors import (
    ConcurrentExpansionError,
    CorruptCoordinatorRecordError,
    ExpansionError,
    InvalidJobModelError,
)
from airflow_samza_expand.store import coordinator_topic, open_store
from airflow_samza_expand.store._kafka import KafkaCoordinatorStore
from airflow_samza_expand.store._kafka_log import encode_key


@pytest.fixture
def config(kafka_bootstrap):
    return client_config(kafka_bootstrap)


@pytest.fixture
def job(unique_topic):
    return unique_topic("job")


@pytest.fixture
def stores(config, job):
    """Factory of stores of `job` (each its own writer); all closed at the end."""
    made: list[KafkaCoordinatorStore] = []

    def make(**kwargs) -> KafkaCoordinatorStore:
        store = KafkaCoordinatorStore(config, job, timeout_s=15, **kwargs)
        made.append(store)
        return store

    yield make
    for store in made:
        store.close()


def test_topic_is_created_compacted_single_partition_on_first_write(config, job, stores):
    store = stores()
    topic = coordinator_topic(job)
    assert store.topic == topic == f"__samza_coordinator_{job}"
    assert store.latest_job_model() is None  # reading does not create the topic
    admin = KafkaAdmin(config, timeout_s=15)
    assert topic not in admin.topic_names()
    store.write_job_model(model(job, 1))
    assert admin.partition_counts([topic]) == {topic: 1}
    resource = ConfigResource(ResourceType.TOPIC, topic)
    client = AdminClient(config)  # keep a reference until the future resolves
    described = client.describe_configs([resource])[resource].result(15)
    assert described["cleanup.policy"].value == "compact"


def test_round_trip_history_and_fresh_reader(job, stores):
    models = history(job, 12)
    writer = stores()
    for m in models:
        assert writer.write_job_model(m) == m
    reader = stores()
    assert reader.latest_job_model() == models[-1]
    assert reader.job_model(5) == models[4]
    assert reader.job_model(13) is None
    assert reader.job_model_history() == models
    writer.write_job_model(model(job, 13, variant="a"))  # the reader sees new records
    assert reader.latest_job_model().version == 13


def test_version_rules_and_idempotent_rewrite(job, stores):
    store = stores()
    with pytest.raises(InvalidJobModelError, match="must be v1"):
        store.write_job_model(model(job, 2))
    v1 = store.write_job_model(model(job, 1, variant="a"))
    assert stores().write_job_model(model(job, 1, variant="a", created_by="rerun")) == v1
    with pytest.raises(ConcurrentExpansionError):
        stores().write_job_model(model(job, 1, variant="b"))
    with pytest.raises(InvalidJobModelError, match="must be v2"):
        store.write_job_model(model(job, 3))
    assert [m.version for m in stores().job_model_history()] == [1]
    assert stores().latest_job_model() == v1


def test_expansion_control_and_processor_records(job, stores):
    store = stores()
    store.put_expansion_doc("exp-1", {"status": "planned"})
    store.put_expansion_doc("exp-1", {"status": "expanded", "barrier": {"orders": {"0": 7}}})
    store.request_stop(4, "expansion exp-1")
    store.heartbeat("proc-a", 4, "running")
    store.heartbeat("proc-b", 4, "stopping")
    store.heartbeat("proc-a", 4, "stopped")
    reader = stores()
    assert reader.get_expansion_doc("exp-1") == {
        "status": "expanded",
        "barrier": {"orders": {"0": 7}},
    }
    assert reader.get_expansion_doc("exp-2") is None
    assert reader.stop_request()["version"] == 4
    assert {k: v["state"] for k, v in reader.processors().items()} == {
        "proc-a": "stopped",
        "proc-b": "stopping",
    }
    store.clear_stop()
    assert reader.stop_request() is None
    with pytest.raises(ValueError, match="state"):
        store.heartbeat("proc-a", 4, "sleeping")


def _race(stores_, contents):
    """Every writer passes all its checks ('vN is newest', 'vN+1 absent') before any appends its
    record, then all append: the read-back alone must pick the winner."""
    gate = threading.Barrier(len(stores_))
    for s in stores_:
        original = s.backend._produce
        first = [True]

        def held(key, value, original=original, first=first):
            if first[0]:  # the candidate record; the loser's tombstone later passes straight
                first[0] = False
                gate.wait(timeout=60)
            return original(key, value)

        s.backend._produce = held
    outcomes: list[object] = [None] * len(stores_)

    def run(i):
        try:
            outcomes[i] = stores_[i].write_job_model(contents[i])
        except Exception as exc:  # noqa: BLE001 - recorded for the assertions
            outcomes[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(stores_))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    for s in stores_:
        del s.backend._produce  # back to the real method
    return outcomes


def test_two_writers_race_exactly_one_wins(job, stores):
    stores().write_job_model(model(job, 1))
    for version in range(2, 6):
        a, b = stores(writer_id="writer-a"), stores(writer_id="writer-b")
        outcomes = _race(
            [a, b],
            [
                model(job, version, variant="a", created_by="airflow-a"),
                model(job, version, variant="b", created_by="airflow-b"),
            ],
        )
        winners = [o for o in outcomes if not isinstance(o, Exception)]
        losers = [o for o in outcomes if isinstance(o, Exception)]
        assert len(winners) == 1 and len(losers) == 1, outcomes
        assert isinstance(losers[0], ConcurrentExpansionError)
        assert "writer-a" in str(losers[0]) and "writer-b" in str(losers[0])
        for reader in (stores(), a, b):
            assert reader.latest_job_model() == winners[0]
            assert reader.latest_job_model().version == version
    assert [m.version for m in stores().job_model_history()] == [1, 2, 3, 4, 5]


def test_race_with_same_content_both_succeed(job, stores):
    stores().write_job_model(model(job, 1))
    outcomes = _race(
        [stores(), stores()],
        [model(job, 2, created_by="one"), model(job, 2, created_by="two")],
    )
    assert not any(isinstance(o, Exception) for o in outcomes), outcomes
    assert outcomes[0] == outcomes[1] == stores().latest_job_model()


def test_later_candidate_never_displaces_the_winner(config, job, stores):
    store = stores()
    store.write_job_model(model(job, 1))
    winner = store.write_job_model(model(job, 2, variant="a"))
    # a stale writer appends another candidate for v2 after the fact (as a crashed loser could)
    late = model(job, 2, variant="b").to_json().encode()
    produce(config, store.topic, [(encode_key("job-model", "2", "stale-writer"), late, 0)])
    assert stores().latest_job_model() == winner
    assert stores().job_model_history()[-1] == winner


def test_corrupt_key_names_topic_offset_and_key(config, job, stores):
    store = stores()
    store.write_job_model(model(job, 1))
    produce(config, store.topic, [(b"not-a-json-key", b"{}", 0)])
    with pytest.raises(CorruptCoordinatorRecordError) as info:
        stores().latest_job_model()
    message = str(info.value)
    assert store.topic in message and "offset 1" in message and "not-a-json-key" in message
    with pytest.raises(CorruptCoordinatorRecordError):
        store.write_job_model(model(job, 2))  # nothing is written on top of it
    # the fix the message names: a tombstone for that key makes the store readable again
    produce(config, store.topic, [(b"not-a-json-key", None, 0)])
    assert stores().latest_job_model() == model(job, 1)
    assert store.write_job_model(model(job, 2)) == model(job, 2)


def test_corrupt_job_model_value(config, job, stores):
    store = stores()
    store.write_job_model(model(job, 1))
    key = encode_key("job-model", "2", "someone")
    produce(config, store.topic, [(key, b'{"version": 2, "tasks"', 0)])
    reader = stores()
    with pytest.raises(CorruptCoordinatorRecordError) as info:
        reader.latest_job_model()
    message = str(info.value)
    assert store.topic in message and "offset 1" in message and "someone" in message
    assert reader.job_model(1) == model(job, 1)  # other versions still read
    with pytest.raises(CorruptCoordinatorRecordError):
        reader.write_job_model(model(job, 3))  # no write on top of a corrupt newest model


def test_corrupt_json_record(config, job, stores):
    store = stores()
    store.heartbeat("p", 1, "running")
    produce(config, store.topic, [(encode_key("processor", "q"), b"[oops", 0)])
    with pytest.raises(CorruptCoordinatorRecordError, match="offset 1"):
        stores().processors()


def test_multi_partition_coordinator_topic_is_refused(config, unique_topic, job):
    topic = unique_topic("coord")
    KafkaAdmin(config).ensure_topic(topic, 2)
    store = KafkaCoordinatorStore(config, job, topic, timeout_s=15)
    with pytest.raises(ExpansionError, match="exactly 1"):
        store.latest_job_model()


def test_open_store_kafka(config, job, unique_topic):
    topic = unique_topic("coord")
    store = open_store(f"kafka://{topic}", job, config)
    assert isinstance(store, KafkaCoordinatorStore) and store.topic == topic
    store.write_job_model(model(job, 1))
    assert open_store(f"kafka://{topic}", job, config).latest_job_model() == model(job, 1)
    assert open_store("kafka", job, config).topic == coordinator_topic(job)
    store.close()


def test_unreachable_broker():
    store = KafkaCoordinatorStore(client_config("127.0.0.1:9"), "j", timeout_s=2)
    with pytest.raises(KafkaUnavailableError, match="127.0.0.1:9"):
        store.latest_job_model()
    store.close()
