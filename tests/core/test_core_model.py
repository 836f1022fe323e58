"""SystemStreamPartition and JobModel: views, validation, canonical JSON codec."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from airflow_samza_expand.core.errors import ExpansionError, InvalidJobModelError
from airflow_samza_expand.core.model import (
    JobModel,
    StreamPartitionCounts,
    SystemStreamPartition,
    pretty_json,
)

SAMPLE = Path(__file__).resolve().parents[2] / "airflow_samza_expand/examples/sample_job_model.json"
T0 = "2026-11-22T01:02:03Z"


def S(stream: str, p: int, system: str = "kafka") -> SystemStreamPartition:  # noqa: N802
    return SystemStreamPartition(system, stream, p)


def two_streams() -> JobModel:
    return JobModel.initial("orders-counter", {"orders": 4, "payments": 2}, created_at=T0)


def test_ssp_is_frozen_hashable_ordered():
    a, b = S("orders", 2), S("orders", 10)
    assert a < b and sorted([b, a]) == [a, b]
    assert len({a, S("orders", 2)}) == 1
    with pytest.raises(AttributeError):
        a.partition = 3  # type: ignore[misc]
    assert str(a) == "[kafka, orders, 2]"


def test_initial_model_views():
    model = two_streams()
    assert model.version == 1
    assert model.partition_counts() == {"orders": 4, "payments": 2}
    assert model.streams == (
        StreamPartitionCounts("kafka", "orders", 4, 4),
        StreamPartitionCounts("kafka", "payments", 2, 2),
    )
    assert model.tasks() == ["Partition 0", "Partition 1", "Partition 2", "Partition 3"]
    assert model.task_to_ssps()["Partition 1"] == {S("orders", 1), S("payments", 1)}
    assert model.ssp_to_task[S("orders", 3)] == "Partition 3"
    assert model.grouper == "GroupByPartitionFixedTasks"
    assert model.created_at == T0


def test_initial_with_other_grouper():
    model = JobModel.initial("j", {"orders": 2}, grouper="GroupBySystemStreamPartition")
    assert model.tasks() == [
        "SystemStreamPartition [kafka, orders, 0]",
        "SystemStreamPartition [kafka, orders, 1]",
    ]
    assert JobModel.initial("j", {"a": 3}, grouper="AllSspToSingleTaskGrouper").tasks() == [
        "Task-0"
    ]


def test_json_round_trips_byte_identically_with_sorted_compact_keys():
    model = two_streams()
    text = model.to_json()
    assert ", " not in text and ": " not in text
    assert list(json.loads(text)) == sorted(json.loads(text))
    again = JobModel.from_json(text)
    assert again == model and hash(again) == hash(model)
    assert again.to_json() == text
    assert JobModel.from_json(text.encode()).to_json() == text
    assert JobModel.from_json(pretty_json(model.to_dict())).to_json() == text


def test_json_layout_is_documented_one():
    doc = json.loads(two_streams().to_json())
    assert doc["tasks"]["Partition 0"] == [["kafka", "orders", 0], ["kafka", "payments", 0]]
    assert doc["streams"][0] == {"current": 4, "initial": 4, "stream": "orders", "system": "kafka"}
    assert doc["format"] == 1 and doc["broadcast"] == []


def test_sample_job_model_is_valid_and_as_documented():
    model = JobModel.from_json(SAMPLE.read_text())
    assert model.job_name == "orders-counter"
    assert model.version == 1
    assert model.partition_counts() == {"orders": 2}
    assert model.grouper == "GroupByPartitionFixedTasks"


def test_content_equals_ignores_version_and_provenance_only():
    model = two_streams()
    other = JobModel.from_json(
        model.to_json()
        .replace('"version":1', '"version":7')
        .replace(T0, "2027-01-01T00:00:00Z")
        .replace('"created_by":"airflow-samza-expand"', '"created_by":"someone"')
    )
    assert other != model and model.content_equals(other)
    moved = dict(model.ssp_to_task)
    moved[S("orders", 3)] = "Partition 0"
    changed = JobModel(1, model.job_name, model.streams, moved, created_at=T0)
    assert not model.content_equals(changed)
    assert not model.content_equals("not a model")


def test_broadcast_ssps_are_in_every_task_and_round_trip():
    streams = (
        StreamPartitionCounts("kafka", "orders", 2, 2),
        StreamPartitionCounts("kafka", "cfg", 1, 1),
    )
    model = JobModel(
        1,
        "j",
        streams,
        {S("orders", 0): "Partition 0", S("orders", 1): "Partition 1"},
        created_at=T0,
        broadcast_ssps=frozenset({S("cfg", 0)}),
    )
    assert all(S("cfg", 0) in ssps for ssps in model.task_to_ssps().values())
    assert JobModel.from_json(model.to_json()) == model


def corrupt(path: list, value, *, delete: bool = False) -> str:
    doc = json.loads(two_streams().to_json())
    target = doc
    for key in path[:-1]:
        target = target[key]
    if delete:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return json.dumps(doc)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            corrupt(["streams", 0, "current"], -1),
            "job model field 'streams[0].current' must be a positive integer, got -1",
        ),
        (corrupt(["streams", 1, "initial"], "2"), "field 'streams[1].initial' must be a positive"),
        (
            corrupt(["streams", 0, "current"], 6),
            "field 'streams[0].current' (6) of stream 'orders' must be a multiple of its "
            "initial count (4)",
        ),
        (corrupt(["version"], 0), "field 'version' must be a positive integer, got 0"),
        (corrupt(["version"], True), "field 'version' must be a positive integer"),
        (corrupt(["job_name"], ""), "field 'job_name' must be a non-empty string"),
        (corrupt(["created_at"], "yesterday"), "field 'created_at' must be an ISO-8601 UTC time"),
        (corrupt(["grouper"], None, delete=True), "field 'grouper' is missing"),
        (corrupt(["surprise"], 1), "field 'surprise' is not a job model field"),
        (corrupt(["format"], 2), "field 'format' must be 1"),
        (
            corrupt(["streams", 0, "colour"], "red"),
            "field 'streams[0].colour' is not a stream field",
        ),
        (corrupt(["streams"], []), "field 'streams' must be a non-empty list"),
        (
            corrupt(["tasks", "Partition 0", 0], ["kafka", "orders"]),
            "field 'tasks['Partition 0'][0]' must be [system, stream, partition]",
        ),
        (
            corrupt(["tasks", "Partition 0", 0, 2], -3),
            "field 'tasks['Partition 0'][0][2]' must be a partition number",
        ),
        (
            corrupt(["tasks", "Partition 1", 0], ["kafka", "orders", 0]),
            "field 'tasks['Partition 1'][0]' repeats [kafka, orders, 0], already in task "
            "'Partition 0'",
        ),
        (
            corrupt(["tasks", "Partition 3"], [["kafka", "orders", 9]]),
            "names partition 9 of stream 'orders', beyond its partition count 4",
        ),
        (
            corrupt(["tasks", "Partition 3"], [["kafka", "refunds", 0]]),
            "names [kafka, refunds, 0] of stream 'refunds', which is not in 'streams'",
        ),
        (
            corrupt(["tasks", "Partition 3"], None, delete=True),
            "leaves partitions [3] of stream 'orders' (count 4) without a task",
        ),
        (
            corrupt(["tasks", "Partition 3"], []),
            "field 'tasks['Partition 3']' must be a non-empty list",
        ),
        ('{"version": 1, "version": 2}', "field 'version' appears twice"),
        ("[1, 2]", "job model must be a JSON object, got list"),
        ("{not json", "job model is not valid JSON"),
        (b"\xff\xfe", "job model is not UTF-8"),
    ],
)
def test_malformed_documents_name_the_bad_field(text, message):
    with pytest.raises(InvalidJobModelError) as info:
        JobModel.from_json(text)
    assert message in str(info.value)
    assert isinstance(info.value, ExpansionError)


def test_constructor_validates_too():
    streams = (StreamPartitionCounts("kafka", "orders", 2, 2),)
    with pytest.raises(InvalidJobModelError, match="leaves partitions \\[1\\]"):
        JobModel(1, "j", streams, {S("orders", 0): "Partition 0"}, created_at=T0)
    with pytest.raises(InvalidJobModelError, match="repeats stream name 'orders'"):
        JobModel(
            1,
            "j",
            streams + (StreamPartitionCounts("other", "orders", 1, 1),),
            {S("orders", 0): "a", S("orders", 1): "b", S("orders", 0, "other"): "c"},
            created_at=T0,
        )


def test_initial_refuses_bad_counts():
    with pytest.raises(InvalidJobModelError, match="at least one input stream"):
        JobModel.initial("j", {})
    with pytest.raises(InvalidJobModelError, match="must be a positive integer, got 0"):
        JobModel.initial("j", {"orders": 0})
