"""The Kafka backend: a compacted, single-partition topic (format: store._kafka_log).

The topic, by default `__samza_coordinator_<job>`, is created (``cleanup.policy=compact``) on
the first write. Records are read from the log start up to the high watermark taken when the
read starts and applied in log order (store._kafka_log decides what they say).

Conditional writes (expansion records, leases): the writer appends its candidate for revision
r+1, reads to the end, and has won if its candidate is the accepted one; otherwise it writes a
tombstone for its candidate and raises (`StaleRevisionError`, `LeaseLostError`) or re-decides
(leases). The winner tombstones older revisions, so compaction keeps about one record per id.
Job models: a writer appends its candidate only while vN-1 is newest and reads back; the
lowest offset is vN forever (the loser tombstones its own and raises
`ConcurrentExpansionError`, or returns the winner if the content is the same).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping

from airflow_samza_expand._kafka.config import bootstrap_of
from airflow_samza_expand.core._lease import Lease
from airflow_samza_expand.core.errors import ExpansionError
from airflow_samza_expand.store._backend import Claim, Stored
from airflow_samza_expand.store._coordinator_store import CoordinatorStore
from airflow_samza_expand.store._kafka_io import TopicIO
from airflow_samza_expand.store._kafka_log import CoordinatorLog, Entry, encode_key
from airflow_samza_expand.store._kinds import (
    EXPANSION,
    JOB_MODEL,
    LEGACY_EXPANSION,
    coordinator_topic,
)
from airflow_samza_expand.store._records import default_writer_id


def _record_type(kind: str) -> str:
    """The key's type in the log: legacy documents are plain `expansion` keys (no revision)."""
    return EXPANSION if kind == LEGACY_EXPANSION else kind


class KafkaLog:
    """Backend (store._backend) on one coordinator topic: `TopicIO` reads and appends,
    `CoordinatorLog` says what the records read so far establish."""

    exact_fencing = True  # the log order decides a fenced write (store._kafka_log)

    def __init__(
        self,
        config: Mapping[str, str],
        topic: str,
        timeout_s: float,
        replication_factor: int,
        writer_id: str,
    ) -> None:
        self.topic = topic
        self.writer_id = writer_id  # names our candidates in record keys
        self.io = TopicIO(config, topic, timeout_s, replication_factor)
        self.log = CoordinatorLog(topic)

    def __repr__(self) -> str:
        return f"KafkaLog(topic={self.topic!r}, bootstrap={bootstrap_of(self.io.config)!r})"

    def refresh(self) -> None:
        """Read new records up to the high watermark taken now (one sequential fetch loop).

        Raises CorruptCoordinatorRecordError while a record with an unparseable key is in force.
        """
        self.io.read_to_end(self.log.apply)
        self.log.raise_if_corrupt()

    def close(self) -> None:
        self.io.close()

    def _stored(self, entry: Entry, revision: int = 0) -> Stored:
        where = f"topic {self.topic!r} at offset {entry.offset}"
        key = entry.key.decode("utf-8", "replace")
        return Stored(entry.value, where, key, revision, entry.offset)

    def _produce(self, key: bytes, value: bytes | None) -> int:
        return self.io.produce([(key, value)])[0]

    # -- job models -------------------------------------------------------------------------

    def job_model_versions(self) -> list[int]:
        return sorted(self.log.candidates)

    def job_model(self, version: int) -> Stored | None:
        winner = self.log.winner(version)
        return None if winner is None else self._stored(winner[1])

    def job_model_writer(self, version: int) -> str | None:
        winner = self.log.winner(version)
        return None if winner is None else winner[0]

    def claim_job_model(self, version: int, value: bytes, writer: str) -> Claim:
        """Append our candidate, read back: the lowest offset is vN (a loser withdraws its own)."""
        key = encode_key(JOB_MODEL, str(version), writer)
        offset = self._produce(key, value)
        self.refresh()
        winner = self.log.winner(version)
        if winner is not None and winner[0] == writer:
            return Claim(True, self._stored(winner[1]), writer, f"offset {offset} of {self.topic}")
        self._produce(key, None)  # withdraw ours (tidiness only)
        self.refresh()
        if winner is None:  # pragma: no cover - our own record must be there
            raise ExpansionError(f"job model v{version} vanished from {self.topic!r}")
        where = f"topic {self.topic!r} (winner at offset {winner[1].offset}, ours at {offset})"
        return Claim(False, self._stored(winner[1]), winner[0], where)

    # -- conditional records ----------------------------------------------------------------

    def current(self, kind: str, ident: str) -> Stored | None:
        chain = self.log.chain(kind, ident)
        if chain is None or chain.current is None:
            return None
        return self._stored(chain.current, chain.revision)

    def ids(self, kind: str) -> list[str]:
        return [key for (k, key) in self.log.chains if k == kind]

    def write_revision(
        self, kind: str, ident: str, expected: int, value: bytes, fence: Lease | None
    ) -> bool:
        """Append revision `expected + 1`; True if the log accepts it. The winner tombstones
        obsolete candidates; a loser tombstones its own."""
        revision = expected + 1
        writer = f"{self.writer_id}/{uuid.uuid4().hex[:8]}"
        fenced = None if fence is None else (fence.name, fence.epoch)
        record_key = encode_key(kind, ident, writer, revision=revision, fence=fenced)
        offset = self._produce(record_key, value)
        self.refresh()
        chain = self.log.chain(kind, ident)
        if chain is not None and chain.current is not None and chain.current.offset == offset:
            obsolete = chain.obsolete()
            if obsolete:
                self.io.produce([(k, None) for k in obsolete])
            return True
        self._produce(record_key, None)
        return False

    # -- plain records ----------------------------------------------------------------------

    def read(self, kind: str, key: str) -> Stored | None:
        entry = self.log.records.get((_record_type(kind), key))
        return None if entry is None else self._stored(entry)

    def keys(self, kind: str) -> list[str]:
        wanted = _record_type(kind)
        return sorted(k for (t, k) in self.log.records if t == wanted)

    def put(self, kind: str, key: str, value: bytes) -> None:
        self._produce(encode_key(_record_type(kind), key), value)

    def delete(self, kind: str, key: str) -> None:
        if self.io.topic_exists():
            self._produce(encode_key(_record_type(kind), key), None)


