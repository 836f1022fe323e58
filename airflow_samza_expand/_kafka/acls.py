"""The least-privilege Kafka ACLs of each actor, as data (the tests grant exactly these; the
ACL table of docs/deployments.md is `acl_table_markdown()`).

Actors: `airflow` (every step of the expansion DAG and the watcher: the union of `STEP_RULES`),
`spark-job` (the PySpark job) and `demo` (the demo's producer, topic setup and verifier).
Resource names are templates: `{inputs}` (each input topic of the job), `{output}` (the job's
output topic), `{coordinator}` (the coordinator topic, default `__samza_coordinator_<job>`),
`{job}` (the job's consumer group = the job name), `{lease_topic}` / `{lease_group}` (the job's
active lease, `__samza_active_<job>` / `<job>.active`). A name without braces is
taken as it is: the plan's reader discovery (`_protocol.steps.plan.readers`) needs the coordinator
topics of every managed job (the prefix `__samza_coordinator_`, a PREFIXED ACL) and DESCRIBE on
every group (`*`), because Kafka lists only the topics and groups a principal may DESCRIBE: without
them the other readers of a topic are invisible and ``other_jobs="refuse"`` cannot refuse.

Read-only clients that only `assign()` partitions (the coordinator store's reader, the
partitioner sampler, the demo's verifier) need no group ACL: they never join or commit.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from airflow_samza_expand._kafka.membership import lease_group, lease_topic
from airflow_samza_expand.core._names import coordinator_topic


@dataclass(frozen=True)
class AclRule:
    """One ALLOW ACL: `operation` on the `resource` (TOPIC/GROUP) named by `name` (template)."""

    resource: str
    name: str
    operation: str
    why: str
    pattern: str = "LITERAL"  # or PREFIXED: every resource whose name starts with `name`


_DESCRIBE_INPUTS = AclRule("TOPIC", "{inputs}", "DESCRIBE", "partition counts, end offsets")
_READ_COORD = AclRule("TOPIC", "{coordinator}", "READ", "read the coordinator records")
_WRITE_COORD = AclRule("TOPIC", "{coordinator}", "WRITE", "write expansion records, leases")
_CREATE_COORD = AclRule(
    "TOPIC", "{coordinator}", "CREATE", "create it on first use (drop if created beforehand)"
)
_COORD_PREFIX = coordinator_topic("x")[:-1]  # __samza_coordinator_
_DISCOVER = (
    AclRule("TOPIC", _COORD_PREFIX, "DESCRIBE", "find the managed jobs (other_jobs)", "PREFIXED"),
    AclRule("TOPIC", _COORD_PREFIX, "READ", "read their job models (other_jobs)", "PREFIXED"),
    AclRule("GROUP", "*", "DESCRIBE", "list the groups reading a grown topic (warning)"),
)

# The Airflow side, step by step (plan -> expand -> barrier -> stop -> write -> submit
# -> ack; the watcher DAG watches partition counts).
STEP_RULES: Mapping[str, tuple[AclRule, ...]] = {
    "plan": (
        _DESCRIBE_INPUTS,
        AclRule("TOPIC", "{inputs}", "READ", "sample keyed records (partitioner check)"),
        _READ_COORD,
        _WRITE_COORD,
        _CREATE_COORD,
        *_DISCOVER,
    ),
    "expand": (
        _DESCRIBE_INPUTS,
        AclRule("TOPIC", "{inputs}", "ALTER", "add partitions (CreatePartitions)"),
        _READ_COORD,
        _WRITE_COORD,
    ),
    "barrier": (
        _DESCRIBE_INPUTS,
        AclRule("TOPIC", "{inputs}", "READ", "read placements after the expansion (proof)"),
        AclRule("GROUP", "{job}", "DESCRIBE", "the job's committed offsets (OffsetFetch)"),
        _READ_COORD,
        _WRITE_COORD,
    ),
    "stop": (_READ_COORD, _WRITE_COORD),
    "write": (_READ_COORD, _WRITE_COORD),
    "ack": (_READ_COORD, _WRITE_COORD),
    "watcher": (_DESCRIBE_INPUTS,),
}

ACTOR_RULES: Mapping[str, tuple[AclRule, ...]] = {
    "airflow": tuple(dict.fromkeys(rule for rules in STEP_RULES.values() for rule in rules)),
    "spark-job": (
        AclRule("TOPIC", "{inputs}", "READ", "fetch its partitions (assign)"),
        AclRule("GROUP", "{job}", "READ", "commit progress as group offsets"),
        AclRule("TOPIC", "{output}", "WRITE", "produce the processor outputs"),
        AclRule("TOPIC", "{output}", "DESCRIBE", "check the output topic exists"),
        _READ_COORD,
        AclRule("TOPIC", "{coordinator}", "WRITE", "heartbeats, job model v1, active lease"),
        _CREATE_COORD,
        AclRule("TOPIC", "{lease_topic}", "CREATE", "create the active-lease topic on first use"),
        AclRule("TOPIC", "{lease_topic}", "DESCRIBE", "the active-lease topic's metadata"),
        AclRule("TOPIC", "{lease_topic}", "READ", "join the active lease"),
        AclRule("GROUP", "{lease_group}", "READ", "the active lease's group membership"),
    ),
    "demo": (
        AclRule("TOPIC", "{inputs}", "CREATE", "create the input topic"),
        AclRule("TOPIC", "{output}", "CREATE", "create the output topic"),
        AclRule("TOPIC", "{inputs}", "WRITE", "the keyed producer"),
        AclRule("TOPIC", "{output}", "READ", "the verifier reads the outputs (assign)"),
    ),
}


def resolve(
    actor: str,
    *,
    job: str,
    inputs: Iterable[str],
    output: str | None = None,
    coordinator: str | None = None,
) -> list[tuple[str, str, str, str]]:
    """`(resource type, name, pattern type, operation)` of every ACL `actor` needs for `job`
    (an `airflow` step name works too), no duplicates."""
    rules = ACTOR_RULES.get(actor) or STEP_RULES.get(actor)
    if rules is None:
        known = ", ".join([*ACTOR_RULES, *STEP_RULES])
        raise ValueError(f"unknown actor {actor!r} - use one of {known}")
    names = {
        "{job}": [job],
        "{inputs}": list(inputs),
        "{output}": [output] if output else [],
        "{coordinator}": [coordinator or coordinator_topic(job)],
        "{lease_topic}": [lease_topic(job)],
        "{lease_group}": [lease_group(job)],
    }
    resolved = [
        (rule.resource, name, rule.pattern, rule.operation)
        for rule in rules
        for name in names.get(rule.name, [rule.name])
    ]
    return list(dict.fromkeys(resolved))


def acl_table_markdown() -> str:
    """docs/deployments.md's ACL table: actor, resource, name, operation, why (by step)."""
    lines = ["| actor | resource | name | operation | why |", "|---|---|---|---|---|"]
    actors: list[tuple[str, Iterable[AclRule]]] = [
        (f"airflow: {step}", rules) for step, rules in STEP_RULES.items()
    ]
    actors += [(actor, rules) for actor, rules in ACTOR_RULES.items() if actor != "airflow"]
    for label, rules in actors:
        for rule in rules:
            name = f"`{rule.name.strip('{}')}`"
            if rule.pattern == "PREFIXED":
                name = f"`{rule.name}*` (prefixed)"
            lines.append(f"| {label} | {rule.resource} | {name} | {rule.operation} | {rule.why} |")
    return "\n".join(lines)


__all__ = ["ACTOR_RULES", "STEP_RULES", "AclRule", "acl_table_markdown", "resolve"]
