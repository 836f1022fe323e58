"""Topics, partition logs and committed group offsets of the development broker (test/dev only).

With a data directory, `topics.json` holds topic metadata (rewritten atomically on change),
`logs/<topic_id>/<partition>.log` the record batches and `offsets.jsonl` an append-only journal of
offset commits, replayed (last value wins) and compacted at start.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from .storage import PartitionLog

log = logging.getLogger(__name__)

_LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]{1,249}$")

DEFAULT_TOPIC_CONFIGS: dict[str, str] = {
    "cleanup.policy": "delete",
    "compression.type": "producer",
    "max.message.bytes": "1048588",
    "message.timestamp.type": "CreateTime",
    "min.insync.replicas": "1",
    "retention.bytes": "-1",
    "retention.ms": "604800000",
    "segment.bytes": "1073741824",
}
_CLEANUP_POLICIES = {"delete", "compact", "compact,delete", "delete,compact"}


class TopicError(Exception):
    """A refused topic operation: Kafka error code and Kafka's message."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def validate_topic_name(name: str) -> None:
    if name in (".", "..") or not _LEGAL_TOPIC.match(name or ""):
        raise TopicError(
            17,
            f"Topic name '{name}' is illegal, it contains a character other than ASCII "
            "alphanumerics, '.', '_' and '-', or is empty, '.', '..' or longer than 249.",
        )


def validate_topic_configs(configs: dict[str, str]) -> None:
    policy = configs.get("cleanup.policy")
    if policy is not None and policy.replace(" ", "") not in _CLEANUP_POLICIES:
        raise TopicError(
            40,
            f"Invalid value {policy} for configuration cleanup.policy: String must be one "
            "of: compact, delete",
        )


@dataclass
class Topic:
    name: str
    topic_id: uuid.UUID
    configs: dict[str, str]
    partitions: list[PartitionLog] = field(default_factory=list)


@dataclass(frozen=True)
class CommittedOffset:
    offset: int
    leader_epoch: int
    metadata: str | None


