"""The provider's reader plans one read split (one Spark read task) per Kafka partition, or at
most ``max_read_splits``; the keyed state applies a task's records in (partition, offset) order
whichever splits they arrive from. Pure: no Spark session, no Kafka (the reader's planning
reads no broker)."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from airflow_samza_expand.core._plan import plan_expansion
from airflow_samza_expand.core.model import JobModel
from airflow_samza_expand.spark._source import SOURCE_SCHEMA, SamzaKafkaStreamReader
from airflow_samza_expand.spark._source_splits import ReadSplit, pack, parse_max_splits

pytestmark = pytest.mark.spark

T = "orders"


def _grown() -> JobModel:
    v1 = JobModel.initial("job", {T: 2})
    v2 = plan_expansion(v1, {T: 4}, {T: 4}).new_job_model
    return plan_expansion(v2, {T: 8}, {T: 8}).new_job_model


def _reader(model: JobModel, **options: str) -> SamzaKafkaStreamReader:
    return SamzaKafkaStreamReader(
        SOURCE_SCHEMA, {"job_model": model.to_json(), "bootstrap_servers": "127.0.0.1:1", **options}
    )


# a checkpoint of the 2-partition job, and a batch end over the 8 partitions (sizes 10..80)
START = {T: {"0": 100, "1": 200}}
END = {T: {"0": 110, "1": 220, **{str(p): 10 * (p + 1) for p in range(2, 8)}}}
RANGES = [(T, 0, 100, 110), (T, 1, 200, 220)] + [(T, p, 0, 10 * (p + 1)) for p in range(2, 8)]


def test_a_batch_after_2_to_8_has_one_read_split_per_partition(tmp_path) -> None:
    report = tmp_path / "plan.json"
    reader = _reader(_grown(), plan_report=str(report))
    splits = reader.partitions(START, END)
    assert len(splits) == 8  # one read task per Kafka partition (the old planning: 2, per task)
    assert [(s.tasks, s.ranges) for s in splits] == [
        ([f"Partition {r[1] % 2}"], [r]) for r in RANGES
    ]  # each whole range, with its SSP's fixed task
    doc = json.loads(report.read_text())
    assert (doc["version"], doc["read_tasks"], doc["end"]) == (3, 8, END)
    # a partition without records in the batch gets no read task
    quiet = {T: {**END[T], "5": 0}}
    assert len(reader.partitions(START, quiet)) == 7
    assert json.loads(report.read_text())["read_tasks"] == 7


def test_max_read_splits_packs_whole_partitions_into_that_many_splits() -> None:
    splits = _reader(_grown(), max_read_splits="3").partitions(START, END)
    assert len(splits) == 3
    got = [r for s in splits for r in s.ranges]
    assert sorted(got) == sorted(RANGES)  # every range once, never divided
    for s in splits:
        assert s.ranges == sorted(s.ranges)  # a split reads its partitions in order
        assert s.tasks == [f"Partition {r[1] % 2}" for r in s.ranges]
    # balanced by records: largest first onto the lightest split (sizes 10, 20, .. 80)
    assert sorted(sum(r[3] - r[2] for r in s.ranges) for s in splits) == [110, 120, 130]
    one = _reader(_grown(), max_read_splits="1").partitions(START, END)
    assert [s.ranges for s in one] == [RANGES]
    # a cap above the partition count changes nothing
    assert len(_reader(_grown(), max_read_splits="64").partitions(START, END)) == 8


def test_packing_is_deterministic_and_a_cap_of_0_means_one_per_partition() -> None:
    ranges = [(f"Partition {p % 2}", (T, p, 0, 5)) for p in range(8)]
    assert pack(ranges, 0) == [[r] for r in ranges]
    assert pack(list(reversed(ranges)), 3) == pack(ranges, 3)
    assert [len(g) for g in pack(ranges, 3)] == [3, 3, 2]


@pytest.mark.parametrize("bad", ["-1", "two", "1.5"])
def test_a_bad_max_read_splits_is_refused_naming_the_fix(bad: str) -> None:
    with pytest.raises(ValueError, match=r"max_read_splits .* whole number >= 0"):
        _reader(_grown(), max_read_splits=bad)
    assert parse_max_splits(None) == 0 and parse_max_splits("4") == 4


def test_a_split_needs_a_task_per_range() -> None:
    with pytest.raises(ValueError, match="2 ranges but 1 tasks"):
        ReadSplit([(T, 0, 0, 1), (T, 2, 0, 1)], ["Partition 0"])


def _frame(partition: int, offsets: range, seqs: range) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "task": "Partition 0",
            "topic": T,
            "partition": partition,
            "offset": list(offsets),
            "key": "moved",
            "value": [json.dumps({"seq": s}).encode() for s in seqs],
        }
    )


def test_state_applies_a_tasks_records_in_partition_offset_order_across_splits() -> None:
    """A key moved 0 -> 2 by the growth: seq 0..4 in parent 0 (offsets 50..), seq 5..9 in child
    2 (offsets 0..). Read by two splits, the child's rows may reach the group first; applied in
    (partition, offset) order the key's sequence is unbroken."""
    from airflow_samza_expand.spark._processor import DEFAULT_PROCESSOR, SequenceCounter
    from airflow_samza_expand.spark._state import StatefulFunction

    parent, child = _frame(0, range(50, 55), range(5)), _frame(2, range(5), range(5, 10))
    # as the splits arrive (child first), unsorted, the counter would see a broken sequence
    as_arrived = pd.concat([child, parent], ignore_index=True)
    assert SequenceCounter().process(SequenceCounter().init_state(), as_arrived)[0]["violations"]

    class State:
        exists, value = False, None

        @property
        def get(self) -> tuple:
            return self.value

        def update(self, value: tuple) -> None:
            self.exists, self.value = True, value

    for buckets in (0, 4):
        state = State()
        fn = StatefulFunction(DEFAULT_PROCESSOR, buckets)
        frames = [child, parent] if not buckets else [child.assign(bucket=1), parent]
        (out,) = list(fn(("Partition 0", "moved"), iter(frames), state))
        assert json.loads(out.value.iloc[0]) == {
            "key": "moved", "task": "Partition 0", "count": 10, "last_seq": 9, "violations": 0,
        }  # fmt: skip
