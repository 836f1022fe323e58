"""client_config builds librdkafka dicts from a file, arguments, overrides; redact hides secrets."""

from __future__ import annotations

import pytest

from airflow_samza_expand._kafka.config import client_config, read_config_file, redact


def test_file_then_bootstrap_then_overrides(tmp_path):
    path = tmp_path / "client.properties"
    path.write_text(
        "# comment\n! also a comment\n\nbootstrap.servers = file:9092\n"
        "security.protocol=SASL_SSL\nsasl.password=hunter2\nclient.id=from-file\n"
    )
    config = client_config("arg:9092", str(path), client_id="override", enable_idempotence=True)
    assert config == {
        "bootstrap.servers": "arg:9092",
        "security.protocol": "SASL_SSL",
        "sasl.password": "hunter2",
        "client.id": "override",
        "enable.idempotence": "true",
    }


def test_dotted_override_and_none_dropped():
    config = client_config("h:1", **{"socket.timeout.ms": 1000, "client.id": None})
    assert config == {"bootstrap.servers": "h:1", "socket.timeout.ms": "1000"}


def test_missing_bootstrap_is_a_clear_error():
    with pytest.raises(ValueError, match="bootstrap_servers="):
        client_config()


def test_bad_file_line_names_line_not_content(tmp_path):
    path = tmp_path / "bad.properties"
    path.write_text("bootstrap.servers=h:1\nmysecretvalue\n")
    with pytest.raises(ValueError, match=r"bad.properties:2: not a key=value line") as info:
        read_config_file(path)
    assert "mysecretvalue" not in str(info.value)


def test_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match="cannot read Kafka client config file"):
        client_config("h:1", str(tmp_path / "absent.properties"))


def test_redact_masks_secrets_only():
    config = {
        "bootstrap.servers": "h:1",
        "sasl.username": "alice",
        "sasl.password": "pw",
        "ssl.key.password": "kp",
        "ssl.key.pem": "-----BEGIN",
        "sasl.oauthbearer.client.secret": "cs",
        "security.protocol": "SASL_SSL",
    }
    shown = redact(config)
    assert shown["bootstrap.servers"] == "h:1"
    assert shown["security.protocol"] == "SASL_SSL"
    for key in (
        "sasl.username",
        "sasl.password",
        "ssl.key.password",
        "ssl.key.pem",
        "sasl.oauthbearer.client.secret",
    ):
        assert shown[key] == "***", key
    assert config["sasl.password"] == "pw"  # the input is untouched


def test_admin_and_store_reprs_hide_secrets():
    from airflow_samza_expand._kafka.admin import KafkaAdmin
    from airflow_samza_expand.store._kafka import KafkaCoordinatorStore

    config = client_config("127.0.0.1:9", **{"sasl.username": "alice", "sasl.password": "pw2"})
    for thing in (KafkaAdmin(config), KafkaCoordinatorStore(config, "job")):
        assert "pw2" not in repr(thing) and "alice" not in repr(thing)
        assert "127.0.0.1:9" in repr(thing)