class ClusterState:
    """All durable broker state; `data_dir=None` keeps everything in memory."""

    def __init__(self, data_dir: Path | None = None) -> None:
        self.data_dir = data_dir
        self.topics: dict[str, Topic] = {}
        self.offsets: dict[str, dict[tuple[str, int], CommittedOffset]] = {}
        self._journal = None
        if data_dir is not None:
            data_dir.mkdir(parents=True, exist_ok=True)
            (data_dir / "logs").mkdir(exist_ok=True)
            self._load()

    # ---- persistence -------------------------------------------------------------------
    def _log_path(self, topic: Topic, partition: int) -> Path | None:
        if self.data_dir is None:
            return None
        folder = self.data_dir / "logs" / topic.topic_id.hex
        folder.mkdir(parents=True, exist_ok=True)
        return folder / f"{partition}.log"

    def _load(self) -> None:
        assert self.data_dir is not None
        meta = self.data_dir / "topics.json"
        if meta.exists():
            for entry in json.loads(meta.read_text()):
                topic = Topic(entry["name"], uuid.UUID(entry["topic_id"]), entry["configs"])
                for p in range(entry["partitions"]):
                    topic.partitions.append(PartitionLog(self._log_path(topic, p)))
                self.topics[topic.name] = topic
        journal = self.data_dir / "offsets.jsonl"
        if journal.exists():
            for line in journal.read_text().splitlines():
                try:
                    rec = json.loads(line)
                except ValueError:
                    log.warning("skipping torn line in %s", journal)
                    continue
                self.offsets.setdefault(rec["g"], {})[(rec["t"], rec["p"])] = CommittedOffset(
                    rec["o"], rec.get("e", -1), rec.get("m")
                )
        self._compact_journal()
        log.info(
            "loaded %d topics and offsets of %d groups from %s",
            len(self.topics),
            len(self.offsets),
            self.data_dir,
        )

    def _compact_journal(self) -> None:
        assert self.data_dir is not None
        if self._journal is not None:
            self._journal.close()
        journal = self.data_dir / "offsets.jsonl"
        tmp = journal.with_suffix(".tmp")
        with open(tmp, "w") as fh:
            for group, offs in self.offsets.items():
                for (topic, part), c in offs.items():
                    fh.write(self._journal_line(group, topic, part, c))
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, journal)
        self._journal = open(journal, "a")  # noqa: SIM115 - kept open for the broker's life

    @staticmethod
    def _journal_line(group: str, topic: str, part: int, c: CommittedOffset) -> str:
        rec = {
            "g": group,
            "t": topic,
            "p": part,
            "o": c.offset,
            "e": c.leader_epoch,
            "m": c.metadata,
        }
        return json.dumps(rec, separators=(",", ":")) + "\n"

    def _save_topics(self) -> None:
        if self.data_dir is None:
            return
        meta = self.data_dir / "topics.json"
        entries = [
            {
                "name": t.name,
                "topic_id": str(t.topic_id),
                "configs": t.configs,
                "partitions": len(t.partitions),
            }
            for t in self.topics.values()
        ]
        tmp = meta.with_suffix(".tmp")
        with open(tmp, "w") as fh:
            json.dump(entries, fh, indent=1)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, meta)

    def close(self) -> None:
        for topic in self.topics.values():
            for plog in topic.partitions:
                plog.close()
        if self._journal is not None:
            self._journal.close()
            self._journal = None

    # ---- topics ------------------------------------------------------------------------
    def check_create_topic(
        self, name: str, partitions: int, replication: int, configs: dict[str, str]
    ) -> None:
        validate_topic_name(name)
        if name in self.topics:
            raise TopicError(36, f"Topic '{name}' already exists.")
        if partitions == 0 or partitions < -1:
            raise TopicError(37, "Number of partitions was set to an invalid non-positive value.")
        if replication == 0 or replication < -1:
            raise TopicError(
                38, "Replication factor must be larger than 0, or -1 to use the default value."
            )
        if replication > 1:
            raise TopicError(
                38,
                f"Unable to replicate the partition {replication} time(s): The target "
                f"replication factor of {replication} cannot be reached because only 1 "
                "broker(s) are registered.",
            )
        validate_topic_configs(configs)

    def create_topic(self, name: str, partitions: int, configs: dict[str, str]) -> Topic:
        topic = Topic(name, uuid.uuid4(), dict(configs))
        for p in range(partitions):
            topic.partitions.append(PartitionLog(self._log_path(topic, p)))
        self.topics[name] = topic
        self._save_topics()
        log.info("created topic %s with %d partitions configs=%s", name, partitions, configs)
        return topic

    def delete_topic(self, name: str) -> None:
        topic = self.topics.pop(name)
        for plog in topic.partitions:
            plog.close()
        self._save_topics()
        if self.data_dir is not None:
            shutil.rmtree(self.data_dir / "logs" / topic.topic_id.hex, ignore_errors=True)
        for offs in self.offsets.values():
            for key in [k for k in offs if k[0] == name]:
                del offs[key]
        log.info("deleted topic %s", name)

    def check_create_partitions(self, name: str, count: int) -> Topic:
        topic = self.topics.get(name)
        if topic is None:
            raise TopicError(3, f"This server does not host this topic ID or name {name}.")
        current = len(topic.partitions)
        if count > current:
            return topic
        if count == current:
            raise TopicError(37, f"Topic already has {current} partition(s).")
        raise TopicError(
            37,
            f"The topic {name} currently has {current} partition(s); {count} would not "
            "be an increase.",
        )

    def add_partitions(self, name: str, count: int) -> None:
        topic = self.topics[name]
        before = len(topic.partitions)
        for p in range(before, count):
            topic.partitions.append(PartitionLog(self._log_path(topic, p)))
        self._save_topics()
        log.info("grew topic %s from %d to %d partitions", name, before, count)

    def set_topic_configs(self, name: str, configs: dict[str, str]) -> None:
        self.topics[name].configs = dict(configs)
        self._save_topics()
        log.info("set configs of topic %s to %s", name, configs)

    def partition(self, topic: str, index: int) -> PartitionLog | None:
        t = self.topics.get(topic)
        if t is None or not 0 <= index < len(t.partitions):
            return None
        return t.partitions[index]

    # ---- offsets -----------------------------------------------------------------------
    def commit(self, group: str, items: list[tuple[str, int, CommittedOffset]]) -> None:
        offs = self.offsets.setdefault(group, {})
        for topic, part, c in items:
            offs[(topic, part)] = c
            if self._journal is not None:
                self._journal.write(self._journal_line(group, topic, part, c))
        if self._journal is not None:
            self._journal.flush()
            os.fsync(self._journal.fileno())

    def delete_group_offsets(self, group: str) -> None:
        self.offsets.pop(group, None)
        if self.data_dir is not None:
            self._compact_journal()

    def committed(self, group: str, topic: str, part: int) -> CommittedOffset | None:
        return self.offsets.get(group, {}).get((topic, part))
