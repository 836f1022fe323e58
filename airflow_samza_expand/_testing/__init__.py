"""Test and development support: a development Kafka broker on the real wire protocol, and
launchers of the real engines (Apache Kafka from Maven Central, a Spark standalone cluster).

For tests, the demo and local development only; production uses Apache Kafka.

    from airflow_samza_expand._testing import DevBrokerProcess
    with DevBrokerProcess() as broker:          # subprocess on a free 127.0.0.1 port
        producer = Producer({"bootstrap.servers": broker.bootstrap})
        broker.faults.inject(api="CreatePartitions", kind="apply_then_timeout", times=1)
"""

from .apache_kafka_process import ApacheKafkaProcess
from .faults import FaultClient, FaultError
from .process import DevBrokerProcess

__all__ = ["ApacheKafkaProcess", "DevBrokerProcess", "FaultClient", "FaultError"]
