"""Kafka configuration rendering and the jar-copy marker (stack.kafka)."""

from __future__ import annotations

import base64
from pathlib import Path

from stack.kafka import (
    KafkaServer,
    new_cluster_id,
    render_log4j2,
    render_server_properties,
)
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
