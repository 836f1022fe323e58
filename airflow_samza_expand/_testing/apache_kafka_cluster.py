"""A real Apache Kafka cluster on 127.0.0.1 for tests and the cluster fault matrix: three (or
n) KRaft nodes, each a broker and a controller in its own JVM, from the same pinned Maven
artifacts as `ApacheKafkaProcess` (test/dev tool only). Replication 3, `min.insync.replicas=2`
for every topic a client creates without a replication factor (the provider's included).

    from airflow_samza_expand._testing.apache_kafka_cluster import ApacheKafkaCluster
    with ApacheKafkaCluster() as cluster:         # three JVMs, -Xmx256m each
        producer = Producer({"bootstrap.servers": cluster.bootstrap})
        leader = cluster.leader("orders", 0)      # node id
        cluster.kill(leader)                      # SIGKILL by pid
        cluster.start_node(leader)                # same ports and data; waits until it serves
        cluster.wait_in_sync()                    # every replica back in its ISR

Each node is stoppable (SIGTERM, a controlled shutdown), killable (SIGKILL) and restartable by
its pid; a stopped node keeps its ports and data directory.
"""

from __future__ import annotations

import base64
import logging
import subprocess
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from .apache_kafka_process import LOG4J2, ApacheKafkaProcess, fetch_apache_kafka
from .launch import ContextManaged, exit_with_parent_hook, free_port, stop_pid, wait_until

log = logging.getLogger(__name__)

# Combined broker+controller nodes with a static quorum; a killed broker is fenced after
# broker.session.timeout.ms (6 s here, 9 s by default) and its leaderships move to the ISR.
CLUSTER_PROPERTIES = """\
process.roles=broker,controller
node.id={node_id}
controller.quorum.voters={voters}
listeners=PLAINTEXT://{host}:{port},CONTROLLER://{host}:{controller_port}
advertised.listeners=PLAINTEXT://{host}:{port}
controller.listener.names=CONTROLLER
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
inter.broker.listener.name=PLAINTEXT
log.dirs={log_dir}
num.partitions=1
auto.create.topics.enable=false
default.replication.factor={replication}
min.insync.replicas={min_isr}
unclean.leader.election.enable=false
offsets.topic.replication.factor={replication}
offsets.topic.num.partitions=4
transaction.state.log.replication.factor={replication}
transaction.state.log.min.isr={min_isr}
transaction.state.log.num.partitions=4
share.coordinator.state.topic.replication.factor={replication}
share.coordinator.state.topic.min.isr={min_isr}
group.initial.rebalance.delay.ms=0
broker.session.timeout.ms=6000
broker.heartbeat.interval.ms=1000
controlled.shutdown.enable=true
# the log cleaner's dedupe buffer (128 MB by default) does not fit a 256 MB heap: a node that
# starts its cleaner (the compacted coordinator topics) would die of OutOfMemoryError
log.cleaner.dedupe.buffer.size=16777216
"""


