"""Kafka configuration rendering, the jar-copy marker and the secure listener (stack.kafka)."""

from __future__ import annotations

import base64
import ssl
from pathlib import Path

import pytest

from common.kafka_client import kafka_client_kwargs
from common.settings import KafkaSettings
from stack.errors import ServiceStartError
from stack.kafka import (
    KafkaServer,
    new_cluster_id,
    render_log4j2,
    render_server_properties,
)
from stack.kafka_secure import SCRAM_USERNAME, SecureListener, secure_kafka_settings
from stack.settings import StackSettings


def _properties(text: str) -> dict[str, str]:
    pairs = (line.split("=", 1) for line in text.splitlines() if line and not line.startswith("#"))
    return dict(pairs)


def test_server_properties_single_node_kraft(tmp_path: Path) -> None:
    """The rendered config is one KRaft broker+controller on loopback with every RF at 1."""
    settings = StackSettings(state_dir=tmp_path, kafka_port=29092, kafka_controller_port=29093)
    props = _properties(render_server_properties(settings, tmp_path / "data"))
    assert props["process.roles"] == "broker,controller"
    assert props["controller.quorum.voters"] == f"{props['node.id']}@127.0.0.1:29093"
    assert props["listeners"] == "PLAINTEXT://127.0.0.1:29092,CONTROLLER://127.0.0.1:29093"
    assert props["advertised.listeners"] == "PLAINTEXT://127.0.0.1:29092"
    assert props["log.dirs"] == str(tmp_path / "data")
    for key in (
        "default.replication.factor",
        "offsets.topic.replication.factor",
        "transaction.state.log.replication.factor",
        "transaction.state.log.min.isr",
        "min.insync.replicas",
    ):
        assert props[key] == "1", key
    assert props["group.initial.rebalance.delay.ms"] == "0"


def test_log4j2_writes_to_the_given_file(tmp_path: Path) -> None:
    """The log4j2 config has a file appender on the given path as the root logger's target."""
    log_file = tmp_path / "logs" / "server.log"
    text = render_log4j2(log_file)
    assert f"appender.file.fileName = {log_file}" in text
    assert "rootLogger.appenderRef.file.ref = file" in text


def test_cluster_id_is_16_bytes_urlsafe() -> None:
    """Cluster ids decode to 16 bytes, use Kafka's 22-character form and are random."""
    first, second = new_cluster_id(), new_cluster_id()
    assert len(first) == 22
    assert "=" not in first
    assert len(base64.urlsafe_b64decode(first + "==")) == 16
    assert first != second


def test_cluster_id_never_starts_with_a_dash(monkeypatch: pytest.MonkeyPatch) -> None:
    """An id the storage tool would read as an option (``-t -abc...``) is drawn again."""
    import uuid

    dashed = uuid.UUID(bytes=base64.urlsafe_b64decode("-" + "A" * 21 + "=="))
    plain = uuid.UUID(int=1)
    draws = iter([dashed, plain])
    monkeypatch.setattr("stack.kafka.uuid.uuid4", lambda: next(draws))
    assert new_cluster_id() == base64.urlsafe_b64encode(plain.bytes).decode().rstrip("=")


def test_jars_marker_tracks_the_pom(tmp_path: Path) -> None:
    """jars_ready() is true only when the marker holds the current pom's hash."""
    pom = tmp_path / "pom.xml"
    pom.write_text("<project>one</project>", encoding="utf-8")
    server = KafkaServer(StackSettings(state_dir=tmp_path / "state"), pom_path=pom)
    assert not server.jars_ready()
    server.libs_dir.mkdir(parents=True)
    marker = server.libs_dir / ".modstream-pom.sha256"
    marker.write_text(server._pom_hash(), encoding="ascii")
    assert server.jars_ready()
    assert server.ensure_jars() is False  # nothing to copy: maven is not even looked up
    pom.write_text("<project>two</project>", encoding="utf-8")
    assert not server.jars_ready()


def test_paths_live_under_the_state_dir(tmp_path: Path) -> None:
    """Data, logs, config and pid file of Kafka are all inside <state_dir>/kafka."""
    server = KafkaServer(StackSettings(state_dir=tmp_path))
    for path in (server.data_dir, server.log_path, server.properties_path, server.pid_file.path):
        assert path.is_relative_to(tmp_path / "kafka")
    assert server.marker == str(server.properties_path)
    argv = server._java_argv("kafka.Kafka", "x")
    assert "-Xmx512m" in argv
    assert f"-Dlog4j2.configurationFile={server.log4j2_path}" in argv


def _secure(tmp_path: Path) -> StackSettings:
    return StackSettings(
        state_dir=tmp_path,
        kafka_port=29092,
        kafka_controller_port=29093,
        kafka_secure=True,
        kafka_secure_port=29094,
    )


