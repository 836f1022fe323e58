"""OpenLineage of the expansion's steps, through the OpenLineage provider (the optional extra
``openlineage``): each operator records in ``execute`` what it read and wrote
(`ReportsLineage.record_lineage`), and the provider's listener asks for it with
``get_openlineage_facets_on_complete``.

Datasets follow OpenLineage's naming for Kafka: namespace ``kafka://<host>:<port>`` of the first
bootstrap server, name the topic. A file coordinator store is a ``file`` dataset (or
``<scheme>://<host>`` for an fsspec URL). Nothing here reads a credential: a namespace is built
from ``bootstrap.servers`` alone (any ``user:password@`` stripped), and facets carry counts,
versions and names only.

This module imports no OpenLineage package at import time, so the package works without it.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from airflow_samza_expand.store import CoordinatorStore

if TYPE_CHECKING:
    from airflow.providers.openlineage.extractors import OperatorLineage

PARTITIONS_FACET = "samzaExpand_partitions"
JOB_MODEL_FACET = "samzaExpand_jobModel"
# The facets' JSON Schemas are docs/openlineage/<Facet>.json of the project's repository; a
# facet's _schemaURL is that file's URL with the facet's definition, as OpenLineage's own are.
SCHEMA_BASE = (
    "https://raw.githubusercontent.com/airflow-samza-expand/airflow-samza-expand/main/docs/"
    "openlineage"
)


def schema_url(facet: str) -> str:
    """``<SCHEMA_BASE>/<facet>.json#/$defs/<facet>``."""
    return f"{SCHEMA_BASE}/{facet}.json#/$defs/{facet}"


def kafka_namespace(config: Mapping[str, Any]) -> str:
    """``kafka://<host>:<port>`` of the first of ``bootstrap.servers`` (a listener name such as
    ``SASL_SSL://`` and any ``user:password@`` dropped; port 9092 when none is given)."""
    first = str(config.get("bootstrap.servers") or "").split(",")[0].strip()
    address = first.split("://", 1)[-1].rsplit("@", 1)[-1].split("/", 1)[0]
    parsed = urlsplit(f"//{address}")
    host = parsed.hostname or "unknown"
    if ":" in host:  # an IPv6 address keeps its brackets
        host = f"[{host}]"
    try:
        port = parsed.port or 9092
    except ValueError:
        port = 9092
    return f"kafka://{host}:{port}"


def store_dataset(store: CoordinatorStore, config: Mapping[str, Any]) -> tuple[str, str]:
    """(namespace, name) of a job's coordinator store: its topic on the connection's Kafka, or
    its folder (``file`` and the path; ``<scheme>://<host>`` and the path for an fsspec URL)."""
    topic = getattr(store, "topic", None)
    if topic:
        return kafka_namespace(config), str(topic)
    location = str(getattr(store, "location", "") or "")
    parsed = urlsplit(location)
    if parsed.scheme not in ("", "file") and "://" in location:
        return f"{parsed.scheme}://{parsed.hostname or ''}", parsed.path.lstrip("/")
    return "file", parsed.path if parsed.scheme == "file" else location


@dataclass(frozen=True)
class Topic:
    """A dataset a step read or wrote, with its facets as plain values: ``facets`` maps a facet
    name (`PARTITIONS_FACET`, `JOB_MODEL_FACET`) to that facet's fields."""

    namespace: str
    name: str
    facets: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)


@dataclass(frozen=True)
class StepLineage:
    """What one run of a step read (``inputs``) and wrote (``outputs``)."""

    inputs: tuple[Topic, ...] = ()
    outputs: tuple[Topic, ...] = ()


def expand_step(namespace: str, result: Mapping[str, Any]) -> StepLineage:
    """The grown topic, input and output, with its partition count before and after."""
    counts = {
        "before": int(result["partitions_before"]),
        "after": int(result["partitions_after"]),
        "changed": bool(result.get("changed")),
        "dryRun": bool(result.get("dry_run")),
    }
    topic = Topic(namespace, str(result["topic"]), {PARTITIONS_FACET: counts})
    return StepLineage(inputs=(topic,), outputs=(topic,))