class ClusterNode(ApacheKafkaProcess):
    """One node of an `ApacheKafkaCluster`: `ApacheKafkaProcess` with the cluster's
    configuration; `launch()` starts the JVM without waiting (a static quorum elects no
    controller until a majority runs), `wait_ready()` waits until it serves."""

    def __init__(self, cluster: ApacheKafkaCluster, node_id: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.cluster = cluster
        self.node_id = node_id
        self.port = free_port(self.host)
        self.controller_port = free_port(self.host)

    def _write_config(self) -> Path:
        props = self.work / "server.properties"
        props.write_text(
            CLUSTER_PROPERTIES.format(
                node_id=self.node_id,
                voters=self.cluster.voters,
                host=self.host,
                port=self.port,
                controller_port=self.controller_port,
                log_dir=self.data_dir,
                replication=self.cluster.replication,
                min_isr=self.cluster.min_insync_replicas,
            )
        )
        (self.work / "log4j2.properties").write_text(LOG4J2.format(level=self.log_level))
        return props

    def _format_storage(self, libs: Path, props: Path) -> None:
        """Format once with the cluster's id (every node of one cluster shares it)."""
        if (self.data_dir / "meta.properties").exists():
            return
        (self.work / "log4j2.properties").write_text(LOG4J2.format(level="WARN"))
        result = subprocess.run(
            self._java(libs, "kafka.tools.StorageTool", "format",
                       f"--cluster-id={self.cluster.cluster_id}", "-c", str(props)),
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        (self.work / "log4j2.properties").write_text(LOG4J2.format(level=self.log_level))
        if result.returncode != 0:
            raise RuntimeError(
                f"formatting KRaft storage of node {self.node_id} in {self.data_dir} failed "
                f"({result.returncode}):\n{(result.stdout + result.stderr)[-3000:]}"
            )

    def launch(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            return
        libs = fetch_apache_kafka()
        props = self._write_config()
        self._format_storage(libs, props)
        with open(self.log_path, "ab") as out:
            self.proc = subprocess.Popen(
                self._java(libs, "kafka.Kafka", str(props)),
                stdout=out,
                stderr=subprocess.STDOUT,
                preexec_fn=exit_with_parent_hook(self.exit_with_parent),  # noqa: PLW1509
            )
        log.info("launched Kafka node %d (pid %d) at %s", self.node_id, self.proc.pid,
                 self.bootstrap)  # fmt: skip

    def wait_ready(self) -> None:
        """Until this node answers Metadata listing every node of the cluster that runs."""
        try:
            wait_until(
                f"Kafka node {self.node_id} at {self.bootstrap} to serve",
                self._serves,
                timeout_s=self.start_timeout_s,
                alive=self._exited,
            )
        except Exception as exc:
            raise RuntimeError(f"{exc}; log {self.log_path}:\n{self.log_text()[-4000:]}") from exc

    def _serves(self) -> bool:
        from airflow_samza_expand._kafka.clients import AdminClient

        quiet = logging.getLogger("samza_expand.apache_kafka.probe")
        quiet.setLevel(logging.CRITICAL)
        admin = AdminClient({"bootstrap.servers": self.bootstrap, "logger": quiet})
        try:
            brokers = admin.list_topics(timeout=5).brokers
        except Exception:  # noqa: BLE001 - not ready yet
            return False
        return self.node_id in brokers and set(brokers) >= set(self.cluster.running_ids())

    def start(self) -> ClusterNode:
        self.launch()
        self.wait_ready()
        return self


class ApacheKafkaCluster(ContextManaged):
    """`size` KRaft nodes (broker + controller each) on 127.0.0.1, replication `replication`
    (default: every node) and `min_insync_replicas` (default 2) for every topic created without
    a replication factor, and for the internal topics. `.bootstrap` lists every node."""

    def __init__(
        self,
        size: int = 3,
        *,
        work_dir: str | Path | None = None,
        heap: str = "256m",
        replication: int | None = None,
        min_insync_replicas: int = 2,
        log_level: str = "INFO",
        start_timeout_s: float = 180.0,
        exit_with_parent: bool = True,
    ) -> None:
        if size < 1:
            raise ValueError(f"a cluster needs at least one node, not {size}")
        self.size = size
        self.replication = replication or size
        self.min_insync_replicas = min(min_insync_replicas, self.replication)
        self.cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        self._tmp = None if work_dir else tempfile.TemporaryDirectory(prefix="samza-kafka-cluster-")
        self.work = Path(work_dir) if work_dir else Path(self._tmp.name)  # type: ignore[union-attr]
        self.work.mkdir(parents=True, exist_ok=True)
        self.start_timeout_s = start_timeout_s
        self.nodes: dict[int, ClusterNode] = {}
        for node_id in range(1, size + 1):
            home = self.work / f"node-{node_id}"
            home.mkdir(parents=True, exist_ok=True)
            self.nodes[node_id] = ClusterNode(
                self, node_id, data_dir=home / "data", log_path=home / "kafka.log", heap=heap,
                log_level=log_level, start_timeout_s=start_timeout_s,
                exit_with_parent=exit_with_parent,
            )  # fmt: skip

    # -- addresses ----------------------------------------------------------------------------

    @property
    def voters(self) -> str:
        return ",".join(f"{i}@{n.host}:{n.controller_port}" for i, n in self.nodes.items())

    @property
    def bootstrap(self) -> str:
        return ",".join(n.bootstrap for n in self.nodes.values())

    @property
    def client_config(self) -> dict[str, str]:
        return {"bootstrap.servers": self.bootstrap}

    @property
    def version(self) -> str:
        return next(iter(self.nodes.values())).version

    def pids(self) -> dict[int, int | None]:
        return {i: n.pid for i, n in self.nodes.items()}

    def running_ids(self) -> list[int]:
        return [i for i, n in self.nodes.items() if n.proc is not None and n.proc.poll() is None]

    def node(self, node_id: int) -> ClusterNode:
        try:
            return self.nodes[node_id]
        except KeyError:
            raise ValueError(f"no node {node_id} - nodes are {sorted(self.nodes)}") from None

    # -- whole cluster ------------------------------------------------------------------------

    def start(self) -> ApacheKafkaCluster:
        for node in self.nodes.values():
            node.launch()
        try:
            for node in self.nodes.values():
                node.wait_ready()
            wait_until(
                f"the {self.size}-node cluster to serve group offsets",
                self._group_coordinator_ready, timeout_s=self.start_timeout_s,
            )  # fmt: skip
        except Exception:
            self.stop()
            raise
        log.info("Apache Kafka %s cluster of %d nodes at %s", self.version, self.size,
                 self.bootstrap)  # fmt: skip
        return self

    def _group_coordinator_ready(self) -> bool:
        return ApacheKafkaProcess._group_coordinator_ready(self)  # type: ignore[arg-type]

    def stop(self, timeout_s: float = 30.0) -> None:
        """SIGTERM every node at once (a node stopping alone waits for a quorum that the
        others, stopped before it, no longer form), then SIGKILL what is left after
        `timeout_s`; by pid."""
        running = [n for n in self.nodes.values() if n.proc is not None and n.proc.poll() is None]
        for node in running:
            node.proc.terminate()  # type: ignore[union-attr]
        deadline = time.monotonic() + timeout_s
        for node in running:
            try:
                node.proc.wait(max(0.1, deadline - time.monotonic()))  # type: ignore[union-attr]
            except subprocess.TimeoutExpired:
                log.warning("Kafka node %d (pid %d) did not stop in %.0fs; killing it",
                            node.node_id, node.pid, timeout_s)  # fmt: skip
                node.kill()
        for node in self.nodes.values():
            node.proc = None

    def close(self) -> None:
        self.stop()
        for node in self.nodes.values():
            node.close()
        if self._tmp is not None:
            self._tmp.cleanup()

    # -- one node -----------------------------------------------------------------------------

    def kill(self, node_id: int) -> int:
        """SIGKILL node `node_id` (a crash); returns the pid it had."""
        node = self.node(node_id)
        pid = node.pid
        node.kill()
        log.info("killed Kafka node %d (pid %s)", node_id, pid)
        return int(pid or 0)

    def stop_node(self, node_id: int, timeout_s: float = 30.0) -> None:
        """SIGTERM node `node_id` (a controlled shutdown: leaderships move first)."""
        node = self.node(node_id)
        stop_pid(node.proc, f"Kafka node {node_id}", timeout_s)
        node.proc = None

    def start_node(self, node_id: int) -> None:
        """Start node `node_id` again on its ports and data; returns once it serves."""
        node = self.node(node_id)
        node.launch()
        node.wait_ready()

    def restart_node(self, node_id: int, *, in_sync: bool = True) -> None:
        self.stop_node(node_id)
        self.start_node(node_id)
        if in_sync:
            self.wait_in_sync()

    def restart(self) -> None:
        """A rolling restart: each node in turn, waiting until every replica is in sync."""
        for node_id in self.nodes:
            self.restart_node(node_id)

    # -- what the cluster says ----------------------------------------------------------------

    def _metadata(self, timeout_s: float = 10.0) -> Any:
        from airflow_samza_expand._kafka.clients import AdminClient

        running = [self.nodes[i].bootstrap for i in self.running_ids()]
        quiet = logging.getLogger("samza_expand.apache_kafka.probe")
        admin = AdminClient({"bootstrap.servers": ",".join(running), "logger": quiet})
        return admin.list_topics(timeout=timeout_s)

    def leader(self, topic: str, partition: int = 0, timeout_s: float = 60.0) -> int:
        """Node id of the current leader of `topic`-`partition` (waits for one)."""

        def current() -> int | None:
            try:
                meta = self._metadata().topics.get(topic)
            except Exception:  # noqa: BLE001 - a node is going away: ask again
                return None
            part = meta.partitions.get(partition) if meta is not None else None
            return part.leader if part is not None and part.leader in self.nodes else None

        return int(wait_until(f"a leader of {topic}-{partition}", current, timeout_s=timeout_s))

    def under_replicated(self) -> list[str]:
        """`topic-partition` of every partition whose ISR is not all its replicas."""
        meta = self._metadata()
        return sorted(
            f"{name}-{p}"
            for name, topic in meta.topics.items()
            for p, part in topic.partitions.items()
            if set(part.isrs) != set(part.replicas)
        )

    def wait_in_sync(self, timeout_s: float = 120.0) -> None:
        """Until every replica of every partition is in its ISR (after a node came back)."""

        def in_sync() -> bool:
            try:
                return not self.under_replicated()
            except Exception:  # noqa: BLE001 - a node is starting
                return False

        wait_until("every replica back in sync", in_sync, timeout_s=timeout_s, interval_s=0.5)

    def wait_leader_moved(
        self, topic: str, partition: int, old: int, timeout_s: float = 60.0
    ) -> int:
        """Until `topic`-`partition` has a leader other than node `old`; returns it."""
        deadline = time.monotonic() + timeout_s
        while True:
            leader = self.leader(topic, partition, timeout_s=max(1.0, deadline - time.monotonic()))
            if leader != old:
                return leader
            if time.monotonic() > deadline:
                raise TimeoutError(f"{topic}-{partition} still led by node {old}")
            time.sleep(0.2)


__all__ = ["ApacheKafkaCluster", "ClusterNode"]
