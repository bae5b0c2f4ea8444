"""``modstream worker`` turns refused Kafka access and unusable security files into exit codes."""

from __future__ import annotations

import argparse

import pytest
from structlog.testing import capture_logs

from common.kafka_access import KafkaAuthenticationError
from common.settings import KafkaSettings
from worker import command

_PASSWORD = "pw-never-logged-123"


def _quiet_logging(monkeypatch: pytest.MonkeyPatch) -> None:
    """Keep structlog as ``capture_logs`` set it (``_run`` would configure JSON on stderr)."""
    monkeypatch.setattr(command, "configure_logging", lambda level: None)


def test_refused_login_logs_one_event_and_exits_3(monkeypatch: pytest.MonkeyPatch) -> None:
    """A KafkaAuthenticationError from the start-up check logs kafka_authentication_failed with
    the broker and no password, and the command exits 3 before the worker runs."""
    for name, value in {
        "MODSTREAM_KAFKA__SECURITY_PROTOCOL": "SASL_PLAINTEXT",
        "MODSTREAM_KAFKA__SASL_MECHANISM": "SCRAM-SHA-256",
        "MODSTREAM_KAFKA__SASL_USERNAME": "svc",
        "MODSTREAM_KAFKA__SASL_PASSWORD": _PASSWORD,
    }.items():
        monkeypatch.setenv(name, value)

    async def refuse(kafka: KafkaSettings) -> None:
        raise KafkaAuthenticationError(
            "refused", broker="kafka.example:9096", reason="SaslAuthenticationFailed"
        )

    async def never_run(self: command.Worker, stop: object) -> None:
        raise AssertionError("the worker must not start after a refused login")

    monkeypatch.setattr(command, "verify_kafka_access", refuse)
    monkeypatch.setattr(command.Worker, "run", never_run)
    _quiet_logging(monkeypatch)
    with capture_logs() as events, pytest.raises(SystemExit) as exited:
        command._run_worker(argparse.Namespace())
    assert exited.value.code == 3
    failures = [e for e in events if e["event"] == "kafka_authentication_failed"]
    assert len(failures) == 1
    assert failures[0]["log_level"] == "error"
    assert failures[0]["broker"] == "kafka.example:9096"
    assert _PASSWORD not in repr(events)


def test_unusable_token_provider_exits_2(monkeypatch: pytest.MonkeyPatch) -> None:
    """An OAUTHBEARER token provider that cannot be imported logs kafka_settings_unusable and
    the command exits 2 without connecting anywhere."""
    for name, value in {
        "MODSTREAM_KAFKA__SECURITY_PROTOCOL": "SASL_SSL",
        "MODSTREAM_KAFKA__SASL_MECHANISM": "OAUTHBEARER",
        "MODSTREAM_KAFKA__SASL_OAUTH_TOKEN_PROVIDER": "no_such_module_abc:Provider",
    }.items():
        monkeypatch.setenv(name, value)
    _quiet_logging(monkeypatch)
    with capture_logs() as events, pytest.raises(SystemExit) as exited:
        command._run_worker(argparse.Namespace())
    assert exited.value.code == 2
    unusable = [e for e in events if e["event"] == "kafka_settings_unusable"]
    assert len(unusable) == 1
    assert "no_such_module_abc" in str(unusable[0]["error"])
