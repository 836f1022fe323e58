"""Spark's Kafka source and sink options from the job's librdkafka settings.

The job receives its Kafka settings as ``--bootstrap-servers`` and/or ``--kafka-config FILE``
(an owner-only file: secrets never on a command line, see `_kafka.config_file`); Spark's Kafka
connector is a Java client and takes them as ``kafka.``-prefixed options. `spark_kafka_options`
translates the librdkafka names the provider's connections use; a setting it cannot translate
is named in a warning (never its value), with the fix.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

log = logging.getLogger(__name__)

# librdkafka name -> Java client name, where only the name differs (or not at all)
SAME_MEANING = {
    "bootstrap.servers": "bootstrap.servers",
    "security.protocol": "security.protocol",
    "sasl.mechanism": "sasl.mechanism",
    "sasl.mechanisms": "sasl.mechanism",
    "client.id": "client.id",
    "ssl.endpoint.identification.algorithm": "ssl.endpoint.identification.algorithm",
}
LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}
# librdkafka-only tuning the Java client does without
IGNORED = frozenset({"socket.keepalive.enable", "api.version.request", "broker.address.family"})
# Spark options whose values Spark redacts in plans and the UI (spark.sql.redaction.options.regex)
REDACTION_REGEX = "(?i)url|jaas|password|secret|token"


def _quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def spark_kafka_options(config: Mapping[str, str]) -> dict[str, str]:
    """``{"kafka.<java name>": value}`` for Spark's Kafka source and sink (a setting without a
    translation is named in a warning, never its value)."""
    out: dict[str, str] = {}
    unknown = []
    for key, value in sorted(config.items()):
        if key in SAME_MEANING:
            if key == "ssl.endpoint.identification.algorithm" and value == "none":
                value = ""
            out[f"kafka.{SAME_MEANING[key]}"] = str(value)
        elif key == "ssl.ca.location":
            out["kafka.ssl.truststore.location"] = str(value)
            out["kafka.ssl.truststore.type"] = "PEM"
        elif key in ("sasl.username", "sasl.password") or key in IGNORED:
            continue
        else:
            unknown.append(key)
    if "sasl.username" in config:
        mechanism = str(config.get("sasl.mechanism") or config.get("sasl.mechanisms") or "PLAIN")
        module = LOGIN_MODULES.get(mechanism.upper())
        if module is None:
            raise ValueError(
                f"SASL mechanism {mechanism!r} has no username/password login here - give "
                "read_kafka(**{'kafka.sasl.jaas.config': ...}) yourself"
            )
        out["kafka.sasl.jaas.config"] = (
            f"{module} required username={_quote(str(config['sasl.username']))} "
            f"password={_quote(str(config.get('sasl.password', '')))};"
        )
    if unknown:
        log.warning(
            "Kafka settings %s have no translation for Spark's Kafka connector and are not "
            "passed to it - give their Java client equivalents as read_kafka(**{'kafka.<name>': "
            "value}), or use read_kafka(source='python') (librdkafka settings as they are)",
            unknown,
        )
    return out


__all__ = ["REDACTION_REGEX", "spark_kafka_options"]