class KafkaCoordinatorStore(CoordinatorStore):
    """The coordinator store on a compacted, single-partition Kafka topic (module docstring)."""

    def __init__(
        self,
        config: Mapping[str, str],
        job_name: str,
        topic: str | None = None,
        *,
        timeout_s: float = 30.0,
        writer_id: str | None = None,
        replication_factor: int = -1,
    ) -> None:
        self.topic = topic or coordinator_topic(job_name)
        self.config = dict(config)
        self.timeout_s = float(timeout_s)
        writer_id = writer_id or default_writer_id()
        self.backend: KafkaLog = KafkaLog(
            self.config, self.topic, self.timeout_s, replication_factor, writer_id
        )
        super().__init__(self.backend, job_name, writer_id)

    def __repr__(self) -> str:
        return (
            f"KafkaCoordinatorStore(topic={self.topic!r}, job={self.job_name!r}, "
            f"bootstrap={bootstrap_of(self.config)!r})"
        )

    @property
    def replication_factor(self) -> int:
        """Asked at creation (-1: the cluster's `default.replication.factor`)."""
        return self.backend.io.replication_factor

    @property
    def replication_warning(self) -> str | None:
        """What to fix when the coordinator topic has one replica on a multi-broker cluster
        (one broker lost loses the job's coordination); None otherwise or with no topic yet."""
        shown = self.backend.io.replication()
        if shown is None or shown[0] > 1 or shown[1] < 2:
            return None
        return (
            f"coordinator topic {self.topic!r} has replication factor 1 on a cluster of "
            f"{shown[1]} brokers: losing its broker stops every expansion of job "
            f"{self.job_name!r} - raise it to 3 with kafka-reassign-partitions.sh (and "
            "min.insync.replicas=2), and create coordinator topics with the cluster's "
            "default.replication.factor (or replication_factor=3)"
        )


__all__ = ["KafkaCoordinatorStore", "KafkaLog"]
