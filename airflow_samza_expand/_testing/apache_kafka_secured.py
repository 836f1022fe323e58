"""The secured mode of the Apache Kafka launcher (test/dev tool only): a SASL_PLAINTEXT listener
with SCRAM-SHA-512 users and the standard KRaft authorizer, ACLs enforced.

    with ApacheKafkaProcess(secured=True) as kafka:     # admin super-user made at format time
        create_scram_user(kafka.client_config, "alice", "alice-secret")
        grant(kafka.client_config, "User:alice", [("TOPIC", "orders", "LITERAL", "READ")])

The admin user exists from the first start: `kafka-storage format --add-scram` writes its SCRAM
credential into the KRaft metadata (KIP-900), so the broker can authenticate itself on its own
SASL listener before any ACL or user exists. The controller listener stays PLAINTEXT on
loopback; its anonymous principal is a super-user (the broker's controller channel needs it).
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable, Mapping

from .launch import wait_until

SCRAM_MECHANISM = "SCRAM-SHA-512"
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
SCRAM_ITERATIONS = 4096


def new_password() -> str:
    """A random password (letters and digits only: safe in JAAS and in --add-scram)."""
    return secrets.token_hex(16)


def secured_server_properties(
    host: str, port: int, controller_port: int, admin_user: str, admin_password: str
) -> dict[str, str]:
    """Server properties that replace the PLAINTEXT client listener by SASL_PLAINTEXT/SCRAM and
    turn on the standard authorizer (deny when no ACL matches)."""
    jaas = (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="{admin_user}" password="{admin_password}";'
    )
    return {
        "listeners": f"SASL_PLAINTEXT://{host}:{port},CONTROLLER://{host}:{controller_port}",
        "advertised.listeners": f"SASL_PLAINTEXT://{host}:{port}",
        "listener.security.protocol.map": "SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
        "inter.broker.listener.name": "SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": SCRAM_MECHANISM,
        "sasl.mechanism.inter.broker.protocol": SCRAM_MECHANISM,
        f"listener.name.sasl_plaintext.{SCRAM_MECHANISM.lower()}.sasl.jaas.config": jaas,
        "authorizer.class.name": AUTHORIZER,
        "allow.everyone.if.no.acl.found": "false",
        "super.users": f"User:{admin_user};User:ANONYMOUS",
    }


def override_properties(text: str, overrides: Mapping[str, str]) -> str:
    """`text` (key=value lines) with each key of `overrides` replaced or appended."""
    lines, seen = [], set()
    for line in text.splitlines():
        key = line.partition("=")[0].strip()
        if key in overrides:
            lines.append(f"{key}={overrides[key]}")
            seen.add(key)
        else:
            lines.append(line)
    lines += [f"{key}={value}" for key, value in overrides.items() if key not in seen]
    return "\n".join(lines) + "\n"


def scram_format_args(user: str, password: str) -> list[str]:
    """`kafka-storage format` arguments that create a SCRAM user in the metadata log."""
    return ["--add-scram", f"{SCRAM_MECHANISM}=[name={user},password={password}]"]


def sasl_client_config(bootstrap: str, user: str, password: str) -> dict[str, str]:
    """librdkafka settings of a SCRAM user on the secured listener."""
    return {
        "bootstrap.servers": bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": SCRAM_MECHANISM,
        "sasl.username": user,
        "sasl.password": password,
    }


def create_scram_user(
    admin_config: Mapping[str, str], user: str, password: str, timeout_s: float = 30.0
) -> None:
    """Create (or reset) a SCRAM-SHA-512 user through the admin super-user."""
    from confluent_kafka.admin import (
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    from airflow_samza_expand._kafka.clients import AdminClient

    admin = AdminClient(dict(admin_config))
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, SCRAM_ITERATIONS)
    upsert = UserScramCredentialUpsertion(user, info, password.encode())
    for future in admin.alter_user_scram_credentials([upsert]).values():
        future.result(timeout=timeout_s)

    def known() -> bool:  # the broker serves it from its metadata image: wait for it
        try:
            described = admin.describe_user_scram_credentials([user])[user].result(timeout_s)
        except Exception:  # noqa: BLE001 - not in the broker's image yet
            return False
        return bool(described.scram_credential_infos)

    wait_until(f"SCRAM user {user!r} on the broker", known, timeout_s=timeout_s)


def grant(
    admin_config: Mapping[str, str],
    principal: str,
    rules: Iterable[tuple[str, str, str, str]],
    timeout_s: float = 30.0,
) -> int:
    """Create ALLOW ACLs `(resource type, name, pattern type, operation)` for `principal` on
    any host; returns how many bindings were created."""
    from confluent_kafka.admin import (
        AclBinding,
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )

    from airflow_samza_expand._kafka.clients import AdminClient

    bindings = [
        AclBinding(
            ResourceType[resource],
            name,
            ResourcePatternType[pattern],
            principal,
            "*",
            AclOperation[operation],
            AclPermissionType.ALLOW,
        )
        for resource, name, pattern, operation in dict.fromkeys(rules)
    ]
    if not bindings:
        return 0
    admin = AdminClient(dict(admin_config))
    for future in admin.create_acls(bindings, request_timeout=timeout_s).values():
        future.result(timeout=timeout_s)
    wanted = set(map(str, bindings))
    mine = AclBindingFilter(
        ResourceType.ANY, None, ResourcePatternType.ANY, principal, None,
        AclOperation.ANY, AclPermissionType.ANY,
    )  # fmt: skip

    def visible() -> bool:  # the broker's authorizer applies the metadata a moment later
        found = admin.describe_acls(mine, request_timeout=timeout_s).result(timeout_s)
        return wanted <= set(map(str, found))

    wait_until(f"the ACLs of {principal} on the broker", visible, timeout_s=timeout_s)
    return len(bindings)


__all__ = [
    "AUTHORIZER",
    "SCRAM_MECHANISM",
    "create_scram_user",
    "grant",
    "new_password",
    "override_properties",
    "sasl_client_config",
    "scram_format_args",
    "secured_server_properties",
]
