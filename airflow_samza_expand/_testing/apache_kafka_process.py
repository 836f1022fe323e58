"""Apache Kafka itself for tests and the demo: the broker pinned by ``apache_kafka/pom.xml``,
fetched from Maven Central once into the user cache, run as one KRaft broker+controller JVM on
127.0.0.1 (test/dev tool only; same shape as `DevBrokerProcess`).

    from airflow_samza_expand._testing import ApacheKafkaProcess
    with ApacheKafkaProcess() as kafka:           # java -cp <cache>/libs/* kafka.Kafka ...
        producer = Producer({"bootstrap.servers": kafka.bootstrap})
"""

from __future__ import annotations

import base64
import logging
import os
import re
import shlex
import shutil
import subprocess
import tempfile
import uuid
from pathlib import Path

from .apache_kafka_secured import (
    new_password,
    override_properties,
    sasl_client_config,
    scram_format_args,
    secured_server_properties,
)
from .launch import (
    LaunchedProcess,
    cache_root,
    exit_with_parent_hook,
    free_port,
    maven_copy,
    pom_hash,
    port_open,
    stop_pid,
    wait_until,
)

log = logging.getLogger(__name__)

POM = Path(__file__).resolve().parent / "apache_kafka" / "pom.xml"

LOG4J2 = """\
rootLogger.level={level}
rootLogger.appenderRef.stdout.ref=STDOUT
appender.stdout.type=Console
appender.stdout.name=STDOUT
appender.stdout.layout.type=PatternLayout
appender.stdout.layout.pattern=[%d] %p %m (%c)%n
"""

# Single node: every internal topic has one replica; no auto-creation (as the dev broker);
# a new group's first generation does not wait for more members (as the dev broker).
SERVER_PROPERTIES = """\
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@{host}:{controller_port}
listeners=PLAINTEXT://{host}:{port},CONTROLLER://{host}:{controller_port}
advertised.listeners=PLAINTEXT://{advertised_host}:{port}
controller.listener.names=CONTROLLER
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
inter.broker.listener.name=PLAINTEXT
log.dirs={log_dir}
num.partitions=1
auto.create.topics.enable={auto_create}
offsets.topic.replication.factor=1
offsets.topic.num.partitions=4
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=4
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms={initial_rebalance_delay_ms}
"""


def kafka_version(pom: Path = POM) -> str:
    match = re.search(r"<kafka.version>([^<]+)</kafka.version>", pom.read_text())
    if not match:
        raise RuntimeError(f"{pom} names no <kafka.version> property")
    return match.group(1)


def _cache_dir(pom: Path = POM) -> Path:
    return cache_root() / f"kafka-{kafka_version(pom)}-{pom_hash(pom)}"


def cached_libs(pom: Path = POM) -> Path | None:
    """The libs directory if a fetch completed before, else None."""
    target = _cache_dir(pom)
    return target / "libs" if (target / "complete").exists() else None


def fetch_apache_kafka(pom: Path = POM) -> Path:
    """The broker's jars (from Maven Central on first use); returns the libs directory."""
    return maven_copy(pom, _cache_dir(pom))


def jvm_performance_options() -> list[str]:
    """The JIT/GC options of the broker JVM: ``$KAFKA_JVM_PERFORMANCE_OPTS`` as Kafka's own
    start scripts take it (scripts/test.sh sets lean ones for short test brokers), else G1."""
    return shlex.split(os.environ.get("KAFKA_JVM_PERFORMANCE_OPTS", "-XX:+UseG1GC"))


def java_binary() -> str:
    java_home = os.environ.get("JAVA_HOME")
    java = shutil.which("java") or (os.path.join(java_home, "bin", "java") if java_home else None)
    if not java:
        raise RuntimeError(
            "no Java found (java not on PATH, JAVA_HOME unset) - Apache Kafka needs Java 17+, "
            "e.g. `apt-get install openjdk-17-jre-headless`"
        )
    return java