def write_step(dataset: tuple[str, str], result: Mapping[str, Any]) -> StepLineage:
    """The coordinator topic, written with job model ``version``."""
    model = {
        "jobName": str(result.get("job_name") or ""),
        "version": int(result["version"]),
        "written": bool(result.get("written")),
        "partitionCounts": {str(k): int(v) for k, v in (result.get("counts") or {}).items()},
    }
    return StepLineage(outputs=(Topic(*dataset, {JOB_MODEL_FACET: model}),))


def submit_step(store: CoordinatorStore, config: Mapping[str, Any]) -> StepLineage:
    """The job's input topics, as its newest job model names them (the topics of an expansion's
    vN+1 are those of vN), on the connection's Kafka."""
    model = store.latest_job_model()
    topics = sorted(model.partition_counts()) if model is not None else []
    return StepLineage(inputs=tuple(Topic(kafka_namespace(config), t) for t in topics))


class ReportsLineage:
    """Mixin of the operators: ``execute`` calls `record_lineage`; the OpenLineage provider's
    listener calls ``get_openlineage_facets_on_complete`` (empty lineage if nothing recorded)."""

    _step_lineage: StepLineage | None = None

    def record_lineage(self, step: StepLineage) -> None:
        self._step_lineage = step

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> OperatorLineage:
        return operator_lineage(self._step_lineage or StepLineage())


def operator_lineage(step: StepLineage) -> OperatorLineage:
    """The provider's ``OperatorLineage`` of ``step`` (needs the extra ``openlineage``)."""
    from airflow.providers.openlineage.extractors import OperatorLineage
    from openlineage.client.event_v2 import Dataset

    def dataset(topic: Topic) -> Dataset:
        facets = {name: facet_classes()[name](**fields) for name, fields in topic.facets.items()}
        return Dataset(namespace=topic.namespace, name=topic.name, facets=facets)

    return OperatorLineage(
        inputs=[dataset(t) for t in step.inputs], outputs=[dataset(t) for t in step.outputs]
    )


@functools.cache
def facet_classes() -> dict[str, type]:
    """The custom dataset facets, attrs classes on the client's ``DatasetFacet`` (defined on
    first use, so importing this module needs no OpenLineage package)."""
    import attr
    from openlineage.client.facet_v2 import DatasetFacet

    @attr.define
    class SamzaExpandPartitionsFacet(DatasetFacet):
        """Partition count of the topic before and after the expansion step."""

        before: int
        after: int
        changed: bool = False
        dryRun: bool = False  # noqa: N815 - OpenLineage's camelCase field names

        @staticmethod
        def _get_schema() -> str:
            return schema_url("SamzaExpandPartitionsFacet")

    @attr.define
    class SamzaExpandJobModelFacet(DatasetFacet):
        """The job model the write step put in force on the coordinator topic."""

        jobName: str  # noqa: N815
        version: int
        written: bool = True
        partitionCounts: dict[str, int] = attr.field(factory=dict)  # noqa: N815

        @staticmethod
        def _get_schema() -> str:
            return schema_url("SamzaExpandJobModelFacet")

    classes = {
        PARTITIONS_FACET: SamzaExpandPartitionsFacet,
        JOB_MODEL_FACET: SamzaExpandJobModelFacet,
    }
    for cls in classes.values():  # importable as lineage.<name> (module __getattr__)
        cls.__qualname__ = cls.__name__
    return classes


FACET_CLASS_NAMES = ("SamzaExpandPartitionsFacet", "SamzaExpandJobModelFacet")


def __getattr__(name: str) -> type:
    """``lineage.SamzaExpandPartitionsFacet`` etc., defined on first access."""
    if name in FACET_CLASS_NAMES:
        return next(c for c in facet_classes().values() if c.__name__ == name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def spark_conf_with_parent_job(
    conf: Mapping[str, Any] | None, context: Any, *, parent_job: bool, transport: bool
) -> dict[str, Any]:
    """``conf`` plus the OpenLineage parent job (``spark.openlineage.parentJobName`` ...) and
    transport properties, as ``SparkSubmitOperator`` adds them (the provider's helpers; values
    already in ``conf`` win; without the provider they log a warning and add nothing)."""
    from airflow.providers.common.compat.openlineage.utils.spark import (
        inject_parent_job_information_into_spark_properties,
        inject_transport_information_into_spark_properties,
    )

    merged = dict(conf or {})
    if parent_job:
        merged = inject_parent_job_information_into_spark_properties(merged, context)
    if transport:
        merged = inject_transport_information_into_spark_properties(merged, context)
    return merged