def test_plaintext_only_without_kafka_secure(tmp_path: Path) -> None:
    """Without kafka_secure nothing about SASL or TLS is rendered and only two ports are bound."""
    settings = StackSettings(state_dir=tmp_path, kafka_port=29092, kafka_controller_port=29093)
    text = render_server_properties(settings, tmp_path / "data")
    assert "SASL" not in text
    assert "ssl." not in text
    assert KafkaServer(settings).ports() == (29092, 29093)


def test_secure_listener_beside_plaintext(tmp_path: Path) -> None:
    """kafka_secure adds a SASL_SSL listener (SCRAM-SHA-512, PEM key store) and keeps PLAINTEXT
    for clients, the brokers and the controller."""
    settings = _secure(tmp_path)
    props = _properties(render_server_properties(settings, tmp_path / "data"))
    listener = SecureListener(settings)
    assert props["listeners"] == (
        "PLAINTEXT://127.0.0.1:29092,SASL_SSL://127.0.0.1:29094,CONTROLLER://127.0.0.1:29093"
    )
    assert props["advertised.listeners"] == "PLAINTEXT://127.0.0.1:29092,SASL_SSL://127.0.0.1:29094"
    assert props["listener.security.protocol.map"] == (
        "PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL,CONTROLLER:PLAINTEXT"
    )
    assert props["inter.broker.listener.name"] == "PLAINTEXT"
    assert props["listener.name.sasl_ssl.sasl.enabled.mechanisms"] == "SCRAM-SHA-512"
    assert props["listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config"].startswith(
        "org.apache.kafka.common.security.scram.ScramLoginModule required"
    )
    assert props["listener.name.sasl_ssl.ssl.keystore.type"] == "PEM"
    assert props["listener.name.sasl_ssl.ssl.keystore.location"] == str(listener.keystore)
    assert KafkaServer(settings).ports() == (29092, 29093, 29094)


def test_secure_files_are_private_and_kept(tmp_path: Path) -> None:
    """prepare() makes a CA, a 0600 key store and a 0600 client.env; a second prepare keeps the
    same password and certificates."""
    listener = SecureListener(_secure(tmp_path))
    listener.prepare()
    for path in (listener.keystore, listener.credentials_path):
        assert path.stat().st_mode & 0o777 == 0o600
    keystore = listener.keystore.read_text(encoding="ascii")
    assert "BEGIN PRIVATE KEY" in keystore
    assert "BEGIN CERTIFICATE" in keystore
    password = listener.password().get_secret_value()
    ca = listener.ca_cert.read_bytes()
    listener.prepare()
    assert listener.password().get_secret_value() == password
    assert listener.ca_cert.read_bytes() == ca
    assert len(password) >= 24


def test_secure_kafka_settings_read_client_env(tmp_path: Path) -> None:
    """secure_kafka_settings points the given settings at the SASL_SSL listener with the stack's
    user, password and CA, keeping their topics; the mapping yields a verifying TLS context."""
    settings = _secure(tmp_path)
    listener = SecureListener(settings)
    listener.prepare()
    kafka = secure_kafka_settings(settings, KafkaSettings(input_topic="mine"))
    assert kafka.bootstrap_servers == "127.0.0.1:29094"
    assert kafka.security_protocol == "SASL_SSL"
    assert kafka.sasl_mechanism == "SCRAM-SHA-512"
    assert kafka.sasl_username == SCRAM_USERNAME
    assert kafka.sasl_password == listener.password()
    assert kafka.ssl_cafile == listener.ca_cert
    assert kafka.input_topic == "mine"
    context = kafka_client_kwargs(kafka)["ssl_context"]
    assert isinstance(context, ssl.SSLContext)
    assert context.check_hostname


def test_secure_kafka_settings_without_a_secure_stack(tmp_path: Path) -> None:
    """Asking for the secure settings of a stack never started with kafka_secure says so."""
    with pytest.raises(ServiceStartError, match="MODSTREAM_STACK__KAFKA_SECURE=true"):
        secure_kafka_settings(_secure(tmp_path), KafkaSettings())


def test_running_broker_without_the_secure_listener_is_outdated(tmp_path: Path) -> None:
    """A broker started from properties without SASL_SSL is outdated only once kafka_secure is
    asked for (so up restarts it with the listener); a plaintext stack is never outdated."""
    plain = StackSettings(state_dir=tmp_path, kafka_port=29092, kafka_controller_port=29093)
    server = KafkaServer(plain)
    server.directory.mkdir(parents=True)
    server.properties_path.write_text(render_server_properties(plain, server.data_dir))
    assert not server.is_outdated(1)
    secure = KafkaServer(_secure(tmp_path))
    assert secure.is_outdated(1)
    secure.properties_path.write_text(render_server_properties(_secure(tmp_path), tmp_path))
    assert not secure.is_outdated(1)
