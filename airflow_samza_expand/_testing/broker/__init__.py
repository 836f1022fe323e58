"""Single-node development Kafka broker speaking the real wire protocol (test/dev tool only).

Built on kio (Apache Kafka's generated message schemas) so confluent-kafka, AdminClient and
Spark's Python workers talk to it over TCP. It keeps topics, partition logs and committed group
offsets (optionally on disk), runs the classic consumer-group protocol and supports fault
injection. It is not a production broker: one node, no replication, no transactions, no
retention or compaction (readers of compacted topics take the last value per key), no
security. Production deployments use Apache Kafka.
"""

from .server import Broker, run_broker

__all__ = ["Broker", "run_broker"]