class ApacheKafkaProcess(LaunchedProcess):
    """One Apache Kafka node (KRaft broker + controller) in a JVM subprocess.

    `.bootstrap` is "127.0.0.1:<port>" once started; ready means a Metadata request lists the
    broker. Stopped by pid (SIGTERM, then SIGKILL); with `exit_with_parent` (default) the JVM
    also gets SIGTERM when the starting process dies. Data lives in `data_dir` (default: a
    temporary directory removed by close()); broker output goes to `log_path`.

    `secured=True`: the client listener is SASL_PLAINTEXT with SCRAM-SHA-512 and ACLs are
    enforced (_testing/apache_kafka_secured.py); `admin_user` (a super-user, password
    `admin_password`, random by default) exists from the start. `.client_config` is the
    librdkafka config of the admin (just `bootstrap.servers` when not secured).
    """

    def __init__(
        self,
        port: int = 0,
        data_dir: str | os.PathLike | None = None,
        host: str = "127.0.0.1",
        log_path: str | os.PathLike | None = None,
        heap: str = "512m",
        log_level: str = "INFO",
        auto_create_topics: bool = False,
        group_initial_rebalance_delay_ms: int = 0,
        start_timeout_s: float = 120.0,
        exit_with_parent: bool = True,
        secured: bool = False,
        admin_user: str = "admin",
        admin_password: str | None = None,
    ) -> None:
        self.secured = secured
        self.admin_user = admin_user
        self.admin_password = admin_password or new_password()
        self.host = host
        self.requested_port = port
        self.heap = heap
        self.log_level = log_level
        self.auto_create_topics = auto_create_topics
        self.initial_rebalance_delay_ms = group_initial_rebalance_delay_ms
        self.start_timeout_s = start_timeout_s
        self.exit_with_parent = exit_with_parent
        self._tmp = tempfile.TemporaryDirectory(prefix="samza-apache-kafka-")
        self.work = Path(self._tmp.name)
        self.data_dir = Path(data_dir) if data_dir is not None else self.work / "data"
        self.log_path = Path(log_path) if log_path else self.work / "kafka.log"
        self.port: int | None = None
        self.controller_port: int | None = None
        self.proc: subprocess.Popen | None = None
        self.version = kafka_version()

    @property
    def bootstrap(self) -> str:
        if self.port is None:
            raise RuntimeError("Kafka not started - call start() or use it as a context manager")
        return f"{self.host}:{self.port}"

    @property
    def client_config(self) -> dict[str, str]:
        """librdkafka settings of the admin (SASL ones only in secured mode)."""
        if not self.secured:
            return {"bootstrap.servers": self.bootstrap}
        return sasl_client_config(self.bootstrap, self.admin_user, self.admin_password)

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def _java(self, libs: Path, main: str, *args: str) -> list[str]:
        return [
            java_binary(), f"-Xmx{self.heap}", "-Xms128m", *jvm_performance_options(),
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={self.work / 'log4j2.properties'}",
            "-cp", f"{libs}/*", main, *args,
        ]  # fmt: skip

    def _write_config(self) -> Path:
        self.port = self.port or self.requested_port or free_port(self.host)
        self.controller_port = self.controller_port or free_port(self.host)
        props = self.work / "server.properties"
        props.write_text(
            SERVER_PROPERTIES.format(
                host=self.host,
                advertised_host=self.host,
                port=self.port,
                controller_port=self.controller_port,
                log_dir=self.data_dir,
                auto_create=str(self.auto_create_topics).lower(),
                initial_rebalance_delay_ms=self.initial_rebalance_delay_ms,
            )
        )
        if self.secured:  # the admin's JAAS password goes into the file: owner-only
            props.chmod(0o600)
            props.write_text(override_properties(props.read_text(), secured_server_properties(
                self.host, self.port, self.controller_port, self.admin_user, self.admin_password
            )))  # fmt: skip
        (self.work / "log4j2.properties").write_text(LOG4J2.format(level=self.log_level))
        return props

    def _format_storage(self, libs: Path, props: Path) -> None:
        """`kafka-storage.sh format` once per data directory (a restart keeps the data)."""
        if (self.data_dir / "meta.properties").exists():
            return
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        (self.work / "log4j2.properties").write_text(LOG4J2.format(level="WARN"))
        result = subprocess.run(
            self._java(libs, "kafka.tools.StorageTool", "format", f"--cluster-id={cluster_id}",
                       "-c", str(props), *self._format_extra_args()),
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        (self.work / "log4j2.properties").write_text(LOG4J2.format(level=self.log_level))
        if result.returncode != 0:
            raise RuntimeError(
                f"formatting KRaft storage in {self.data_dir} failed ({result.returncode}):\n"
                f"{(result.stdout + result.stderr)[-3000:]}"
            )

    def _format_extra_args(self) -> list[str]:
        if not self.secured:
            return []
        return scram_format_args(self.admin_user, self.admin_password)

    def start(self) -> ApacheKafkaProcess:
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
        log.info(
            "waiting up to %.0fs for Apache Kafka %s (pid %d) at %s to answer Metadata",
            self.start_timeout_s, self.version, self.proc.pid, self.bootstrap,
        )  # fmt: skip
        try:
            wait_until(
                f"Apache Kafka at {self.bootstrap} to answer a Metadata request",
                self._ready,
                timeout_s=self.start_timeout_s,
                alive=self._exited,
            )
            # A fresh cluster creates __consumer_offsets on the first group request and answers
            # NOT_COORDINATOR until it is loaded: wait for that here, once, not in every test.
            wait_until(
                f"Apache Kafka at {self.bootstrap} to serve group offsets",
                self._group_coordinator_ready,
                timeout_s=self.start_timeout_s,
                alive=self._exited,
            )
        except Exception as exc:
            self.stop()
            raise RuntimeError(f"{exc}; log {self.log_path}:\n{self.log_text()[-4000:]}") from exc
        log.info("Apache Kafka %s listening at %s", self.version, self.bootstrap)
        return self

    def _exited(self) -> str | None:
        if self.proc is not None and self.proc.poll() is not None:
            return f"the Kafka JVM exited with {self.proc.returncode}"
        return None

    def _ready(self) -> bool:
        if not port_open(self.host, int(self.port or 0)):
            return False
        from airflow_samza_expand._kafka.clients import AdminClient

        quiet = logging.getLogger("samza_expand.apache_kafka.probe")
        quiet.setLevel(logging.CRITICAL)
        admin = AdminClient({**self.client_config, "logger": quiet})
        try:
            return bool(admin.list_topics(timeout=5).brokers)
        except Exception:  # noqa: BLE001 - not ready yet
            return False

    def _group_coordinator_ready(self) -> bool:
        from confluent_kafka import TopicPartition

        from airflow_samza_expand._kafka.clients import Consumer

        quiet = logging.getLogger("samza_expand.apache_kafka.probe")
        consumer = Consumer(
            {**self.client_config, "group.id": "samza-expand-readiness", "logger": quiet}
        )  # fmt: skip
        try:
            consumer.committed([TopicPartition("samza-expand-readiness", 0)], timeout=5)
            return True
        except Exception:  # noqa: BLE001 - not ready yet
            return False
        finally:
            consumer.close()

    def restart(self) -> ApacheKafkaProcess:
        """Stop and start again on the same ports and data."""
        self.stop()
        return self.start()

    def stop(self, timeout_s: float = 30.0) -> None:
        stop_pid(self.proc, f"Apache Kafka {self.version}", timeout_s)
        self.proc = None

    def close(self) -> None:
        self.stop()
        self._tmp.cleanup()
