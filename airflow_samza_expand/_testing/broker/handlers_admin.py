"""ApiVersions, Metadata and topic administration handlers of the development broker (test/dev).

Handlers take the broker and a decoded request and return a plain dict that codec.build turns
into the response of the request's version.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from .codec import Request
from .state import DEFAULT_TOPIC_CONFIGS, TopicError, validate_topic_configs

if TYPE_CHECKING:
    from .server import Broker

log = logging.getLogger(__name__)

CLUSTER_ID = "samza-expand-dev-cluster"
NODE_ID = 1


async def api_versions(broker: Broker, req: Request) -> dict[str, Any]:
    from .apis import advertised_versions

    return {"error_code": 0, "api_keys": advertised_versions(), "throttle_time": 0}


def _broker_entry(broker: Broker) -> dict[str, Any]:
    return {"node_id": NODE_ID, "host": broker.advertised_host, "port": broker.port, "rack": None}


def _topic_entry(broker: Broker, name: str) -> dict[str, Any]:
    topic = broker.state.topics.get(name)
    if topic is None:
        return {"error_code": 3, "name": name, "topic_id": None, "partitions": ()}
    parts = [
        {
            "error_code": 0,
            "partition_index": i,
            "leader_id": NODE_ID,
            "leader_epoch": 0,
            "replica_nodes": (NODE_ID,),
            "isr_nodes": (NODE_ID,),
            "offline_replicas": (),
        }
        for i in range(len(topic.partitions))
    ]
    return {
        "error_code": 0,
        "name": name,
        "topic_id": topic.topic_id,
        "is_internal": False,
        "partitions": parts,
    }


async def metadata(broker: Broker, req: Request) -> dict[str, Any]:
    body = req.body
    if body.topics is None:
        names = sorted(broker.state.topics)
    else:
        names = [t.name for t in body.topics if t.name is not None]
        allow = getattr(body, "allow_auto_topic_creation", True)
        if broker.auto_create_topics and allow:
            for name in names:
                if name not in broker.state.topics:
                    try:
                        broker.state.check_create_topic(name, 1, 1, {})
                    except TopicError:
                        continue
                    broker.state.create_topic(name, broker.default_partitions, {})
    return {
        "throttle_time": 0,
        "brokers": (_broker_entry(broker),),
        "cluster_id": CLUSTER_ID,
        "controller_id": NODE_ID,
        "topics": [_topic_entry(broker, n) for n in names],
    }


def metadata_error(req: Request, code: int) -> dict[str, Any]:
    topics = req.body.topics or ()
    return {
        "brokers": (),
        "topics": [{"error_code": code, "name": t.name, "partitions": ()} for t in topics],
    }


def _configs_of(topic_configs: dict[str, str]) -> dict[str, str]:
    return {**DEFAULT_TOPIC_CONFIGS, **topic_configs}


async def create_topics(broker: Broker, req: Request) -> dict[str, Any]:
    body = req.body
    validate_only = getattr(body, "validate_only", False)
    results = []
    for t in body.topics:
        configs = {c.name: c.value for c in t.configs if c.value is not None}
        partitions = len(t.assignments) if t.assignments else t.num_partitions
        if partitions == -1:
            partitions = broker.default_partitions
        result: dict[str, Any] = {
            "name": t.name,
            "num_partitions": partitions,
            "replication_factor": 1,
        }
        try:
            broker.state.check_create_topic(t.name, partitions, t.replication_factor, configs)
            if not validate_only:
                topic = broker.state.create_topic(t.name, partitions, configs)
                result["topic_id"] = topic.topic_id
            result["configs"] = [
                {
                    "name": k,
                    "value": v,
                    "read_only": False,
                    "config_source": 1 if k in configs else 5,
                    "is_sensitive": False,
                }
                for k, v in sorted(_configs_of(configs).items())
            ]
            result["error_code"] = 0
        except TopicError as exc:
            result.update(
                error_code=exc.code,
                error_message=exc.message,
                num_partitions=-1,
                replication_factor=-1,
            )
        results.append(result)
    return {"throttle_time": 0, "topics": results}


def create_topics_error(req: Request, code: int) -> dict[str, Any]:
    return {
        "topics": [
            {
                "name": t.name,
                "error_code": code,
                "error_message": "injected fault",
                "num_partitions": -1,
                "replication_factor": -1,
            }
            for t in req.body.topics
        ]
    }


async def delete_topics(broker: Broker, req: Request) -> dict[str, Any]:
    body = req.body
    names = body.topic_names if hasattr(body, "topic_names") else [t.name for t in body.topics]
    responses = []
    for name in names:
        if name in broker.state.topics:
            broker.state.delete_topic(name)
            broker.notify_data()
            responses.append({"name": name, "error_code": 0})
        else:
            responses.append(
                {
                    "name": name,
                    "error_code": 3,
                    "error_message": "This server does not host this topic-partition.",
                }
            )
    return {"throttle_time": 0, "responses": responses}


def delete_topics_error(req: Request, code: int) -> dict[str, Any]:
    return {"responses": [{"name": n, "error_code": code} for n in req.body.topic_names]}


async def create_partitions(broker: Broker, req: Request) -> dict[str, Any]:
    body = req.body
    results = []
    for t in body.topics:
        try:
            broker.state.check_create_partitions(t.name, t.count)
            if t.assignments is not None and len(t.assignments) != t.count - len(
                broker.state.topics[t.name].partitions
            ):
                raise TopicError(
                    39,
                    "Increasing the number of partitions by "
                    f"{t.count - len(broker.state.topics[t.name].partitions)} but "
                    f"{len(t.assignments)} assignments provided.",
                )
            if not body.validate_only:
                broker.state.add_partitions(t.name, t.count)
            results.append({"name": t.name, "error_code": 0, "error_message": None})
        except TopicError as exc:
            results.append({"name": t.name, "error_code": exc.code, "error_message": exc.message})
    return {"throttle_time": 0, "results": results}


def create_partitions_error(req: Request, code: int) -> dict[str, Any]:
    return {
        "results": [
            {"name": t.name, "error_code": code, "error_message": "injected fault"}
            for t in req.body.topics
        ]
    }


_RESOURCE_TOPIC = 2
_RESOURCE_BROKER = 4
_BROKER_CONFIGS = {
    "auto.create.topics.enable": "false",
    "num.partitions": "1",
    "default.replication.factor": "1",
    "offsets.topic.replication.factor": "1",
}


async def describe_configs(broker: Broker, req: Request) -> dict[str, Any]:
    results = []
    for res in req.body.resources:
        entry: dict[str, Any] = {
            "resource_type": res.resource_type,
            "resource_name": res.resource_name,
            "error_code": 0,
        }
        if res.resource_type == _RESOURCE_TOPIC:
            topic = broker.state.topics.get(res.resource_name)
            if topic is None:
                entry.update(
                    error_code=3,
                    error_message=(f"Topic {res.resource_name} does not exist."),
                    configs=(),
                )
                results.append(entry)
                continue
            values = _configs_of(topic.configs)
            explicit = topic.configs
        elif res.resource_type == _RESOURCE_BROKER:
            values = {
                **_BROKER_CONFIGS,
                "auto.create.topics.enable": str(broker.auto_create_topics).lower(),
            }
            explicit = {}
        else:
            entry.update(error_code=42, error_message="Unsupported resource type", configs=())
            results.append(entry)
            continue
        keys = res.configuration_keys
        wanted = sorted(values) if keys is None else [k for k in keys if k in values]
        entry["configs"] = [
            {
                "name": k,
                "value": values[k],
                "read_only": False,
                "is_default": k not in explicit,
                "config_source": 1 if k in explicit else 5,
                "is_sensitive": False,
                "synonyms": (),
                "config_type": 0,
                "documentation": None,
            }
            for k in wanted
        ]
        results.append(entry)
    return {"throttle_time": 0, "results": results}


def describe_configs_error(req: Request, code: int) -> dict[str, Any]:
    return {
        "results": [
            {
                "resource_type": r.resource_type,
                "resource_name": r.resource_name,
                "error_code": code,
                "configs": (),
            }
            for r in req.body.resources
        ]
    }


def _alter_topic_configs(broker: Broker, req: Request, incremental: bool) -> dict[str, Any]:
    body = req.body
    responses = []
    for res in body.resources:
        entry: dict[str, Any] = {
            "resource_type": res.resource_type,
            "resource_name": res.resource_name,
            "error_code": 0,
            "error_message": None,
        }
        topic = broker.state.topics.get(res.resource_name)
        if res.resource_type != _RESOURCE_TOPIC:
            entry.update(
                error_code=42,
                error_message="only topic configs can be altered on the development broker",
            )
        elif topic is None:
            entry.update(error_code=3, error_message=f"Topic {res.resource_name} does not exist.")
        else:
            new = {} if not incremental else dict(topic.configs)
            for c in res.configs:
                op = getattr(c, "config_operation", 0)
                if op == 1:  # DELETE
                    new.pop(c.name, None)
                elif op in (0, 2) and c.value is not None:  # SET, APPEND (single-valued here)
                    new[c.name] = c.value
                elif op == 3:  # SUBTRACT
                    new.pop(c.name, None)
            try:
                validate_topic_configs(new)
            except TopicError as exc:
                entry.update(error_code=exc.code, error_message=exc.message)
            else:
                if not body.validate_only:
                    broker.state.set_topic_configs(topic.name, new)
        responses.append(entry)
    return {"throttle_time": 0, "responses": responses}


async def incremental_alter_configs(broker: Broker, req: Request) -> dict[str, Any]:
    return _alter_topic_configs(broker, req, incremental=True)


async def alter_configs(broker: Broker, req: Request) -> dict[str, Any]:
    return _alter_topic_configs(broker, req, incremental=False)


def alter_configs_error(req: Request, code: int) -> dict[str, Any]:
    return {
        "responses": [
            {
                "resource_type": r.resource_type,
                "resource_name": r.resource_name,
                "error_code": code,
                "error_message": "injected fault",
            }
            for r in req.body.resources
        ]
    }
